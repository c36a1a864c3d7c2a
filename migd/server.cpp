// SPDX-License-Identifier: GPL-2.0
#include "server.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "ghost/fd.hpp"

namespace migd {

namespace {

using ghost::Error;
using ghost::UniqueFd;

constexpr std::size_t max_line = 64 * 1024;

Error sys_error(std::string what) {
    const int err = errno;
    return Error::from_errno(err, fmt::format("{}: {}", what, std::strerror(err)));
}

ghost::Result<UniqueFd> listen_on(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path))
        return Error::from_errno(ENAMETOOLONG, fmt::format("socket path too long: {}", path));
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);

    if (const auto slash = path.rfind('/'); slash != std::string::npos && slash > 0) {
        const std::string dir = path.substr(0, slash);
        if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
            return sys_error(fmt::format("cannot create {}", dir));
    }
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd)
        return sys_error("socket");
    // A stale socket from a crashed daemon is removed; a live one is not.
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0)
        return Error::from_errno(EADDRINUSE,
                                 fmt::format("another migd is already serving {}", path));
    if (errno == ECONNREFUSED)
        ::unlink(path.c_str());

    // Only the owner may connect; SO_PEERCRED is checked as well.
    const mode_t old = ::umask(0177);
    const int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::umask(old);
    if (rc != 0)
        return sys_error(fmt::format("bind {}", path));
    if (::listen(fd.get(), 16) != 0)
        return sys_error("listen");
    return fd;
}

bool peer_allowed(int fd) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return false;
    return cred.uid == 0 || cred.uid == ::getuid();
}

void send_line(int fd, const nlohmann::json& j) {
    const std::string s = j.dump() + "\n";
    // Replies are small; a client that does not read is dropped by the caller.
    (void)::send(fd, s.data(), s.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

} // namespace

ghost::Result<void> serve(const ServerConfig& cfg) {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    if (::sigprocmask(SIG_BLOCK, &mask, nullptr) != 0)
        return sys_error("sigprocmask");
    UniqueFd sig(::signalfd(-1, &mask, SFD_CLOEXEC));
    if (!sig)
        return sys_error("signalfd");

    auto lfd = listen_on(cfg.socket_path);
    if (!lfd)
        return lfd.error();

    std::map<int, std::pair<UniqueFd, std::string>> clients; // fd -> (owner, partial line)
    for (;;) {
        std::vector<pollfd> pfds{{sig.get(), POLLIN, 0}, {lfd->get(), POLLIN, 0}};
        for (const auto& [fd, c] : clients)
            pfds.push_back({fd, POLLIN, 0});
        if (::poll(pfds.data(), pfds.size(), -1) < 0) {
            if (errno == EINTR)
                continue;
            return sys_error("poll");
        }
        if (pfds[0].revents)
            break;
        if (pfds[1].revents & POLLIN) {
            UniqueFd c(::accept4(lfd->get(), nullptr, nullptr, SOCK_CLOEXEC));
            if (c && peer_allowed(c.get())) {
                const int k = c.get();
                clients.emplace(k, std::make_pair(std::move(c), std::string()));
            } else if (c) {
                send_line(c.get(), {{"ok", false}, {"error", "permission denied"}});
            }
        }
        for (std::size_t i = 2; i < pfds.size(); ++i) {
            if (!pfds[i].revents)
                continue;
            auto& [owner, buf] = clients.at(pfds[i].fd);
            char chunk[4096];
            const ssize_t n = ::recv(pfds[i].fd, chunk, sizeof(chunk), 0);
            if (n <= 0) {
                clients.erase(pfds[i].fd);
                continue;
            }
            buf.append(chunk, static_cast<std::size_t>(n));
            std::size_t nl;
            while ((nl = buf.find('\n')) != std::string::npos) {
                send_line(pfds[i].fd, handle_request(std::string_view(buf).substr(0, nl), cfg.ctx));
                buf.erase(0, nl + 1);
            }
            if (buf.size() > max_line) {
                send_line(pfds[i].fd, {{"ok", false}, {"error", "request line too long"}});
                clients.erase(pfds[i].fd);
            }
        }
    }
    ::unlink(cfg.socket_path.c_str());
    return {};
}

} // namespace migd
