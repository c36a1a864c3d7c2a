// SPDX-License-Identifier: GPL-2.0
// migd's peer listener: accepts TCP connections, authenticates each with
// mutual TLS on a worker thread of its own, keeps only the hosts of the
// config's [[peer]] list, and hands each authenticated channel to the
// protocol's handler. Every refused connection is logged (spdlog) with the
// peer's address and the reason.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "channel.hpp"
#include "config.hpp"
#include "ghost/fd.hpp"
#include "ghost/result.hpp"
#include "net.hpp"
#include "pool.hpp"

namespace migd {

// Runs on the connection's worker thread; owns the channel. A channel
// returned to nobody (destroyed without finish()) ends without close_notify.
using PeerHandler = std::function<void(std::unique_ptr<Channel>)>;

// The TLS context for a config's [tls] files; its certificate must name the
// config's host. An error when [tls] is absent (peer operations disabled).
ghost::Result<std::shared_ptr<TlsContext>> load_tls(const Config& cfg);

class Listener {
  public:
    // Connections beyond max_transfers that may be in a handshake or a
    // short request (ping, location update) while the transfers run.
    static constexpr unsigned spare_connections = 4;

    // Listens on cfg.listen:cfg.port; see the other overload.
    static ghost::Result<std::unique_ptr<Listener>>
    start(const Config& cfg, std::shared_ptr<TlsContext> tls, PeerHandler handler);
    // Serves an already listening socket (tests: port 0). Admission, each
    // refusal closing the connection and logged:
    //  - a TLS handshake must end within cfg.io_timeout_ms;
    //  - from each address of cfg.peers (resolved here, once): at most
    //    cfg.max_transfers + 4 + kept_per_peer handshakes at once;
    //  - from any other address, which holds no slot a peer needs: at most
    //    cfg.max_handshakes_per_address per source (net::Origin) and
    //    cfg.max_handshakes together;
    //  - authenticated connections in a handler: at most limit(), of
    //    which kept_per_peer are each peer's own and the rest
    //    (shared_places()) go to whichever peer comes first, so that no
    //    peer (or user of its host) can take another's last places.
    static ghost::Result<std::unique_ptr<Listener>> start(const Config& cfg,
                                                          std::shared_ptr<TlsContext> tls,
                                                          PeerHandler handler,
                                                          ghost::UniqueFd listening);
    ~Listener();
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    // The port it listens on.
    std::uint16_t port() const { return port_; }
    // cfg.max_transfers + 4 + what the peers may keep idle (pool.hpp).
    unsigned limit() const { return limit_; }
    // The places beyond each peer's own: cfg.max_transfers + 4.
    unsigned shared_places() const { return cfg_.max_transfers + spare_connections; }
    // Authenticated connections in a handler now.
    unsigned active() const { return active_.load(); }
    // Connections in a TLS handshake now.
    unsigned handshaking() const { return handshaking_.load(); }
    // Stops accepting, shuts the open connections down (their handlers see
    // an error on their next read or write), joins every thread. Idempotent.
    void stop();

  private:
    struct Worker {
        std::thread thread;
        ghost::UniqueFd socket; // a duplicate: stop() shuts the connection down
        std::atomic<bool> done{false};
    };

    Listener(const Config& cfg, std::shared_ptr<TlsContext> tls, PeerHandler handler,
             ghost::UniqueFd listening);
    void accept_loop();
    // Whose budget a handshake counts against.
    struct Admission {
        std::string key; // a peer's host, else the source
        bool peer = false;
    };
    // Counts a handshake from o in (a says where), or says why not.
    std::optional<std::string> admit_handshake(const net::Origin& o, Admission& a);
    void end_handshake(const Admission& a);
    void end_handshake_locked(const Admission& a);
    unsigned peer_budget() const {
        return cfg_.max_transfers + spare_connections + unsigned(kept_per_peer);
    }
    // A place for an authenticated connection of peer: one of its own,
    // else a shared one; or why there is none.
    std::optional<std::string> take_slot(const std::string& peer);
    void give_slot(const std::string& peer);
    void serve(Worker& w, ghost::UniqueFd tcp, std::string address, Admission a);
    void reap(bool all);

    Config cfg_;
    std::shared_ptr<TlsContext> tls_;
    PeerHandler handler_;
    ghost::UniqueFd listening_;
    ghost::UniqueFd wake_; // eventfd: stop() wakes the accept loop
    std::uint16_t port_ = 0;
    unsigned limit_ = 0;
    std::set<std::string> peer_hosts_; // where cfg.peers connect from
    std::atomic<unsigned> active_{0};
    std::atomic<unsigned> handshaking_{0};
    std::mutex mu_;
    std::map<std::string, unsigned> handshakes_; // by Admission::key, under mu_
    unsigned stranger_handshakes_ = 0;           // under mu_
    std::map<std::string, unsigned> connected_;  // by peer name, under mu_
    unsigned shared_taken_ = 0;                  // under mu_
    std::list<Worker> workers_;
    std::thread acceptor_;
    bool stopped_ = false;
};

} // namespace migd
