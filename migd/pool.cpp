// SPDX-License-Identifier: GPL-2.0
#include "pool.hpp"

#include <poll.h>

#include <algorithm>
#include <array>

namespace migd {

bool keeps_connection(std::string_view op) {
    static constexpr std::array<std::string_view, 9> kept = {
        "where", "kill", "list", "resolve", "commit", "abort", "images", "answer", "known"};
    return std::find(kept.begin(), kept.end(), op) != kept.end();
}

namespace {

// A kept connection has nothing to read: the peer speaks only when asked. A
// readable (or hung-up) socket means the peer closed it or sent an alert.
bool looks_open(const Channel& ch) {
    pollfd p{ch.fd(), POLLIN | POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 0;
}

} // namespace

std::unique_ptr<Channel> ConnectionPool::take(const std::string& host) {
    std::vector<std::unique_ptr<Channel>> stale;
    std::unique_ptr<Channel> found;
    {
        std::lock_guard lock(mu_);
        const auto now = std::chrono::steady_clock::now();
        for (auto it = idle_.begin(); it != idle_.end();) {
            const bool old = now - it->since > max_idle_;
            if (old || (!found && it->host == host && !looks_open(*it->ch))) {
                stale.push_back(std::move(it->ch));
                it = idle_.erase(it);
            } else if (!found && it->host == host) {
                found = std::move(it->ch);
                it = idle_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& ch : stale)
        (void)ch->finish();
    return found;
}

void ConnectionPool::give(const std::string& host, std::unique_ptr<Channel> ch) {
    {
        std::lock_guard lock(mu_);
        const auto held = std::count_if(idle_.begin(), idle_.end(),
                                        [&](const Idle& i) { return i.host == host; });
        if (static_cast<std::size_t>(held) < kept_per_peer) {
            idle_.push_back({host, std::move(ch), std::chrono::steady_clock::now()});
            return;
        }
    }
    (void)ch->finish();
}

void ConnectionPool::clear() {
    std::vector<Idle> all;
    {
        std::lock_guard lock(mu_);
        all.swap(idle_);
    }
    for (auto& i : all)
        (void)i.ch->finish();
}

void ConnectionPool::mark_silent(const std::string& host) {
    std::lock_guard lock(mu_);
    silent_[host] = std::chrono::steady_clock::now() + max_idle_;
}

void ConnectionPool::mark_answered(const std::string& host) {
    std::lock_guard lock(mu_);
    silent_.erase(host);
}

std::chrono::milliseconds ConnectionPool::silent(const std::string& host) {
    std::lock_guard lock(mu_);
    const auto it = silent_.find(host);
    if (it == silent_.end())
        return std::chrono::milliseconds(0);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        it->second - std::chrono::steady_clock::now());
    if (left.count() > 0)
        return left;
    silent_.erase(it);
    return std::chrono::milliseconds(0);
}

} // namespace migd
