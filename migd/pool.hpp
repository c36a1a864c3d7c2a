// SPDX-License-Identifier: GPL-2.0
// Idle authenticated connections to peers, kept for the next short request
// (a location lookup, a commit, a listing): a request on a kept connection
// costs one round trip instead of a TCP and mutual-TLS handshake.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "channel.hpp"

namespace migd {

// Requests answered by one JSON reply, after which both sides keep the
// connection for the next one. Every other request (an image stream) ends
// its connection.
bool keeps_connection(std::string_view op);

// Kept connections a host holds to each peer, and so the connections a
// listener must allow each peer beyond its transfers.
inline constexpr std::size_t kept_per_peer = 2;

class ConnectionPool {
  public:
    // A connection idle longer than max_idle is closed rather than reused
    // (the peer closes its side after its own I/O timeout).
    explicit ConnectionPool(std::chrono::milliseconds max_idle) : max_idle_(max_idle) {}
    ~ConnectionPool() { clear(); }
    ConnectionPool(const ConnectionPool&) = delete;
    ConnectionPool& operator=(const ConnectionPool&) = delete;

    // A kept connection to host that still looks open, or null.
    std::unique_ptr<Channel> take(const std::string& host);
    // Keeps ch for host (at most kept_per_peer; beyond, it is closed).
    void give(const std::string& host, std::unique_ptr<Channel> ch);
    // Closes every kept connection (migd stops).
    void clear();

    // A peer whose connect failed in silence (a timeout, no route) is not
    // tried again by lookups (where, kill, list) for max_idle: with a dead
    // peer each lookup would otherwise wait one connect timeout before it
    // asks the others. silent() is the time left (0: try it).
    void mark_silent(const std::string& host);
    void mark_answered(const std::string& host);
    std::chrono::milliseconds silent(const std::string& host);

  private:
    struct Idle {
        std::string host;
        std::unique_ptr<Channel> ch;
        std::chrono::steady_clock::time_point since;
    };
    std::chrono::milliseconds max_idle_;
    std::mutex mu_;
    std::vector<Idle> idle_;
    std::map<std::string, std::chrono::steady_clock::time_point> silent_; // until
};

} // namespace migd
