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
      listening_(std::move(listening)), wake_(::eventfd(0, EFD_CLOEXEC)),
      // Each peer may also keep a few idle connections for short requests.
      limit_(cfg.max_transfers + spare_connections + unsigned(kept_per_peer * cfg.peers.size())) {
    for (const auto& p : cfg_.peers) {
        auto hosts = net::hosts_of(p.address);
        if (!hosts) {
            spdlog::warn("peer {}: {}; its handshakes count as a stranger's", p.name,
                         hosts.error().what());
            continue;
        }
        peer_hosts_.insert(hosts->begin(), hosts->end());
    }
}

Listener::~Listener() {
    stop();
}

void Listener::accept_loop() {
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
        Admission a;
        if (auto refused = admit_handshake(net::origin_of(tcp.get()), a)) {
            spdlog::warn("refused peer {}: {}", address, *refused);
            continue;
        }
        std::lock_guard lock(mu_);
        try {
            Worker& w = workers_.emplace_back();
            w.socket = ghost::UniqueFd(::fcntl(tcp.get(), F_DUPFD_CLOEXEC, 0));
            w.thread = std::thread([this, &w, fd = std::move(tcp), address, a]() mutable {
                serve(w, std::move(fd), address, a);
            });
        } catch (const std::exception& e) {
            // No thread (EAGAIN: out of threads): the connection is closed.
            if (!workers_.empty() && !workers_.back().thread.joinable())
                workers_.pop_back();
            end_handshake_locked(a);
            spdlog::error("refused peer {}: no thread to serve it: {}", address, e.what());
        }
    }
}

// A stranger's connection costs a thread and a descriptor until its
// handshake ends or times out. Without budgets apart from the peers', a few
// silent connections from anywhere would take every slot and lock the
// cluster's own hosts out; each peer has its own, so that one (or a user
// of its host) cannot take the others' either.
std::optional<std::string> Listener::admit_handshake(const net::Origin& o, Admission& a) {
    std::lock_guard lock(mu_);
    a.peer = peer_hosts_.count(o.host) != 0;
    a.key = a.peer ? o.host : o.source;
    const auto it = handshakes_.find(a.key);
    const unsigned mine = it == handshakes_.end() ? 0 : it->second;
    if (a.peer && mine >= peer_budget())
        return fmt::format("{} TLS handshakes from {}, a peer's address, under way: the limit "
                           "for one peer ([limits] max_transfers + {} + {})",
                           mine, o.host, spare_connections, kept_per_peer);
    if (!a.peer && mine >= cfg_.max_handshakes_per_address)
        return fmt::format("{} TLS handshakes from {} under way, the limit for an address that "
                           "is no [[peer]]'s ([limits] max_handshakes_per_address)",
                           mine, o.source);
    if (!a.peer && stranger_handshakes_ >= cfg_.max_handshakes)
        return fmt::format("{} TLS handshakes from addresses that are no [[peer]]'s under way, "
                           "their limit ([limits] max_handshakes)",
                           stranger_handshakes_);
    ++handshakes_[a.key];
    if (!a.peer)
        ++stranger_handshakes_;
    ++handshaking_;
    return std::nullopt;
}

void Listener::end_handshake(const Admission& a) {
    std::lock_guard lock(mu_);
    end_handshake_locked(a);
}

void Listener::end_handshake_locked(const Admission& a) {
    auto it = handshakes_.find(a.key);
    if (it != handshakes_.end() && --it->second == 0)
        handshakes_.erase(it);
    if (!a.peer)
        --stranger_handshakes_;
    --handshaking_;
}

void Listener::serve(Worker& w, ghost::UniqueFd tcp, std::string address, Admission a) {
    const std::chrono::milliseconds timeout(cfg_.io_timeout_ms);
    auto ch = [&] {
        struct End {
            Listener* l;
            const Admission& a;
            ~End() { l->end_handshake(a); }
        } end{this, a};
        return tls_->accept(std::move(tcp), timeout);
    }();
    if (!ch) {
        spdlog::warn("refused peer {}: {}", address, ch.error().what());
    } else if (!cfg_.peer((*ch)->peer())) {
        spdlog::warn("refused peer {}: {} is not a peer of this host", address, (*ch)->peer());
        (void)(*ch)->finish();
    } else if (auto full = take_slot((*ch)->peer())) {
        spdlog::warn("refused peer {} ({}): {}", (*ch)->peer(), address, *full);
    } else {
        const std::string peer = (*ch)->peer(); // the handler takes the channel
        spdlog::info("peer {} connected from {}", peer, address);
        try {
            handler_(std::move(*ch));
        } catch (const std::exception& e) {
            spdlog::error("peer {}: handler failed: {}", address, e.what());
        } catch (...) {
            spdlog::error("peer {}: handler failed", address);
        }
        give_slot(peer);
    }
    // The duplicate would keep a refused connection open until reaped.
    std::lock_guard lock(mu_);
    w.socket.reset();
    w.done = true;
}

// Each peer's first kept_per_peer connections have places of their own (a
// peer's pool keeps that many for its short requests: a commit, a location
// update); beyond them a connection takes a shared place.
std::optional<std::string> Listener::take_slot(const std::string& peer) {
    std::lock_guard lock(mu_);
    unsigned& mine = connected_[peer];
    if (mine >= kept_per_peer) {
        if (shared_taken_ >= shared_places())
            return fmt::format("too many connections: {} of this peer's, {} at once in all; "
                               "the {} shared places ([limits] max_transfers + {}) are taken, "
                               "and each peer keeps {} of its own",
                               mine, active_.load(), shared_places(), spare_connections,
                               kept_per_peer);
        ++shared_taken_;
    }
    ++mine;
    ++active_;
    return std::nullopt;
}

void Listener::give_slot(const std::string& peer) {
    std::lock_guard lock(mu_);
    const auto it = connected_.find(peer);
    if (it == connected_.end())
        return;
    if (it->second > kept_per_peer)
        --shared_taken_;
    if (--it->second == 0)
        connected_.erase(it);
    --active_;
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
