// SPDX-License-Identifier: GPL-2.0
// Relays: starting, moving and ending the job's bsp-relay processes.
#include "relays.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "migd_client.hpp"
#include "output.hpp"
#include "wire.hpp"

namespace ghost::bsp {

using nlohmann::json;

namespace {

// bsp-relay beside bsprun (build tree and install alike), or
// $GHOST_BSP_RELAY.
std::string relay_program() {
    if (const char* p = std::getenv("GHOST_BSP_RELAY"); p && *p)
        return p;
    char self[PATH_MAX] = {};
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    std::string dir = n > 0 ? std::string(self, static_cast<std::size_t>(n)) : "";
    dir = dir.substr(0, dir.rfind('/') + 1);
    return dir + "bsp-relay";
}

// Whether pid catches SIGUSR2 yet (/proc/PID/status, SigCgt): then it has
// it blocked and waits for it, and a wake-up after the move cannot kill it.
bool catches_wakeup(pid_t pid) {
    std::FILE* f = std::fopen(fmt::format("/proc/{}/status", pid).c_str(), "re");
    if (!f)
        return false;
    char line[256];
    unsigned long long mask = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "SigCgt: %llx", &mask) == 1)
            break;
    std::fclose(f);
    return (mask >> (SIGUSR2 - 1)) & 1;
}

} // namespace

std::vector<std::string> Relays::hosts_of(const std::string& home,
                                          const std::vector<std::string>& hosts) {
    std::vector<std::string> out{home};
    for (const auto& h : hosts)
        if (std::find(out.begin(), out.end(), h) == out.end())
            out.push_back(h);
    return out;
}

std::string Relays::log_of(const std::string& host) const {
    return dir_ + "/relay-" + host + ".log";
}

Result<Relays> Relays::start(const std::vector<std::string>& hosts, HostsMover& mover,
                             const std::string& dir, const std::string& job,
                             const std::string& key_hex, const std::string& hub_address) {
    Relays rs(mover, dir);
    const std::string prog = relay_program();
    for (const auto& host : hosts) {
        const bool home = host == mover.home();
        const std::string log = rs.log_of(host);
        const pid_t c = ::fork();
        if (c < 0)
            return Error::from_errno(
                errno, fmt::format("the relay for {}: fork: {}", host, std::strerror(errno)));
        if (c == 0) {
            const int in = ::open("/dev/null", O_RDONLY);
            const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
            if (in < 0 || out < 0)
                ::_exit(127);
            ::dup2(in, 0);
            ::dup2(out, 1);
            ::dup2(out, 2);
            ::close_range(3, ~0U, 0); // it holds nothing migd could not carry
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, nullptr);
            ::setenv("GHOST_BSP_JOB", job.c_str(), 1);
            ::setenv("GHOST_BSP_KEY", key_hex.c_str(), 1);
            ::setenv("GHOST_BSP_HUB", hub_address.c_str(), 1);
            ::setenv("GHOST_BSP_RELAY_HOST", host.c_str(), 1);
            ::setenv("GHOST_BSP_RELAY_WAIT", home ? "0" : "1", 1);
            ::execl(prog.c_str(), prog.c_str(), static_cast<char*>(nullptr));
            std::fprintf(stderr, "bsprun: cannot run %s: %s\n", prog.c_str(), std::strerror(errno));
            ::_exit(127);
        }
        rs.procs_.push_back({host, c, {}});
        if (home)
            continue;
        // Moved as a VP is placed: by pid through the home migd, then woken
        // through migd's kill by gid, once it waits for that.
        RelayProc& r = rs.procs_.back();
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!catches_wakeup(c) && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        if (!catches_wakeup(c))
            return Error::from_errno(ETIMEDOUT, fmt::format("the relay for {} (pid {}) did not "
                                                            "get ready in 10 s (its log: {})",
                                                            host, c, log));
        const json reply =
            migd_client::call(mover.home_socket(), {{"op", "migrate"}, {"pid", c}, {"to", host}});
        if (!reply.value("ok", false))
            return Error::from_errno(EIO, fmt::format("the relay for {}: migd ({}): migrate "
                                                      "pid {}: {} (its log: {})",
                                                      host, mover.home_socket(), c,
                                                      reply.value("error", "refused"), log));
        while (::waitpid(c, nullptr, 0) < 0 && errno == EINTR) {
        }
        r.pid = reply.value("pid", -1);
        r.gid = reply.value("gid", "");
        if (auto w = migd_kill(mover.home_socket(), r.gid, SIGUSR2); !w)
            return Error::from_errno(EIO, fmt::format("the relay on {} ({}): cannot wake it "
                                                      "through migd: {}",
                                                      host, r.gid, w.error().what()));
    }
    return rs;
}

Result<void> Relays::wait_home_listening(const std::string& job) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
        if (wire::connect_abstract(job)) // a session that says nothing: it just ends
            return {};
        if (std::chrono::steady_clock::now() >= until)
            return Error::from_errno(ETIMEDOUT,
                                     fmt::format("the relay on this host does not listen on the "
                                                 "job's socket after 10 s (its log: {})",
                                                 log_of(mover_->home())));
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

std::string routing_summary(const RelayTotals& t, bool broadcast) {
    return fmt::format("bsprun: routing: relays carried {} DATA frames ({} bytes), {} of them "
                       "within a host; {} forwarded by a stale link-table entry, {} held for a VP "
                       "on its way (moves {})",
                       t.frames, t.bytes, t.local, t.forwarded, t.held,
                       broadcast ? "broadcast to every relay" : "told to the old and new host");
}

std::vector<std::string> Relays::hosts() const {
    std::vector<std::string> out;
    for (const auto& r : procs_)
        out.push_back(r.host);
    return out;
}

bool Relays::gone(const RelayProc& r) {
    if (r.gid.empty()) {
        int st;
        const pid_t p = ::waitpid(r.pid, &st, WNOHANG);
        return p == r.pid || (p < 0 && errno == ECHILD);
    }
    int status = -1;
    return migd_gone(mover_->home_socket(), r.gid, &status);
}

void Relays::kill_all() {
    if (finished_)
        return;
    for (const auto& r : procs_) {
        if (r.pid <= 0)
            continue;
        if (r.gid.empty())
            ::kill(r.pid, SIGKILL);
        else
            (void)migd_kill(mover_->home_socket(), r.gid, SIGKILL); // gone either way soon
    }
    finish();
}

void Relays::finish() {
    if (finished_)
        return;
    finished_ = true;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (auto& r : procs_) {
        while (r.pid > 0 && !gone(r) && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const std::string log = log_of(r.host);
        if (UniqueFd fd(::open(log.c_str(), O_RDONLY | O_CLOEXEC)); fd)
            while (relay_chunk(fd.get(), 2) > 0) {
            }
        ::unlink(log.c_str());
    }
}

} // namespace ghost::bsp
