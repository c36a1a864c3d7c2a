// SPDX-License-Identifier: GPL-2.0
#include "daemon.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ops.hpp"

namespace migd {

using ghost::Error;
using ghost::Result;

void maybe_crash(std::string_view point) {
    const char* f = std::getenv("MIGD_FAULT");
    if (!f)
        return;
    const std::string_view fault(f);
    if (fault == point) {
        spdlog::critical("MIGD_FAULT={}: exiting here on purpose", point);
        spdlog::default_logger()->flush();
        ::_exit(99);
    }
    // POINT:stall=S holds the operation S seconds there (a test cuts the
    // link meanwhile).
    const std::string stall = std::string(point) + ":stall=";
    if (fault.starts_with(stall)) {
        const int secs = std::atoi(f + stall.size());
        spdlog::warn("MIGD_FAULT={}: stalling {} s here on purpose", fault, secs);
        std::this_thread::sleep_for(std::chrono::seconds(secs));
    }
}

Daemon::Daemon(Config cfg, std::shared_ptr<TlsContext> tls)
    : cfg_(std::move(cfg)), tls_(std::move(tls)),
      pool_(std::chrono::milliseconds(cfg_.io_timeout_ms / 2)) {
    connect_ = [this](const std::string& host) -> Result<std::unique_ptr<Channel>> {
        const PeerConfig* p = cfg_.peer(host);
        if (!p)
            return Error::from_errno(ENOENT,
                                     fmt::format("{} is not a peer of {}", host, cfg_.host));
        if (!tls_)
            return Error::from_errno(EOPNOTSUPP, fmt::format("{} has no TLS certificates "
                                                             "([tls] in {}): it cannot talk to "
                                                             "peers",
                                                             cfg_.host, cfg_.source));
        auto ch = tls_->connect(p->address, p->port, p->name,
                                std::chrono::milliseconds(cfg_.io_timeout_ms));
        if (!ch)
            return Error::from_errno(ch.error().code.value(),
                                     fmt::format("cannot reach {} at {}:{}: {}", host, p->address,
                                                 p->port, ch.error().what()));
        (*ch)->set_timeout(std::chrono::milliseconds(cfg_.io_timeout_ms));
        return ch;
    };
}

Daemon::~Daemon() {
    stop();
}

Result<void> Daemon::start() {
    if (auto r = journal_.open(cfg_.state_dir); !r)
        return r;
    if (auto r = locations_.open(cfg_.state_dir, cfg_.host); !r)
        return r;
    recover();
    sweep_temporaries(cfg_.state_dir);
    sweep_temporaries(cfg_.state_dir + "/journal");
    if (!cfg_.server_dir.empty())
        sweep_temporaries(cfg_.server_dir);
    resolver_ = std::thread([this] { resolver_loop(); });
    sweeper_.emplace(sweep_period(), [this] { sweep(); });
    return {};
}

bool Daemon::stopping() {
    std::lock_guard lock(mu_);
    return stopping_;
}

void Daemon::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (resolver_.joinable())
        resolver_.join();
    sweeper_.reset();
    pool_.clear();
}

Result<std::unique_ptr<Channel>> Daemon::connect(const std::string& host) {
    return connect_(host);
}

Result<Daemon::Taken> Daemon::channel_to(const std::string& host, const std::string& op) {
    std::unique_ptr<Channel> ch = keeps_connection(op) ? pool_.take(host) : nullptr;
    if (ch)
        return Taken{std::move(ch), true};
    // Lookups skip a peer that just failed in silence; whatever must reach
    // that peer (a commit, a resolve) tries every time.
    const bool lookup = op == "where" || op == "kill" || op == "list";
    if (const auto left = lookup ? pool_.silent(host) : std::chrono::milliseconds(0);
        left.count() > 0)
        return Error::from_errno(EHOSTUNREACH,
                                 fmt::format("{} did not answer a moment ago (not asked again "
                                             "for {} ms)",
                                             host, left.count()));
    auto c = connect(host);
    if (!c) {
        const int e = c.error().code.value();
        if (e == ETIMEDOUT || e == EHOSTUNREACH || e == ENETUNREACH)
            pool_.mark_silent(host);
        return c.error();
    }
    pool_.mark_answered(host);
    return Taken{std::move(*c), false};
}

Result<json> Daemon::ask(const std::string& host, const json& req,
                         std::chrono::milliseconds reply_timeout) {
    const std::string op = req.value("op", "");
    const bool keep = keeps_connection(op);
    for (;;) {
        auto t = channel_to(host, op);
        if (!t)
            return t.error();
        std::unique_ptr<Channel> ch = std::move(t->ch);
        auto s = send_json(*ch, req);
        if (s && reply_timeout.count() > 0)
            ch->set_timeout(reply_timeout);
        Result<json> r = s ? recv_json(*ch) : Result<json>(s.error());
        if (r) {
            if (keep) {
                ch->set_timeout(std::chrono::milliseconds(cfg_.io_timeout_ms));
                pool_.give(host, std::move(ch));
            } else {
                (void)ch->finish();
            }
            return r;
        }
        // A kept connection the peer closed meanwhile (it restarted, or its
        // idle timeout passed first): once more on a new connection, unless
        // the request must not be repeated (a signal delivered twice).
        if (!t->reused || op == "kill")
            return r;
    }
}

Result<void> Daemon::tell(const std::string& host, const json& req) {
    for (;;) {
        auto t = channel_to(host, req.value("op", ""));
        if (!t)
            return t.error();
        if (auto s = send_json(*t->ch, req); !s) {
            if (t->reused) // closed by the peer meanwhile: on a new one
                continue;
            return s.error();
        }
        pool_.give(host, std::move(t->ch));
        return {};
    }
}

Result<std::unique_ptr<ghost::Engine>> Daemon::engine() const {
    auto kind = ghost::parse_engine_kind(cfg_.engine);
    if (!kind)
        return kind.error();
    return ghost::Engine::open(*kind, cfg_.device);
}

void Daemon::recover() {
    for (const auto& e : journal_.all())
        Ops::recover_entry(*this, e);
}

std::string Daemon::new_op_id() {
    return fmt::format("{}.{}.{}", cfg_.host, now_ms(), next_op_++);
}

void Daemon::wake_resolver() {
    {
        std::lock_guard lock(mu_);
        kick_ = true;
    }
    cv_.notify_all();
}

void Daemon::adopt(pid_t pid) {
    std::lock_guard lock(kids_mu_);
    kids_.push_back(pid);
}

Daemon::Busy::Busy(Daemon& d, std::string id) : d_(d), id_(std::move(id)) {
    std::lock_guard lock(d_.busy_mu_);
    d_.busy_.push_back(id_);
}

Daemon::Busy::~Busy() {
    std::lock_guard lock(d_.busy_mu_);
    std::erase(d_.busy_, id_);
}

std::optional<Daemon::Claim> Daemon::claim(const std::string& id) {
    std::lock_guard lock(busy_mu_);
    if (std::find(claimed_.begin(), claimed_.end(), id) != claimed_.end() || !journal_.get(id))
        return std::nullopt;
    claimed_.push_back(id);
    return Claim(*this, id);
}

Daemon::Claim::~Claim() {
    if (!d_)
        return;
    std::lock_guard lock(d_->busy_mu_);
    std::erase(d_->claimed_, id_);
}

bool Daemon::busy(const std::string& id) {
    std::lock_guard lock(busy_mu_);
    return std::find(busy_.begin(), busy_.end(), id) != busy_.end();
}

// Only exits are reaped. A restored copy that migrates on is traced by
// another thread of migd during its export, and wait(2) in any thread of
// the tracer's process reports (and consumes) its ptrace stops whatever
// the flags: peek first (WNOWAIT), and leave a stop to the tracer, which
// would otherwise wait for it forever.
void Daemon::reap() {
    std::lock_guard lock(kids_mu_);
    std::erase_if(kids_, [this](pid_t pid) {
        siginfo_t info{};
        if (::waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
            return errno == ECHILD;
        if (info.si_pid != pid || (info.si_code != CLD_EXITED && info.si_code != CLD_KILLED &&
                                   info.si_code != CLD_DUMPED))
            return false;
        int status;
        if (::waitpid(pid, &status, WNOHANG) != pid)
            return false;
        // Asked for by 'where' (bsprun: the exit status of a VP that moved).
        // A pid used again later is reaped again, and its newest status wins.
        std::erase_if(exits_, [pid](const auto& e) { return e.first == pid; });
        exits_.emplace_back(pid, status);
        if (exits_.size() > 4096)
            exits_.pop_front();
        return true;
    });
}

std::optional<int> Daemon::exit_status(pid_t pid) {
    reap(); // a zombie of ours is reaped now, not at the resolver's next round
    std::lock_guard lock(kids_mu_);
    for (const auto& [p, st] : exits_)
        if (p == pid)
            return st;
    return std::nullopt;
}

bool Daemon::resolve_one(const json& e) {
    const std::string role = e.value("role", ""), state = e.value("state", "");
    if (role == "dest" && state == "ready")
        return Ops::resolve_dest(*this, e);
    if (role == "source" && state == "committing")
        return Ops::resolve_source(*this, e);
    return true;
}

// Unresolved migrations: a destination holding a stopped copy asks its
// source what became of the original; a source past the commit point
// delivers the commit. Every second, or at once when kicked.
void Daemon::resolver_loop() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
        cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_ || kick_; });
        if (stopping_)
            break;
        kick_ = false;
        lock.unlock();
        reap();
        for (const auto& e : journal_.all()) {
            // A peer's answer of the wrong type throws (nlohmann): that
            // entry waits for the next round, and the daemon goes on.
            try {
                const std::string role = e.value("role", ""), state = e.value("state", "");
                if (((role == "dest" && state == "ready") ||
                     (role == "source" && state == "committing")) &&
                    !busy(e.value("id", "")))
                    (void)resolve_one(e);
            } catch (const std::exception& ex) {
                spdlog::error("resolving a journal entry: {}", ex.what());
            }
        }
        lock.lock();
    }
}

json Daemon::local(const json& req, const Client& who, const Emit& emit) {
    const std::string op = req.value("op", "");
    if ((op == "migrate" || op == "dup") && req.contains("gid") && !req.contains("pid"))
        return Ops::local_move_gid(*this, req, who);
    if (op == "migrate" || op == "dup")
        return Ops::local_move(*this, req, who, emit);
    if (op == "checkpoint")
        return Ops::local_checkpoint(*this, req, who, emit);
    if (op == "images")
        return Ops::local_images(*this, req, who);
    if (op == "restart")
        return Ops::local_restart(*this, req, who, emit);
    if (op == "manifest")
        return Ops::local_manifest(*this, req, who);
    if (op == "ps")
        return Ops::local_ps(*this, req, who);
    if (op == "where")
        return Ops::local_where(*this, req, who);
    if (op == "hosts")
        return Ops::local_hosts(*this);
    if (op == "kill")
        return Ops::local_kill(*this, req, who);
    return error_reply(fmt::format("unknown op \"{}\"", op));
}

void Daemon::serve_peer(std::unique_ptr<Channel> ch) {
    const std::chrono::milliseconds io(cfg_.io_timeout_ms);
    for (bool first = true;; first = false) {
        auto req = recv_json(*ch);
        if (!req) {
            // After a short request, the asker's end or its silence is the
            // normal end of a kept connection.
            if (first)
                spdlog::warn("peer {}: {}", ch->peer(), req.error().what());
            break;
        }
        const std::string op = req->value("op", "");
        try {
            dispatch_peer(*ch, *req);
        } catch (const std::exception& e) {
            // A field of the wrong type: nlohmann throws on it. A one-way
            // request's asker reads nothing on this connection.
            if (is_one_way(*req))
                spdlog::warn("peer {}: malformed {} request: {}", ch->peer(), op, e.what());
            else
                (void)send_json(*ch, error_reply(fmt::format("malformed request: {}", e.what())));
        }
        if (!keeps_connection(op))
            break;
        ch->set_timeout(io);
    }
    (void)ch->finish();
}

namespace {

// Whether req names the uid it acts for, as an unsigned number.
bool names_uid(const json& req) {
    const auto it = req.find("uid");
    return it != req.end() && it->is_number_unsigned();
}

// A peer's request for a user must say which: one without a uid is refused,
// never taken as root's (value("uid", 0) would).
bool names_its_user(const std::string& op, const json& req) {
    if (op == "store") {
        const auto items = req.find("items");
        return items != req.end() && items->is_array() &&
               std::all_of(items->begin(), items->end(), names_uid);
    }
    static const std::set<std::string> for_a_user = {
        "import", "images", "fetch", "restart", "manifest", "where", "kill", "migrate", "dup"};
    return !for_a_user.contains(op) || names_uid(req);
}

} // namespace

void Daemon::dispatch_peer(Channel& c, const json& r) {
    Channel* ch = &c;
    const json* req = &r;
    const std::string op = req->value("op", "");
    if (!names_its_user(op, *req)) {
        spdlog::warn("peer {}: {} request without the uid it acts for: refused", ch->peer(), op);
        if (!is_one_way(*req))
            (void)send_json(*ch, error_reply(fmt::format("malformed {} request: no uid", op)));
        return;
    }
    if (op == "import")
        Ops::peer_import(*this, *ch, *req);
    else if (op == "resolve")
        Ops::peer_resolve(*this, *ch, *req);
    else if (op == "commit" || op == "abort")
        Ops::peer_commit(*this, *ch, *req);
    else if (op == "store")
        Ops::peer_store(*this, *ch, *req);
    else if (op == "images")
        Ops::peer_images(*this, *ch, *req);
    else if (op == "fetch")
        Ops::peer_fetch(*this, *ch, *req);
    else if (op == "restart")
        Ops::peer_restart(*this, *ch, *req);
    else if (op == "manifest")
        Ops::peer_manifest(*this, *ch, *req);
    else if (op == "list")
        Ops::peer_list(*this, *ch, *req);
    else if (op == "where" || op == "kill" || op == "migrate" || op == "dup")
        Ops::peer_where(*this, *ch, *req);
    else if (op == "answer")
        Ops::peer_answer(*this, *ch, *req);
    else if (op == "known")
        Ops::peer_known(*this, *ch, *req);
    else if (!is_one_way(*req))
        (void)send_json(*ch, error_reply(fmt::format("unknown peer op \"{}\"", op)));
}

} // namespace migd
