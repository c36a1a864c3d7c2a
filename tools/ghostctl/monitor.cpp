// SPDX-License-Identifier: GPL-2.0
// monitor: export and import events from ghost.ko's generic netlink family.
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "ghost/events.hpp"
#include "progress.hpp"

namespace ghostctl {

namespace {

void print_event(const ghost::Event& e, bool as_json) {
    const bool exported = e.kind == ghost::Event::Kind::Export;
    const char* what = exported ? "export" : "import";
    if (as_json) {
        nlohmann::json j = {{"event", what},      {"pid", e.pid},     {"bytes", e.bytes},
                            {"result", e.result}, {"mode", e.mode()}, {"flags", e.flags}};
        if (exported)
            j["frozen_ns"] = e.frozen_ns;
        if (!e.reason.empty())
            j["reason"] = e.reason;
        fmt::print("{}\n", j.dump());
    } else if (e.ok()) {
        fmt::print("{} pid {} ({}) ok: {}{}\n", what, e.pid, e.mode(), human_bytes(e.bytes),
                   exported
                       ? fmt::format(", frozen {:.2f} ms", static_cast<double>(e.frozen_ns) / 1e6)
                       : "");
    } else {
        fmt::print("{} pid {} ({}) failed: {}{}\n", what, e.pid, e.mode(),
                   std::error_code(-e.result, std::system_category()).message(),
                   e.reason.empty() ? "" : ": " + e.reason);
    }
    std::fflush(stdout);
}

} // namespace

int cmd_monitor(const MonitorArgs& args) {
    auto stream = ghost::EventStream::open();
    if (!stream)
        return fail(stream.error());
    if (!args.json)
        fmt::print(stderr, "ghostctl: watching ghost export/import events (Ctrl-C to stop)\n");
    for (long seen = 0; args.count == 0 || seen < args.count;) {
        auto e = stream->next();
        if (!e)
            return fail(e.error());
        if (*e) {
            print_event(**e, args.json);
            ++seen;
        }
    }
    return exit_ok;
}

} // namespace ghostctl
