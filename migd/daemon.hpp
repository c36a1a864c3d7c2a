// SPDX-License-Identifier: GPL-2.0
// migd's cluster operations: migration, duplication, the checkpoint server
// and the location table, over authenticated peer channels. The protocol and
// its failure handling are in Documentation/migd-protocol.md.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "answers.hpp"
#include "channel.hpp"
#include "config.hpp"
#include "ghost/engine.hpp"
#include "ghost/image.hpp"
#include "pool.hpp"
#include "store.hpp"
#include "ticker.hpp"

namespace migd {

using nlohmann::json;

// Who asked, as the kernel says (SO_PEERCRED on the local socket) or as a
// peer migd vouches for its own local client.
struct Client {
    uid_t uid = 0;
    pid_t pid = 0;
};

// Sends an intermediate reply line (progress) to the local client.
using Emit = std::function<void(const json&)>;

class Daemon {
  public:
    using Connector =
        std::function<ghost::Result<std::unique_ptr<Channel>>(const std::string& host)>;

    // tls may be null: then every peer operation fails with a reason.
    Daemon(Config cfg, std::shared_ptr<TlsContext> tls);
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    // Opens the state directory, finishes or rolls back what the journal
    // holds, and starts the thread that retries unresolved migrations.
    ghost::Result<void> start();
    void stop();

    // A local request (already parsed); the reply. Long operations report
    // progress through emit before replying.
    json local(const json& req, const Client& who, const Emit& emit);
    // An authenticated peer connection: a request and its exchange. After a
    // short request (keeps_connection()) the next may follow on the same
    // connection; an idle one is closed after the I/O timeout.
    void serve_peer(std::unique_ptr<Channel> ch);

    const Config& config() const { return cfg_; }
    // Replaces how peers are reached (tests: plain channels).
    void set_connector(Connector c) { connect_ = std::move(c); }

    // What the operations (ops.hpp) share.
    ghost::Result<std::unique_ptr<Channel>> connect(const std::string& host);
    // One request to host and its reply. A short request (keeps_connection())
    // goes on a kept connection when there is one, and leaves its connection
    // kept; any other on a connection of its own. A non-zero reply_timeout
    // replaces the I/O timeout for the reply.
    ghost::Result<json> ask(const std::string& host, const json& req,
                            std::chrono::milliseconds reply_timeout = {});
    // One request to host that has no reply on its connection (a lookup
    // forwarded with "answer_to", an "answer"): sent on a kept connection,
    // which stays kept. Success means it was sent, not that it arrived.
    ghost::Result<void> tell(const std::string& host, const json& req);
    ghost::Result<std::unique_ptr<ghost::Engine>> engine() const;
    void wake_resolver();
    // A restored copy is migd's child: reaped by the resolver when it exits.
    void adopt(pid_t pid);
    // An operation a thread is carrying out: the resolver leaves its journal
    // entry alone until the thread is done with it (RAII).
    class Busy {
      public:
        Busy(Daemon& d, std::string id);
        ~Busy();
        Busy(const Busy&) = delete;
        Busy& operator=(const Busy&) = delete;

      private:
        Daemon& d_;
        std::string id_;
    };
    bool busy(const std::string& id);
    // The right to finish journaled migration id: held by one thread at a
    // time, and only while the journal still holds the entry (a finished
    // migration's entry is gone, so a late claim is refused).
    class Claim {
      public:
        Claim(Daemon& d, std::string id) : d_(&d), id_(std::move(id)) {}
        Claim(Claim&& o) noexcept : d_(std::exchange(o.d_, nullptr)), id_(std::move(o.id_)) {}
        Claim& operator=(Claim&&) = delete;
        ~Claim();

      private:
        Daemon* d_;
        std::string id_;
    };
    std::optional<Claim> claim(const std::string& id);
    // Reaps the processes it restored that exited, keeping their wait
    // status by pid (the last 4096).
    void reap();
    // The wait status of pid, reaped here (a restored copy), if known.
    std::optional<int> exit_status(pid_t pid);
    // A new journal entry's id: this host's name, the time in ms and a
    // counter (h1.1795920940608.3; migd-protocol.md, "Journal and recovery").
    std::string new_op_id();
    Journal journal_;
    Locations locations_;
    Answers answers_;
    // The checkpoint server's quota across its sessions: the bytes every
    // session has written so far into its temporary file, and a count of
    // images stored or removed, which tells a session to read the store's
    // size again (ckserver.cpp).
    std::atomic<std::uint64_t> store_writing_{0};
    std::atomic<std::uint64_t> store_changes_{0};

  private:
    std::atomic<std::uint64_t> next_op_{1};
    struct Taken {
        std::unique_ptr<Channel> ch;
        bool reused = false; // a kept connection
    };
    // A connection to host for op: a kept one where op keeps connections.
    ghost::Result<Taken> channel_to(const std::string& host, const std::string& op);
    void recover();
    void dispatch_peer(Channel& ch, const json& req);
    void resolver_loop();
    // sweep.cpp: forgets ended processes and the entries that led to them,
    // every sweep_period() (zero: never) on the sweeper's thread.
    void sweep();
    std::chrono::milliseconds sweep_period() const;
    bool stopping();
    bool resolve_one(const json& entry);

    Config cfg_;
    std::shared_ptr<TlsContext> tls_;
    Connector connect_;
    ConnectionPool pool_; // after tls_: closed before the context goes
    std::mutex mu_;
    std::condition_variable cv_;
    bool stopping_ = false;
    bool kick_ = false;
    std::thread resolver_;
    std::optional<Ticker> sweeper_;
    std::mutex kids_mu_;
    std::vector<pid_t> kids_;
    std::deque<std::pair<pid_t, int>> exits_; // reaped: pid, wait status
    std::mutex busy_mu_;
    std::vector<std::string> busy_;
    std::vector<std::string> claimed_; // under busy_mu_
};

// The fault a test asks a migd to have (environment MIGD_FAULT, for the
// failure tests): the daemon _exit()s at the named point of a migration
// ("source-after-ack", "dest-after-import", "dest-mid-stream"), to prove
// that the journal recovers.
void maybe_crash(std::string_view point);

} // namespace migd
