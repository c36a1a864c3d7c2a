// SPDX-License-Identifier: GPL-2.0
#include "daemon.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <cstdlib>
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
    : cfg_(std::move(cfg)), tls_(std::move(tls)) {
    connect_ = [this](const std::string& host) -> Result<std::unique_ptr<Channel>> {
        const PeerConfig* p = cfg_.peer(host);
        if (!p)
            return Error::from_errno(ENOENT, fmt::format("{} is not a peer of {}", host,
                                                         cfg_.host));
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
    resolver_ = std::thread([this] { resolver_loop(); });
    return {};
}

void Daemon::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (resolver_.joinable())
        resolver_.join();
}

Result<std::unique_ptr<Channel>> Daemon::connect(const std::string& host) {
    return connect_(host);
}

Result<json> Daemon::ask(const std::string& host, const json& req,
                         std::chrono::milliseconds reply_timeout) {
    auto ch = connect(host);
    if (!ch)
        return ch.error();
    if (auto s = send_json(**ch, req); !s)
        return s.error();
    if (reply_timeout.count() > 0)
        (*ch)->set_timeout(reply_timeout);
    return recv_json(**ch);
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

bool Daemon::busy(const std::string& id) {
    std::lock_guard lock(busy_mu_);
    return std::find(busy_.begin(), busy_.end(), id) != busy_.end();
}

void Daemon::reap() {
    std::lock_guard lock(kids_mu_);
    std::erase_if(kids_, [](pid_t pid) {
        int status;
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        return r == pid || (r < 0 && errno == ECHILD);
    });
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
            const std::string role = e.value("role", ""), state = e.value("state", "");
            if (((role == "dest" && state == "ready") ||
                 (role == "source" && state == "committing")) &&
                !busy(e.value("id", "")))
                (void)resolve_one(e);
        }
        lock.lock();
    }
}

json Daemon::local(const json& req, const Client& who, const Emit& emit) {
    const std::string op = req.value("op", "");
    if (op == "migrate" || op == "dup")
        return Ops::local_move(*this, req, who, emit);
    if (op == "checkpoint")
        return Ops::local_checkpoint(*this, req, who, emit);
    if (op == "images")
        return Ops::local_images(*this, req, who);
    if (op == "restart")
        return Ops::local_restart(*this, req, who, emit);
    if (op == "ps")
        return Ops::local_ps(*this, req, who);
    if (op == "where")
        return Ops::local_where(*this, req, who);
    if (op == "kill")
        return Ops::local_kill(*this, req, who);
    return error_reply(fmt::format("unknown op \"{}\"", op));
}

void Daemon::serve_peer(std::unique_ptr<Channel> ch) {
    auto req = recv_json(*ch);
    if (!req) {
        spdlog::warn("peer {}: {}", ch->peer(), req.error().what());
        return;
    }
    try {
        dispatch_peer(*ch, *req);
    } catch (const std::exception& e) {
        // A field of the wrong type: nlohmann throws on it.
        (void)send_json(*ch, error_reply(fmt::format("malformed request: {}", e.what())));
    }
    (void)ch->finish();
}

void Daemon::dispatch_peer(Channel& c, const json& r) {
    Channel* ch = &c;
    const json* req = &r;
    const std::string op = req->value("op", "");
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
    else if (op == "list")
        Ops::peer_list(*this, *ch, *req);
    else if (op == "where" || op == "kill")
        Ops::peer_where(*this, *ch, *req);
    else
        (void)send_json(*ch, error_reply(fmt::format("unknown peer op \"{}\"", op)));
}

} // namespace migd
