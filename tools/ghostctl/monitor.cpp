// SPDX-License-Identifier: GPL-2.0
// monitor: export and import events from ghost.ko's generic netlink family.
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/socket.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <linux/ghost.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "progress.hpp"

namespace ghostctl {

namespace {

struct SockFree {
    void operator()(nl_sock* s) const { nl_socket_free(s); }
};

struct Event {
    int cmd = 0;
    std::uint32_t pid = 0;
    std::uint64_t bytes = 0;
    std::uint64_t frozen_ns = 0;
    std::int32_t result = 0;
    std::uint32_t flags = 0;
    std::string reason;
};

struct State {
    const MonitorArgs* args;
    long seen = 0;
};

std::string fate_name(int cmd, std::uint32_t flags) {
    if (cmd == GHOST_CMD_IMPORTED)
        return (flags & GHOST_IMPORT_PREPARE) ? "prepare" : "restore";
    if (flags & GHOST_EXPORT_RUN)
        return "run";
    if (flags & GHOST_EXPORT_STOP)
        return "stop";
    if (flags & GHOST_EXPORT_KILL)
        return "kill";
    return "?";
}

void print_event(const Event& e, bool as_json) {
    const char* what = e.cmd == GHOST_CMD_EXPORTED   ? "export"
                       : e.cmd == GHOST_CMD_IMPORTED ? "import"
                                                     : "unknown";
    if (as_json) {
        nlohmann::json j = {{"event", what},
                            {"pid", e.pid},
                            {"bytes", e.bytes},
                            {"result", e.result},
                            {"mode", fate_name(e.cmd, e.flags)},
                            {"flags", e.flags}};
        if (e.cmd == GHOST_CMD_EXPORTED)
            j["frozen_ns"] = e.frozen_ns;
        if (!e.reason.empty())
            j["reason"] = e.reason;
        fmt::print("{}\n", j.dump());
    } else if (e.result == 0) {
        fmt::print("{} pid {} ({}) ok: {}{}\n", what, e.pid, fate_name(e.cmd, e.flags),
                   human_bytes(e.bytes),
                   e.cmd == GHOST_CMD_EXPORTED
                       ? fmt::format(", frozen {:.2f} ms", static_cast<double>(e.frozen_ns) / 1e6)
                       : "");
    } else {
        fmt::print("{} pid {} ({}) failed: {}{}\n", what, e.pid, fate_name(e.cmd, e.flags),
                   std::error_code(-e.result, std::system_category()).message(),
                   e.reason.empty() ? "" : ": " + e.reason);
    }
    std::fflush(stdout);
}

int on_message(nl_msg* msg, void* arg) {
    auto* st = static_cast<State*>(arg);
    nlmsghdr* nlh = nlmsg_hdr(msg);
    auto* gh = static_cast<genlmsghdr*>(nlmsg_data(nlh));
    nlattr* a[GHOST_ATTR_MAX + 1];
    if (genlmsg_parse(nlh, 0, a, GHOST_ATTR_MAX, nullptr) != 0)
        return NL_SKIP;
    Event e;
    e.cmd = gh->cmd;
    if (a[GHOST_ATTR_PID])
        e.pid = nla_get_u32(a[GHOST_ATTR_PID]);
    if (a[GHOST_ATTR_BYTES])
        e.bytes = nla_get_u64(a[GHOST_ATTR_BYTES]);
    if (a[GHOST_ATTR_FROZEN_NS])
        e.frozen_ns = nla_get_u64(a[GHOST_ATTR_FROZEN_NS]);
    if (a[GHOST_ATTR_RESULT])
        e.result = static_cast<std::int32_t>(nla_get_u32(a[GHOST_ATTR_RESULT]));
    if (a[GHOST_ATTR_FLAGS])
        e.flags = nla_get_u32(a[GHOST_ATTR_FLAGS]);
    if (a[GHOST_ATTR_REASON])
        e.reason = nla_get_string(a[GHOST_ATTR_REASON]);
    print_event(e, st->args->json);
    ++st->seen;
    return NL_OK;
}

} // namespace

int cmd_monitor(const MonitorArgs& args) {
    std::unique_ptr<nl_sock, SockFree> sk(nl_socket_alloc());
    if (!sk)
        return fail("cannot allocate a netlink socket");
    if (int err = genl_connect(sk.get()); err < 0)
        return fail(fmt::format("cannot connect to generic netlink: {}", nl_geterror(err)));
    const int grp = genl_ctrl_resolve_grp(sk.get(), GHOST_GENL_NAME, GHOST_GENL_MCGRP_EVENTS);
    if (grp < 0)
        return fail(fmt::format("the netlink family \"{}\" is not there: is ghost.ko loaded? ({})",
                                GHOST_GENL_NAME, nl_geterror(grp)));
    State st{&args};
    nl_socket_disable_seq_check(sk.get());
    nl_socket_modify_cb(sk.get(), NL_CB_VALID, NL_CB_CUSTOM, on_message, &st);
    if (int err = nl_socket_add_membership(sk.get(), grp); err < 0)
        return fail(fmt::format("cannot join the ghost events group: {} (it needs "
                                "CAP_NET_ADMIN: run as root)",
                                nl_geterror(err)));
    if (!args.json)
        fmt::print(stderr, "ghostctl: watching ghost export/import events (Ctrl-C to stop)\n");
    while (args.count == 0 || st.seen < args.count) {
        const int err = nl_recvmsgs_default(sk.get());
        if (err < 0 && err != -NLE_INTR && err != -NLE_AGAIN)
            return fail(fmt::format("receiving events: {}", nl_geterror(err)));
    }
    return exit_ok;
}

} // namespace ghostctl
