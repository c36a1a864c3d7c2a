// SPDX-License-Identifier: GPL-2.0
#include "control.hpp"

#include <fmt/format.h>

#include "ghost/engine.hpp"
#include "json_text.hpp"

namespace migd {

namespace {

nlohmann::json error_reply(std::string message) {
    return {{"ok", false}, {"error", std::move(message)}};
}

nlohmann::json engine_reply(const Context& ctx) {
    auto engine = ghost::Engine::open(ghost::EngineKind::Auto, ctx.device);
    if (!engine)
        return error_reply(engine.error().what());
    auto info = (*engine)->info();
    if (!info)
        return error_reply(info.error().what());
    return {{"ok", true},
            {"engine", info->engine},
            {"version", info->version},
            {"features", ghost::feature_names(info->features)},
            {"image_version", info->image_version},
            {"image_min", info->image_min}};
}

} // namespace

nlohmann::json handle_request(std::string_view line, const Context& ctx, const Client& who,
                              const Emit& emit) {
    const auto req = parse_bounded(line);
    if (req.is_discarded() || !req.is_object())
        return error_reply("malformed request: expected one JSON object per line");
    const auto op = req.find("op");
    if (op == req.end() || !op->is_string())
        return error_reply("malformed request: missing string field \"op\"");

    const auto& name = op->get_ref<const std::string&>();
    if (name == "ping")
        return {{"ok", true}, {"daemon", "migd"}, {"version", GHOST_VERSION}};
    if (name == "engine")
        return engine_reply(ctx);
    static const char* const cluster_ops[] = {"migrate", "dup",     "checkpoint", "images",
                                              "restart", "ps",      "where",      "kill",
                                              "hosts",   "manifest"};
    for (const char* op : cluster_ops) {
        if (name != op)
            continue;
        if (!ctx.daemon)
            return error_reply(fmt::format("\"{}\" needs migd's cluster half, which this "
                                           "migd does not run",
                                           name));
        try {
            return ctx.daemon->local(req, who, emit);
        } catch (const std::exception& e) {
            // A request field of the wrong type (nlohmann throws on it).
            return error_reply(fmt::format("malformed request: {}", e.what()));
        }
    }
    return error_reply(fmt::format("unknown op \"{}\" (known: ping, engine, migrate, dup, "
                                   "checkpoint, images, restart, ps, where, kill, hosts, "
                                   "manifest)",
                                   name));
}

} // namespace migd
