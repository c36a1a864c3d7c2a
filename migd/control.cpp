// SPDX-License-Identifier: GPL-2.0
#include "control.hpp"

#include <fmt/format.h>

#include "ghost/engine.hpp"

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

nlohmann::json handle_request(std::string_view line, const Context& ctx) {
    const auto req = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
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
    return error_reply(fmt::format("unknown op \"{}\" (known: ping, engine)", name));
}

} // namespace migd
