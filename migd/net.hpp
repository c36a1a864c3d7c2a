// SPDX-License-Identifier: GPL-2.0
// TCP helpers under migd's channels (net.cpp): connecting with a deadline,
// naming a connected peer, waiting on a descriptor.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ghost/fd.hpp"
#include "ghost/result.hpp"

namespace migd::net {

using Clock = std::chrono::steady_clock;

// A connected TCP socket (CLOEXEC, blocking, TCP_NODELAY) to address:port,
// trying every address the name resolves to before the deadline.
ghost::Result<ghost::UniqueFd> tcp_connect(std::string_view address, std::uint16_t port,
                                           std::chrono::milliseconds timeout);

// "ADDR:PORT" of the socket's peer ("[ADDR]:PORT" for IPv6), "?" if unknown.
std::string peer_address(int fd);

// Where the socket's peer connects from: host, its address (an IPv4
// address also behind an IPv4-mapped IPv6 one), and source, what limits
// per source count: the IPv4 address, or the /64 prefix of an IPv6 one
// ("2001:db8:1:2::/64": one host usually holds a whole /64). "?" if
// unknown.
struct Origin {
    std::string host, source;
};
Origin origin_of(int fd);

// The hosts (as origin_of() names them) of every address `address`
// resolves to; an error naming the address if it does not resolve.
ghost::Result<std::vector<std::string>> hosts_of(std::string_view address);

// Waits until fd is readable (events POLLIN) or writable (POLLOUT) or the
// deadline passes: true when ready, false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline);

// SO_RCVTIMEO and SO_SNDTIMEO; 0 means none.
void set_socket_timeout(int fd, std::chrono::milliseconds t);

// O_NONBLOCK on or off.
void set_nonblocking(int fd, bool on);

} // namespace migd::net
