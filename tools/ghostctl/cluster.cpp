// SPDX-License-Identifier: GPL-2.0
// The cluster commands: ghostctl asks its host's migd over the local socket
// (which knows the caller by SO_PEERCRED) to migrate, duplicate, checkpoint
// to a server, restart from one, list and signal processes by gid.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "ghost/fd.hpp"
#include "migd_client.hpp"
#include "progress.hpp"

namespace ghostctl {

namespace {

using nlohmann::json;

// One request to migd (tools/migd_client); progress lines drive the bar.
json migd_call(const Globals& g, const json& req, ProgressBar* bar) {
    auto cb = bar ? bar->callback() : ghost::ProgressFn{};
    json r =
        ghost::migd_client::call(g.migd_socket, req, [&](std::uint64_t done, std::uint64_t total) {
            if (cb)
                cb({done, total});
        });
    if (bar)
        bar->finish();
    return r;
}

int reply_or_fail(const json& r) {
    if (!r.value("ok", false))
        return fail(r.value("error", "migd refused without a reason"));
    return exit_ok;
}

std::string when(std::uint64_t ms) {
    const std::time_t t = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char s[32];
    std::strftime(s, sizeof(s), "%Y-%m-%d %H:%M:%S", &tm);
    return s;
}

} // namespace

int cmd_move(const Globals& g, const MoveArgs& a) {
    json req = {{"op", a.op}, {"to", a.to}};
    if (auto pid = parse_pid(a.target))
        req["pid"] = *pid;
    else if (a.target.find('-') != std::string::npos)
        req["gid"] = a.target; // gids are HOST-N
    else
        return usage_fail(fmt::format("'{}' is neither a pid nor a gid (HOST-N)", a.target));
    if (a.precopy >= 0)
        req["precopy"] = a.precopy == 1;
    ProgressBar bar(a.op == "migrate" ? "migrating" : "duplicating");
    const json r = migd_call(g, req, &bar);
    if (int rc = reply_or_fail(r); rc != exit_ok)
        return rc;
    if (a.json) {
        fmt::print("{}\n", r.dump(2));
        return exit_ok;
    }
    fmt::print("{}:{} gid {}\n", r.value("host", ""), r.value("pid", 0), r.value("gid", ""));
    if (const auto p = r.find("precopy"); p != r.end() && p->is_object())
        fmt::print(stderr, "ghostctl: {} pre-copy images, then {} stopped for {:.1f} ms\n",
                   p->value("rounds", json::array()).size(), a.target, r.value("downtime_ms", 0.0));
    if (r.contains("pending"))
        fmt::print(stderr, "ghostctl: note: {}\n", r.value("pending", ""));
    return exit_ok;
}

int cmd_checkpoint_server(const Globals& g, const CheckpointArgs& a) {
    ProgressBar bar("checkpointing");
    const json r = migd_call(g,
                             {{"op", "checkpoint"},
                              {"pids", a.pids},
                              {"server", a.server},
                              {"schedule", a.schedule},
                              {"leave_running", a.leave_running}},
                             a.pids.size() == 1 ? &bar : nullptr);
    if (a.json)
        fmt::print("{}\n", r.dump(2));
    else
        for (const auto& i : r.value("images", json::array()))
            if (i.value("ok", false))
                fmt::print("{} pid {} {}\n", i.value("id", ""), i.value("pid", 0),
                           human_bytes(i.value("bytes", std::uint64_t{0})));
    return reply_or_fail(r);
}

int cmd_images(const Globals& g, const ImagesArgs& a) {
    json req = {{"op", "images"}, {"server", a.server}};
    if (!a.rm.empty())
        req["rm"] = a.rm;
    const json r = migd_call(g, req, nullptr);
    if (int rc = reply_or_fail(r); rc != exit_ok)
        return rc;
    if (a.json) {
        fmt::print("{}\n", r.dump(2));
        return exit_ok;
    }
    if (!a.rm.empty()) {
        fmt::print("removed {}\n", a.rm);
        return exit_ok;
    }
    fmt::print("{:<20} {:<16} {:>10} {:<19} {:>6} {}\n", "ID", "COMMAND", "SIZE", "TIME", "OWNER",
               "FROM");
    for (const auto& i : r.value("images", json::array()))
        fmt::print("{:<20} {:<16} {:>10} {:<19} {:>6} {}\n", i.value("id", ""), i.value("comm", ""),
                   human_bytes(i.value("bytes", std::uint64_t{0})),
                   when(i.value("time_ms", std::uint64_t{0})), i.value("owner", 0u),
                   i.value("origin", ""));
    return exit_ok;
}

int cmd_restart_server(const Globals& g, const RestartArgs& a) {
    json req = {{"op", "restart"}, {"server", a.server}, {"id", a.input}};
    if (!a.on.empty())
        req["on"] = a.on;
    const json r = migd_call(g, req, nullptr);
    if (int rc = reply_or_fail(r); rc != exit_ok)
        return rc;
    fmt::print("{}:{} gid {}\n", r.value("host", ""), r.value("pid", 0), r.value("gid", ""));
    return exit_ok;
}

int cmd_ps(const Globals& g, bool json_out) {
    const json r = migd_call(g, {{"op", "ps"}}, nullptr);
    if (int rc = reply_or_fail(r); rc != exit_ok)
        return rc;
    if (json_out) {
        fmt::print("{}\n", r.dump(2));
        return exit_ok;
    }
    fmt::print("{:<14} {:<8} {:>8} {:<8} {:>6} {}\n", "GID", "HOST", "PID", "STATE", "UID",
               "COMMAND");
    for (const auto& p : r.value("processes", json::array()))
        fmt::print("{:<14} {:<8} {:>8} {:<8} {:>6} {}\n", p.value("gid", ""), p.value("host", ""),
                   p.value("pid", 0), p.value("state", ""), p.value("uid", 0u),
                   p.value("comm", ""));
    for (const auto& u : r.value("unreachable", json::array()))
        fmt::print(stderr, "ghostctl: {} did not answer: {}\n", u.value("host", ""),
                   u.value("error", ""));
    return exit_ok;
}

int cmd_hosts(const Globals& g, bool json_out) {
    const json r = migd_call(g, {{"op", "hosts"}}, nullptr);
    if (int rc = reply_or_fail(r); rc != exit_ok)
        return rc;
    if (json_out) {
        fmt::print("{}\n", r.dump(2));
        return exit_ok;
    }
    for (const auto& h : r.value("hosts", json::array()))
        fmt::print("{:<16} {}:{}{}\n", h.value("name", ""), h.value("address", ""),
                   h.value("port", 0), h.value("self", false) ? " (this host)" : "");
    return exit_ok;
}

int cmd_where(const Globals& g, const std::string& gid, bool json_out) {
    const json r = migd_call(g, {{"op", "where"}, {"gid", gid}}, nullptr);
    if (int rc = reply_or_fail(r); rc != exit_ok)
        return rc;
    if (json_out)
        fmt::print("{}\n", r.dump(2));
    else
        fmt::print("{}:{} {}\n", r.value("host", ""), r.value("pid", 0), r.value("state", ""));
    return exit_ok;
}

int cmd_kill(const Globals& g, const std::string& gid, const std::string& sig) {
    int signo = SIGTERM;
    if (!sig.empty()) {
        std::string s = sig.starts_with("SIG") ? sig.substr(3) : sig;
        char* end = nullptr;
        const long n = std::strtol(s.c_str(), &end, 10);
        if (!s.empty() && *end == '\0') {
            signo = static_cast<int>(n);
        } else {
            signo = 0;
            for (int i = 1; i < NSIG; ++i)
                if (const char* name = ::sigabbrev_np(i); name && s == name)
                    signo = i;
        }
        if (signo <= 0 || signo >= NSIG)
            return fail(
                fmt::format("unknown signal '{}' (a number or a name like TERM, KILL)", sig));
    }
    return reply_or_fail(migd_call(g, {{"op", "kill"}, {"gid", gid}, {"signal", signo}}, nullptr));
}

} // namespace ghostctl
