// SPDX-License-Identifier: GPL-2.0
// bsp_init, bsp_begin, bsp_end, bsp_abort and the enquiry functions: how a
// VP finds its hub (GHOST_BSP_* from bsprun, or a hub and P-1 VPs forked
// here), and the errors every call shares.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "bsp.h"
#include "hub.hpp"
#include "state.hpp"
#include "sync_vp.hpp"
#include "wakeup.hpp"

namespace ghost::bsp::vp {

State& state() {
    static State s;
    return s;
}

namespace {

double seconds_on(clockid_t clock) {
    timespec t;
    ::clock_gettime(clock, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

} // namespace

double now_wall() {
    return seconds_on(CLOCK_MONOTONIC);
}

Moment now_moment() {
    return {seconds_on(CLOCK_MONOTONIC), seconds_on(CLOCK_REALTIME)};
}

double now_cpu() {
    return seconds_on(CLOCK_PROCESS_CPUTIME_ID);
}

namespace {

[[noreturn]] void tell_hub_and_exit(const std::string& text) {
    State& s = state();
    std::fflush(stdout);
    if (s.sock) {
        wire::Writer w;
        w.str(text);
        (void)wire::send_frame(s.sock, wire::Type::Abort, w.data());
    }
    std::exit(1);
}

int env_int(const char* name, const char* value) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || v < 0 || v > 1 << 20)
        die("bsp_begin", fmt::format("{}='{}' is not a process number", name, value));
    return static_cast<int>(v);
}

// Starts the hub and VPs 1..P-1 by fork (the standard's plain ./prog).
void fork_job(State& s) {
    s.job = fmt::format("local-{}-{}", ::getpid(), static_cast<long long>(now_wall() * 1e9));
    auto listen = wire::listen_abstract(s.job);
    if (!listen)
        die("bsp_begin", fmt::format("cannot start the hub: {}", listen.error().what()));
    std::fflush(nullptr); // no buffered output is duplicated by the forks
    const pid_t hub = ::fork();
    if (hub < 0)
        die("bsp_begin", fmt::format("fork of the hub: {}", std::strerror(errno)));
    if (hub == 0) {
        Hub h(std::move(*listen), s.job, s.nprocs);
        const Outcome o = h.run();
        if (!o.ok)
            std::fprintf(stderr, "ghost-bsp: job aborted: %s\n", o.why.c_str());
        std::fflush(stderr);
        ::_exit(o.ok ? 0 : 1);
    }
    listen->reset();
    s.children.push_back(hub);
    for (int i = 1; i < s.nprocs; ++i) {
        const pid_t c = ::fork();
        if (c < 0)
            die("bsp_begin", fmt::format("fork of vp {}: {}", i, std::strerror(errno)));
        if (c == 0) {
            s.pid = i;
            s.children.clear();
            return;
        }
        s.children.push_back(c);
    }
}

} // namespace

void die(const char* call, const std::string& message) {
    State& s = state();
    const std::string text = fmt::format("{}: {}", call, message);
    std::fflush(stdout);
    std::fprintf(stderr, "ghost-bsp: vp %d: %s\n", s.pid, text.c_str());
    tell_hub_and_exit(text);
}

void need_running(const char* call) {
    const State& s = state();
    if (s.phase == State::Phase::Before)
        die(call, "called before bsp_begin");
    if (s.phase == State::Phase::Ended)
        die(call, "called after bsp_end");
}

namespace {

// The home hub over TCP and TLS (this host has no hub of the job).
Result<wire::Link> connect_tcp_hub(State& s) {
    if (!s.tls) {
        auto ctx = wire::TlsContext::make(wire::TlsContext::Role::Client, *s.key);
        if (!ctx)
            return ctx.error();
        s.tls.emplace(std::move(*ctx));
    }
    auto fd = wire::connect_tcp(s.hub_tcp);
    if (!fd)
        return fd.error();
    return wire::tls_connect(*s.tls, std::move(*fd));
}

// The hub's address from GHOST_BSP_HUBFILE (one line ADDR:PORT), when the
// file can be read: bsprun --restart may run its hub elsewhere.
void reread_hub_file(State& s) {
    std::FILE* f = std::fopen(s.hub_file.c_str(), "re");
    if (!f)
        return;
    char line[256] = {};
    const bool got = std::fgets(line, sizeof line, f) != nullptr;
    std::fclose(f);
    std::string a = got ? line : "";
    while (!a.empty() && (a.back() == '\n' || a.back() == ' '))
        a.pop_back();
    if (!a.empty())
        s.hub_tcp = a;
}

} // namespace

void connect_hub(bool resumed) {
    State& s = state();
    const char* call = resumed ? "bsp_sync" : "bsp_begin";
    auto fd = wire::connect_abstract(s.job);
    // An abstract name has no owner: any user on the host may have bound
    // it, and the hub writes into this process's memory. One that is not
    // this user's (or root's) is never spoken to; the job's TLS address, if
    // it has one, is used instead.
    if (fd && !wire::peer_is_ours(fd->get()))
        fd =
            Error::from_errno(EACCES, fmt::format("@ghost-bsp/{} is held by another user's process "
                                                  "(refused: it is not this job's hub)",
                                                  s.job));
    if (!fd && resumed && !s.hub_file.empty())
        reread_hub_file(s);
    if (fd) {
        s.sock = wire::Link(std::move(*fd));
    } else if ((fd.error().code.value() == ECONNREFUSED || fd.error().code.value() == EACCES) &&
               s.key && !s.hub_tcp.empty()) {
        auto l = connect_tcp_hub(s);
        if (!l)
            die(call, fmt::format("cannot reach the hub of job {} at {}: {}", s.job, s.hub_tcp,
                                  l.error().what()));
        s.sock = std::move(*l);
    } else {
        die(call, fmt::format("cannot reach the hub of job {}: {}", s.job, fd.error().what()));
    }
    wire::Writer w;
    w.u32(wire::kVersion);
    w.u32(static_cast<std::uint32_t>(s.pid));
    w.u32(static_cast<std::uint32_t>(s.nprocs));
    w.u32(resumed ? 1 : 0);
    w.str(s.job);
    if (auto r = wire::send_frame(s.sock, wire::Type::Hello, w.data()); !r)
        die(call, fmt::format("HELLO to the hub: {}", r.error().what()));
}

void disconnect_hub() {
    State& s = state();
    s.sock.close();
    s.tls.reset();
}

} // namespace ghost::bsp::vp

using namespace ghost::bsp::vp;

extern "C" {

void bsp_init(void (*spmd_part)(void), int argc, char* argv[]) {
    (void)argc;
    (void)argv;
    State& s = state();
    s.spmd = spmd_part;
    // Under bsprun every VP is a whole program: those but 0 run the SPMD
    // part now and exit (bsp_end exits them).
    const char* pid = std::getenv("GHOST_BSP_PID");
    if (std::getenv("GHOST_BSP_JOB") && pid && std::strcmp(pid, "0") != 0 && spmd_part) {
        spmd_part();
        std::exit(0);
    }
}

void bsp_begin(int maxprocs) {
    State& s = state();
    if (s.phase != State::Phase::Before)
        die("bsp_begin", "called twice (one SPMD section per program)");
    const char* job = std::getenv("GHOST_BSP_JOB");
    if (job) {
        const char* pid = std::getenv("GHOST_BSP_PID");
        const char* np = std::getenv("GHOST_BSP_NPROCS");
        if (!pid || !np)
            die("bsp_begin", "GHOST_BSP_JOB is set but GHOST_BSP_PID or GHOST_BSP_NPROCS is not "
                             "(start the program with bsprun, or without any GHOST_BSP_*)");
        s.under_bsprun = true;
        s.job = job;
        s.pid = env_int("GHOST_BSP_PID", pid);
        s.nprocs = env_int("GHOST_BSP_NPROCS", np);
        if (const char* hub = std::getenv("GHOST_BSP_HUB"))
            s.hub_tcp = hub;
        if (const char* hf = std::getenv("GHOST_BSP_HUBFILE"))
            s.hub_file = hf;
        if (char* key = std::getenv("GHOST_BSP_KEY")) {
            auto k = ghost::bsp::wire::key_from_hex(key);
            if (!k)
                die("bsp_begin", fmt::format("GHOST_BSP_KEY: {}", k.error().what()));
            s.key = *k;
            // Only in our memory from now on: not in /proc/PID/environ, not
            // in a child's environment.
            std::memset(key, 'x', std::strlen(key));
            ::unsetenv("GHOST_BSP_KEY");
        }
        if (s.nprocs < 1 || s.pid >= s.nprocs)
            die("bsp_begin",
                fmt::format("GHOST_BSP_PID={} is not below GHOST_BSP_NPROCS={}", s.pid, s.nprocs));
        // Only vp 0's maxprocs counts: in bsp_init's model the others call
        // bsp_begin before anything but vp 0 could know the number.
        if (s.pid == 0 && maxprocs < s.nprocs)
            die("bsp_begin",
                fmt::format("bsp_begin({}) asks for at most {} processes, but bsprun "
                            "started {}: run bsprun -n {}",
                            maxprocs, maxprocs, s.nprocs, maxprocs < 1 ? 1 : maxprocs));
    } else {
        if (maxprocs < 1)
            die("bsp_begin", fmt::format("maxprocs is {}: at least 1 process is needed", maxprocs));
        s.nprocs = maxprocs;
        fork_job(s);
    }
    ghost::bsp::wire::install_wakeup_handler(); // a SIGUSR2 before any DETACH does nothing
    connect_hub(false);
    s.t0 = now_wall();
    s.last_wall = s.t0;
    s.last_cpu = now_cpu();
    s.instructions.start();
    s.phase = State::Phase::Running;
}

void bsp_end(void) {
    State& s = state();
    need_running("bsp_end");
    if (auto r = ghost::bsp::wire::send_frame(s.sock, ghost::bsp::wire::Type::End); !r)
        die("bsp_end", fmt::format("lost the hub: {}", r.error().what()));
    auto f = ghost::bsp::wire::recv_frame(s.sock);
    if (!f || f->type != ghost::bsp::wire::Type::EndOk)
        die("bsp_end", "lost the hub before every process reached bsp_end (the job was aborted)");
    disconnect_hub();
    s.phase = State::Phase::Ended;
    if (s.pid != 0) {
        // Only process 0 continues after bsp_end.
        std::exit(0);
    }
    for (pid_t c : s.children)
        while (::waitpid(c, nullptr, 0) < 0 && errno == EINTR) {
        }
    s.children.clear();
}

void bsp_abort(const char* format, ...) {
    State& s = state();
    va_list ap;
    va_start(ap, format);
    char* text = nullptr;
    const int n = ::vasprintf(&text, format, ap);
    va_end(ap);
    std::string msg = n >= 0 ? std::string(text) : std::string("bsp_abort");
    std::free(text);
    std::fflush(stdout);
    std::fputs(msg.c_str(), stderr);
    if (msg.empty() || msg.back() != '\n')
        std::fputc('\n', stderr);
    if (!msg.empty() && msg.back() == '\n')
        msg.pop_back();
    (void)s;
    tell_hub_and_exit("bsp_abort: " + msg);
}

int bsp_nprocs(void) {
    const State& s = state();
    if (s.phase != State::Phase::Before)
        return s.nprocs;
    if (const char* np = std::getenv("GHOST_BSP_NPROCS"); np && std::getenv("GHOST_BSP_JOB"))
        return std::atoi(np);
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<int>(n) : 1;
}

int bsp_pid(void) {
    return state().pid;
}

double bsp_time(void) {
    const State& s = state();
    if (s.phase == State::Phase::Before)
        return 0;
    return now_wall() - s.t0;
}

} // extern "C"
