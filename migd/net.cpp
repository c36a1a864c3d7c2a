// SPDX-License-Identifier: GPL-2.0
// TCP under migd's channels (the plain channel is plain_channel.cpp).
#include "net.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "channel.hpp"

namespace migd {

namespace net {

namespace {

using ghost::Error;

std::string endpoint(std::string_view address, std::uint16_t port) {
    if (address.find(':') != std::string_view::npos)
        return fmt::format("[{}]:{}", address, port);
    return fmt::format("{}:{}", address, port);
}

struct AddrInfo {
    addrinfo* list = nullptr;
    ~AddrInfo() {
        if (list)
            ::freeaddrinfo(list);
    }
};

ghost::Result<void> resolve(AddrInfo& ai, std::string_view address, std::uint16_t port,
                            bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    const std::string host(address);
    const std::string service = std::to_string(port);
    const int rc =
        ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &ai.list);
    if (rc != 0)
        return Error::from_errno(EHOSTUNREACH,
                                 fmt::format("cannot resolve {}: {}", host, ::gai_strerror(rc)));
    return {};
}

// An address as origin_of() names it: host, or source with slash64.
std::string address_name(const sockaddr* sa, bool slash64) {
    char text[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
        ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
        return text;
    }
    if (sa->sa_family != AF_INET6)
        return "?";
    in6_addr a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
        ::inet_ntop(AF_INET, &a.s6_addr[12], text, sizeof(text));
        return text;
    }
    if (!slash64) {
        ::inet_ntop(AF_INET6, &a, text, sizeof(text));
        return text;
    }
    std::fill(std::begin(a.s6_addr) + 8, std::end(a.s6_addr), std::uint8_t{0});
    ::inet_ntop(AF_INET6, &a, text, sizeof(text));
    return std::string(text) + "/64";
}

} // namespace

Origin origin_of(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
        return {"?", "?"};
    const auto* sa = reinterpret_cast<const sockaddr*>(&ss);
    return {address_name(sa, false), address_name(sa, true)};
}

ghost::Result<std::vector<std::string>> hosts_of(std::string_view address) {
    AddrInfo ai;
    if (auto r = resolve(ai, address, 0, false); !r)
        return r.error();
    std::vector<std::string> out;
    for (addrinfo* a = ai.list; a; a = a->ai_next) {
        std::string s = address_name(a->ai_addr, false);
        if (s != "?" && std::find(out.begin(), out.end(), s) == out.end())
            out.push_back(std::move(s));
    }
    return out;
}

bool wait_fd(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        pollfd p{fd, events, 0};
        const int rc = ::poll(&p, 1, static_cast<int>(std::max<long long>(0, left.count())));
        if (rc > 0)
            return true;
        if (rc == 0)
            return false;
        if (errno != EINTR)
            return true; // let the caller's I/O call report the error
    }
}

void set_socket_timeout(int fd, std::chrono::milliseconds t) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(t.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void set_nonblocking(int fd, bool on) {
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0)
        ::fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
}

std::string peer_address(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
        return "?";
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), serv, sizeof(serv),
                      NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return "?";
    return endpoint(host, static_cast<std::uint16_t>(std::stoi(serv)));
}

ghost::Result<ghost::UniqueFd> tcp_connect(std::string_view address, std::uint16_t port,
                                           std::chrono::milliseconds timeout) {
    AddrInfo ai;
    if (auto r = resolve(ai, address, port, false); !r)
        return r.error();
    const auto deadline = Clock::now() + timeout;
    int err = ECONNREFUSED;
    for (addrinfo* a = ai.list; a; a = a->ai_next) {
        ghost::UniqueFd fd(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (!fd) {
            err = errno;
            continue;
        }
        if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
            if (errno != EINPROGRESS) {
                err = errno;
                continue;
            }
            if (!wait_fd(fd.get(), POLLOUT, deadline)) {
                err = ETIMEDOUT;
                break;
            }
            socklen_t len = sizeof(err);
            if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
                continue;
        }
        set_nonblocking(fd.get(), false);
        const int one = 1;
        ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return fd;
    }
    if (err == ETIMEDOUT)
        return Error::from_errno(err, fmt::format("cannot connect to {}: no answer within {} ms",
                                                  endpoint(address, port), timeout.count()));
    return Error::from_errno(
        err, fmt::format("cannot connect to {}: {}", endpoint(address, port), std::strerror(err)));
}

} // namespace net

ghost::Result<ghost::UniqueFd> tcp_listen(std::string_view address, std::uint16_t port) {
    net::AddrInfo ai;
    if (auto r = net::resolve(ai, address, port, true); !r)
        return r.error();
    int err = EADDRNOTAVAIL;
    for (addrinfo* a = ai.list; a; a = a->ai_next) {
        ghost::UniqueFd fd(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!fd) {
            err = errno;
            continue;
        }
        const int one = 1;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 64) != 0) {
            err = errno;
            continue;
        }
        return fd;
    }
    return ghost::Error::from_errno(
        err,
        fmt::format("cannot listen on {}: {}", net::endpoint(address, port), std::strerror(err)));
}

} // namespace migd
