// SPDX-License-Identifier: GPL-2.0
// bsprun's guard (see guard.hpp): placing it, ending it, and its program.
#include "guard.hpp"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "checkpoint.hpp"
#include "fence.hpp"
#include "keepalive.hpp"
#include "link.hpp"
#include "migd_client.hpp"
#include "rollback.hpp"
#include "wakeup.hpp"
#include "wire.hpp"

namespace ghost::bsp {

using nlohmann::json;

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::string self_path() {
    char self[PATH_MAX] = {};
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    return n > 0 ? std::string(self, static_cast<std::size_t>(n)) : "/proc/self/exe";
}

// Connects to the hub and waits: why=="" when told to stand down, else how
// the hub was lost.
wire::Loss watch(const std::string& hub, const wire::Key& key, const std::string& job,
                 const std::string& host) {
    auto ctx = wire::TlsContext::make(wire::TlsContext::Role::Client, key);
    if (!ctx)
        return {false, ctx.error().what()};
    auto fd = wire::connect_tcp(hub);
    if (!fd)
        return {false, fmt::format("cannot reach it: {}", fd.error().what())};
    wire::keep_alive(fd->get());
    auto link = wire::tls_connect(*ctx, std::move(*fd));
    if (!link)
        return {false, fmt::format("its handshake failed: {}", link.error().what())};
    wire::Writer w;
    w.u32(wire::kVersion);
    w.str(job);
    w.str(host);
    if (auto s = wire::send_frame(*link, wire::Type::GuardHello, w.data()); !s)
        return {false, fmt::format("cannot say hello: {}", s.error().what())};
    for (;;) {
        pollfd p{link->fd(), POLLIN | POLLRDHUP, 0};
        if (!link->pending() && ::poll(&p, 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            return {false, fmt::format("poll: {}", std::strerror(errno))};
        }
        if (p.revents & POLLERR) // keepalive gave up, or a reset
            return wire::loss_of(link->fd());
        auto f = wire::recv_frame(*link); // (TLS may block in it: tickets)
        if (!f)
            return {wire::silent_errno(f.error().code.value()), f.error().what()};
        if (f->type == wire::Type::GuardRelease)
            return {};
    }
}

// The control socket of host's migd: from --migd-sockets, else this
// host's default (the guard's environment is the home host's).
std::string socket_of(const json& plan, const std::string& host) {
    if (std::string sock = socket_in(plan.value("sockets", ""), host); !sock.empty())
        return sock;
    ::unsetenv("GHOST_MIGD_SOCKET");
    return std::string(migd_client::default_socket());
}

// The lost run's relays on other hosts hold the job's socket there: they
// go before the restart starts its own (each waited for, 5 s at most).
void kill_helpers(const json& plan, const std::string& sock) {
    for (const auto& gid : plan.value("helpers", std::vector<std::string>{})) {
        if (auto k = migd_kill(sock, gid, SIGKILL); !k)
            std::fprintf(stderr, "bsprun: guard: the lost run's relay %s: %s\n", gid.c_str(),
                         k.error().what().c_str());
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        int status = -1;
        while (!migd_gone(sock, gid, &status) && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

// The job's hosts but the lost home host, those whose migd answers when
// their control sockets are known (--migd-sockets); all of them else.
std::vector<std::string> hosts_left(const json& plan) {
    const std::string home = plan.value("home", ""), pattern = plan.value("sockets", "");
    std::vector<std::string> others;
    for (const auto& h : plan.value("hosts", std::vector<std::string>{}))
        if (h != home)
            others.push_back(h);
    return hosts_up(others, [&](const std::string& h) { return socket_in(pattern, h); });
}

} // namespace

std::string guard_host(const std::string& home, const std::string& server) {
    return server == home ? std::string() : server;
}

Result<Guard> Guard::start(HostsMover& mover, GuardPlan p) {
    const json plan = {{"host", p.host},        {"home", p.home},       {"hosts", p.hosts},
                       {"sockets", p.sockets},  {"restart", p.restart}, {"helpers", p.helpers},
                       {"program", self_path()}};
    auto h = start_helper(mover, p.host, p.log, {self_path(), "--guard"},
                          {{"GHOST_BSP_JOB", p.job},
                           {"GHOST_BSP_KEY", p.key_hex},
                           {"GHOST_BSP_HUB", p.hub},
                           {"GHOST_BSP_GUARD", plan.dump()},
                           {"GHOST_BSP_GUARD_WAIT", p.host == mover.home() ? "0" : "1"}},
                          fmt::format("the guard for {}", p.host));
    if (!h)
        return h.error();
    return Guard(mover, std::move(*h), p.log);
}

void Guard::finish() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!helper_gone(*mover_, proc_) && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    copy_log_out(log_);
}

int guard_main() {
    const json plan = json::parse(env("GHOST_BSP_GUARD"), nullptr, false);
    const auto key = wire::key_from_hex(env("GHOST_BSP_KEY"));
    const std::string job = env("GHOST_BSP_JOB"), hub = env("GHOST_BSP_HUB");
    if (plan.is_discarded() || !plan.is_object() || !key || job.empty() || hub.empty()) {
        std::fprintf(stderr, "bsprun --guard: bsprun starts its guard itself; it is not run by "
                             "hand\n");
        return 2;
    }
    const std::string host = plan.value("host", "");
    if (env("GHOST_BSP_GUARD_WAIT") == "1") // holds nothing migd cannot move
        wire::wait_for_wakeup([] { std::fflush(nullptr); });
    ::signal(SIGPIPE, SIG_IGN);
    const wire::Loss lost = watch(hub, *key, job, host);
    if (lost.why.empty())
        return 0;
    std::fprintf(stderr,
                 "bsprun: guard on %s: lost the hub of job %s at %s (%s): bsprun or its host %s "
                 "is gone\n",
                 host.c_str(), job.c_str(), hub.c_str(), lost.why.c_str(),
                 plan.value("home", "").c_str());
    if (lost.silent) {
        // Cut off rather than dead, the hub notices this side's silence
        // too and ends its run (hub/fence.hpp); that must be over first.
        std::fprintf(stderr,
                     "bsprun: guard on %s: waiting %d ms, so that a bsprun cut off from here "
                     "has stopped its run\n",
                     host.c_str(), kFenceWaitMs);
        std::fflush(nullptr);
        std::this_thread::sleep_for(std::chrono::milliseconds(kFenceWaitMs));
    }
    const int done = std::atoi(env("GHOST_BSPRUN_ROLLBACKS").c_str());
    if (done >= kMaxRollbacks) {
        std::fprintf(stderr,
                     "bsprun: guard: not again, after %d rollbacks in a row; the job "
                     "fails\n",
                     done);
        return 1;
    }
    const std::vector<std::string> up = hosts_left(plan);
    if (up.empty()) {
        std::fprintf(stderr, "bsprun: guard: no other host of the job answers; the job fails\n");
        return 1;
    }
    kill_helpers(plan, socket_of(plan, host));
    std::string list;
    for (const auto& h : up)
        list += (list.empty() ? "" : ",") + h;
    std::vector<std::string> args = {"bsprun", "--restart", job, "--hosts", list};
    for (const auto& a : plan.value("restart", std::vector<std::string>{}))
        args.push_back(a);
    std::string shown;
    for (const auto& a : args)
        shown += (shown.empty() ? "" : " ") + a;
    std::fprintf(stderr, "bsprun: guard on %s: rolling job %s back on %s: %s\n", host.c_str(),
                 job.c_str(), list.c_str(), shown.c_str());
    for (const char* v : {"GHOST_BSP_JOB", "GHOST_BSP_KEY", "GHOST_BSP_HUB", "GHOST_BSP_GUARD",
                          "GHOST_BSP_GUARD_WAIT"})
        ::unsetenv(v);
    ::setenv("GHOST_BSPRUN_ROLLBACKS", std::to_string(done + 1).c_str(), 1);
    std::vector<char*> av;
    for (auto& a : args)
        av.push_back(a.data());
    av.push_back(nullptr);
    std::fflush(nullptr);
    const std::string program = plan.value("program", "/proc/self/exe");
    ::execv(program.c_str(), av.data());
    std::fprintf(stderr, "bsprun: guard: cannot run %s: %s\n", program.c_str(),
                 std::strerror(errno));
    return 1;
}

} // namespace ghost::bsp
