// SPDX-License-Identifier: GPL-2.0
#include "listener.hpp"
#include "pool.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "net.hpp"

namespace migd {

namespace {

// Connections beyond max_transfers that may be in a handshake or a short
// request (ping, location update) while the transfers run.
constexpr unsigned spare_connections = 4;

} // namespace

ghost::Result<std::shared_ptr<TlsContext>> load_tls(const Config& cfg) {
    if (cfg.tls_ca.empty())
        return ghost::Error::from_errno(
            ENOENT, fmt::format("no [tls] in {}: peer operations are disabled", cfg.source));
    auto tls = TlsContext::load({cfg.tls_ca, cfg.tls_cert, cfg.tls_key});
    if (!tls)
        return tls.error();
    if ((*tls)->own_name() != cfg.host)
        return ghost::Error::from_errno(
            EINVAL, fmt::format("{} names host \"{}\" but [host] name is \"{}\": peers would "
                                "refuse this host",
                                cfg.tls_cert, (*tls)->own_name(), cfg.host));
    return tls;
}

ghost::Result<std::unique_ptr<Listener>>
Listener::start(const Config& cfg, std::shared_ptr<TlsContext> tls, PeerHandler handler) {
    auto fd = tcp_listen(cfg.listen, cfg.port);
    if (!fd)
        return fd.error();
    return start(cfg, std::move(tls), std::move(handler), std::move(*fd));
}

ghost::Result<std::unique_ptr<Listener>> Listener::start(const Config& cfg,
                                                         std::shared_ptr<TlsContext> tls,
                                                         PeerHandler handler,
                                                         ghost::UniqueFd listening) {
    std::unique_ptr<Listener> l(
        new Listener(cfg, std::move(tls), std::move(handler), std::move(listening)));
    if (!l->wake_) {
        const int e = errno;
        return ghost::Error::from_errno(e, fmt::format("eventfd: {}", std::strerror(e)));
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getsockname(l->listening_.get(), reinterpret_cast<sockaddr*>(&ss), &len) == 0)
        l->port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                                  : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    l->acceptor_ = std::thread([p = l.get()] { p->accept_loop(); });
    return l;
}

Listener::Listener(const Config& cfg, std::shared_ptr<TlsContext> tls, PeerHandler handler,
                   ghost::UniqueFd listening)
    : cfg_(cfg), tls_(std::move(tls)), handler_(std::move(handler)),
      listening_(std::move(listening)), wake_(::eventfd(0, EFD_CLOEXEC)) {}

Listener::~Listener() {
    stop();
}

void Listener::accept_loop() {
    // Each peer may also keep a few idle connections for short requests.
    const unsigned kept = unsigned(kept_per_peer * cfg_.peers.size());
    const unsigned limit = cfg_.max_transfers + spare_connections + kept;
    for (;;) {
        pollfd p[2] = {{listening_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
        if (::poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            spdlog::error("peer listener: poll: {}", std::strerror(errno));
            return;
        }
        if (p[1].revents)
            return;
        ghost::UniqueFd tcp(::accept4(listening_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!tcp) {
            if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
                spdlog::error("peer listener: accept: {}", std::strerror(errno));
            continue;
        }
        std::string address = net::peer_address(tcp.get());
        reap(false);
        if (active_.load() >= limit) {
            spdlog::warn("refused peer {}: too many connections ({} at once, limit {} = "
                         "[limits] max_transfers + {} + {} kept by peers)",
                         address, active_.load(), limit, spare_connections, kept);
            continue;
        }
        std::lock_guard lock(mu_);
        Worker& w = workers_.emplace_back();
        w.socket = ghost::UniqueFd(::fcntl(tcp.get(), F_DUPFD_CLOEXEC, 0));
        ++active_;
        w.thread = std::thread(
            [this, &w, fd = tcp.release(), address] { serve(w, ghost::UniqueFd(fd), address); });
    }
}

void Listener::serve(Worker& w, ghost::UniqueFd tcp, std::string address) {
    const std::chrono::milliseconds timeout(cfg_.io_timeout_ms);
    auto ch = tls_->accept(std::move(tcp), timeout);
    if (!ch) {
        spdlog::warn("refused peer {}: {}", address, ch.error().what());
    } else if (!cfg_.peer((*ch)->peer())) {
        spdlog::warn("refused peer {}: {} is not a peer of this host", address, (*ch)->peer());
        (void)(*ch)->finish();
    } else {
        spdlog::info("peer {} connected from {}", (*ch)->peer(), address);
        try {
            handler_(std::move(*ch));
        } catch (const std::exception& e) {
            spdlog::error("peer {}: handler failed: {}", address, e.what());
        }
    }
    --active_;
    w.done = true;
}

void Listener::reap(bool all) {
    std::list<Worker> finished;
    {
        std::lock_guard lock(mu_);
        for (auto it = workers_.begin(); it != workers_.end();) {
            auto next = std::next(it);
            if (all || it->done)
                finished.splice(finished.end(), workers_, it);
            it = next;
        }
    }
    for (auto& w : finished)
        if (w.thread.joinable())
            w.thread.join();
}

void Listener::stop() {
    {
        std::lock_guard lock(mu_);
        if (stopped_)
            return;
        stopped_ = true;
    }
    const std::uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof(one));
    if (acceptor_.joinable())
        acceptor_.join();
    {
        std::lock_guard lock(mu_);
        for (auto& w : workers_)
            if (!w.done)
                ::shutdown(w.socket.get(), SHUT_RDWR);
    }
    reap(true);
    listening_.reset();
}

} // namespace migd
