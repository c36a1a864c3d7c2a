// SPDX-License-Identifier: GPL-2.0
// bsprun's end of its guard's connection (bsp/bsprun/guard.hpp). When that
// connection goes silent the guard's host is down or cut off from here,
// and nothing here can tell which. If it was cut off, the guard saw this
// host go silent too and is about to roll the job back on its side of the
// partition: two runs of one job. So this run stops itself at once, and
// the guard waits long enough (kFenceWaitMs) for that before it acts. A
// guard whose connection was closed instead (its process ended, its host
// answers) rolls nothing back: the job goes on, unguarded.
#pragma once

#include <string>
#include <thread>

#include "ghost/fd.hpp"
#include "ghost/result.hpp"
#include "keepalive.hpp"

namespace ghost::bsp {

// How long the guard waits, after the hub went silent, before it rolls the
// job back: the hub may notice up to wire::kKeepAliveSkewMs later, then
// needs a moment (2 s here) to end its run.
inline constexpr int kFenceWaitMs = wire::kKeepAliveSkewMs + 2000;

class GuardFence {
  public:
    // Watches fd (the guard's connection, which the hub keeps) from a
    // thread of its own, so that a hub busy in a barrier still stops in
    // time. On silence it prints why and ends the process (_exit(1)):
    // every VP loses its connection to the hub and ends at its next sync.
    static Result<GuardFence> start(int fd, std::string host, std::string job);
    GuardFence(GuardFence&&) = default;
    GuardFence& operator=(GuardFence&&) = delete; // would join a watch that is not stopped
    // Stops watching: before the release, whose answer closes the connection.
    ~GuardFence();

  private:
    GuardFence(UniqueFd stop, std::jthread t) : stop_(std::move(stop)), thread_(std::move(t)) {}
    UniqueFd stop_; // an eventfd: readable once the watch must end
    std::jthread thread_;
};

} // namespace ghost::bsp
