// SPDX-License-Identifier: GPL-2.0
// The hub's side of bsprun's guard (hub.hpp: guarded(), release_guard()).
#include <poll.h>

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "hub.hpp"

namespace ghost::bsp {

using wire::Type;

void Hub::guard_hello(wire::Link link, const Frame& f) {
    wire::Reader r(f.payload);
    const std::uint32_t version = r.u32();
    const std::string job = r.str(), host = r.str();
    if (r.failed() || version != wire::kVersion || job != job_) {
        std::fprintf(stderr,
                     "bsprun: hub: refused a guard for job '%s' version %u (this job '%s' version "
                     "%u)\n",
                     job.c_str(), version, job_.c_str(), wire::kVersion);
        return;
    }
    if (guard_) {
        std::fprintf(stderr, "bsprun: hub: refused a second guard (from %s)\n", host.c_str());
        return;
    }
    guard_ = std::move(link);
    auto fence = GuardFence::start(guard_.fd(), host, job_);
    if (fence) {
        fence_.emplace(std::move(*fence));
        return;
    }
    // Unwatched, a partition could leave two runs: no guard rather than that
    // (released, so that it does not take its closed connection for our loss).
    std::fprintf(stderr, "bsprun: hub: cannot watch the guard on %s (%s); sent it away\n",
                 host.c_str(), fence.error().what().c_str());
    (void)wire::send_frame(guard_, Type::GuardRelease);
    guard_.close();
}

bool Hub::wait_for_guard(std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!guard_ && !done_) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        if (left.count() <= 0)
            break;
        // VPs and relays that connect meanwhile say HELLO as they would in
        // run(); what they send next waits in their sockets until then.
        pollfd p[2] = {{listen_.get(), POLLIN, 0}, {tcp_.get(), POLLIN, 0}};
        if (::poll(p, 2, static_cast<int>(left.count())) <= 0)
            continue;
        if (p[0].revents & POLLIN)
            accept_one();
        if (p[1].revents & POLLIN)
            accept_tcp();
    }
    return guarded();
}

bool Hub::release_guard() {
    if (!guard_)
        return guard_released_;
    fence_.reset(); // the guard's answer is to close its end
    // The guard closes its end once it has the release: that end, within
    // a few seconds, confirms it (a partition or a dead guard host does not).
    bool confirmed = false;
    if (wire::send_frame(guard_, Type::GuardRelease)) {
        pollfd p{guard_.fd(), POLLIN, 0};
        if (::poll(&p, 1, 5000) > 0)
            confirmed = !wire::recv_frame(guard_);
    }
    guard_.close();
    guard_released_ = confirmed;
    return confirmed;
}

} // namespace ghost::bsp
