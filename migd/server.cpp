// SPDX-License-Identifier: GPL-2.0
#include "server.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ghost/fd.hpp"
#include "guarded.hpp"
#include "json_text.hpp"
#include "line_reader.hpp"
#include "store.hpp"

namespace migd {

namespace {

using ghost::Error;
using ghost::UniqueFd;

// A request line's bound (bsprun's job manifests are the longest: about
// 80 bytes per VP).
constexpr std::size_t max_line = 4 << 20;
// How long a reply or progress line may wait for a client to read it.
constexpr std::chrono::seconds client_send_timeout{30};

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

    // Anyone may connect: every operation checks the client's uid, as the
    // kernel reports it (SO_PEERCRED), against the processes it names.
    const mode_t old = ::umask(0111);
    const int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::umask(old);
    if (rc != 0)
        return sys_error(fmt::format("bind {}", path));
    if (::listen(fd.get(), 16) != 0)
        return sys_error("listen");
    return fd;
}

std::optional<Client> peer_of(int fd) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return std::nullopt;
    return Client{cred.uid, cred.pid};
}

bool send_line(int fd, const nlohmann::json& j) {
    const std::string s = json_text(j) + "\n";
    std::size_t off = 0;
    while (off < s.size()) {
        const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        off += static_cast<std::size_t>(n);
    }
    return true;
}

// One client: request lines in, reply lines out, until it hangs up. Each
// client has its own thread, so a long migration never holds up another.
void serve_client(int fd, const Client& who, const Context& ctx) {
    std::mutex out;
    // A client that stops reading (a ghostctl suspended with Ctrl-Z) must
    // not hold up the work it asked for: a reply or progress line waits at
    // most client_send_timeout (SO_SNDTIMEO) to go out; after one did not,
    // progress lines are dropped, and the reply ends the connection.
    const timeval tv{client_send_timeout.count(), 0};
    (void)::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    bool deaf = false;
    const Emit emit = [&](const nlohmann::json& j) {
        std::lock_guard lock(out);
        if (!deaf && !send_line(fd, j))
            deaf = true;
    };
    ghost::migd_client::LineReader lines(fd, max_line);
    while (const auto line = lines.next()) {
        auto reply = handle_request(*line, ctx, who, emit);
        std::lock_guard lock(out);
        if (!send_line(fd, reply))
            return;
    }
    if (lines.too_long())
        (void)send_line(fd, {{"ok", false}, {"error", "request line too long"}});
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

    struct Conn {
        UniqueFd fd;
        uid_t uid = 0;
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };
    std::list<Conn> conns;
    // Each client has a thread: a limit on them all, and one per user so
    // that one user cannot take them all (root has none of its own).
    const auto over_limit = [&](uid_t uid) -> std::string {
        std::size_t mine = 0;
        for (const auto& k : conns)
            mine += k.uid == uid;
        if (conns.size() >= cfg.max_clients)
            return fmt::format("migd has {} local clients connected, its limit ([limits] "
                               "max_clients); try again when one has finished",
                               conns.size());
        if (uid != 0 && mine >= cfg.max_clients_per_user)
            return fmt::format("uid {} has {} connections to migd open, its limit ([limits] "
                               "max_clients_per_user); close one and try again",
                               uid, mine);
        return {};
    };
    for (;;) {
        pollfd pfds[2] = {{sig.get(), POLLIN, 0}, {lfd->get(), POLLIN, 0}};
        if (::poll(pfds, 2, 1000) < 0) {
            if (errno == EINTR)
                continue;
            return sys_error("poll");
        }
        // Finished clients' threads are joined as we go.
        for (auto it = conns.begin(); it != conns.end();) {
            if (*it->done) {
                it->thread.join();
                it = conns.erase(it);
            } else {
                ++it;
            }
        }
        if (pfds[0].revents)
            break;
        if (!(pfds[1].revents & POLLIN))
            continue;
        UniqueFd c(::accept4(lfd->get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!c)
            continue;
        const auto who = peer_of(c.get());
        if (!who) {
            (void)send_line(c.get(), {{"ok", false},
                                      {"error", "cannot read the client's credentials "
                                                "(SO_PEERCRED)"}});
            continue;
        }
        if (const std::string why = over_limit(who->uid); !why.empty()) {
            spdlog::warn("refused a local client (pid {}): {}", who->pid, why);
            (void)send_line(c.get(), {{"ok", false}, {"error", why}});
            continue;
        }
        Conn& k = conns.emplace_back();
        k.fd = std::move(c);
        k.uid = who->uid;
        k.done = std::make_shared<std::atomic<bool>>(false);
        k.thread = std::thread([fd = k.fd.get(), w = *who, &ctx = cfg.ctx, done = k.done] {
            guarded("a local client", [&] { serve_client(fd, w, ctx); });
            *done = true;
        });
    }
    // Shutting down: clients still connected are cut off; their operations
    // end with the connection (a migration in flight rolls back or is
    // finished by the journal at the next start).
    for (auto& k : conns)
        ::shutdown(k.fd.get(), SHUT_RDWR);
    for (auto& k : conns)
        k.thread.join();
    ::unlink(cfg.socket_path.c_str());
    return {};
}

} // namespace migd
