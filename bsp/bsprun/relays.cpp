// SPDX-License-Identifier: GPL-2.0
// Relays: starting, moving and ending the job's bsp-relay processes.
#include "relays.hpp"

#include <signal.h>
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

#include "wire.hpp"

namespace ghost::bsp {

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
        auto h = start_helper(mover, host, rs.log_of(host), {prog},
                              {{"GHOST_BSP_JOB", job},
                               {"GHOST_BSP_KEY", key_hex},
                               {"GHOST_BSP_HUB", hub_address},
                               {"GHOST_BSP_RELAY_HOST", host},
                               {"GHOST_BSP_RELAY_WAIT", home ? "0" : "1"}},
                              fmt::format("the relay for {}", host));
        if (!h)
            return h.error(); // the relays started so far go with rs
        rs.procs_.push_back(std::move(*h));
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

std::vector<std::string> Relays::gids() const {
    std::vector<std::string> out;
    for (const auto& r : procs_)
        if (!r.gid.empty())
            out.push_back(r.gid);
    return out;
}

bool Relays::gone(const RelayProc& r) {
    return helper_gone(*mover_, r);
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
        copy_log_out(log_of(r.host));
    }
}

} // namespace ghost::bsp
