// SPDX-License-Identifier: GPL-2.0
// The relay's control loop, its link table and its store of DATA frames.
#include "relay.hpp"

#include "keepalive.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace ghost::bsp::relay {

using wire::Type;

namespace {

// A frame forwarded this often is going round in circles: the link tables
// never agreed.
constexpr std::uint32_t kMaxHops = 64;

} // namespace

Result<std::unique_ptr<Relay>> Relay::start(Config c) {
    auto r = std::make_unique<Relay>(std::move(c));
    auto local = wire::listen_abstract(r->c_.job);
    if (!local)
        return Error::from_errno(
            local.error().code.value(),
            fmt::format("the job's socket on this host: {}", local.error().what()));
    r->local_ = std::move(*local);
    std::string addr = r->c_.address;
    if (addr.empty()) {
        auto a = wire::default_address();
        if (!a)
            return a.error();
        addr = *a;
    }
    auto tcp = wire::listen_tcp(addr, &r->my_address_);
    if (!tcp)
        return Error::from_errno(tcp.error().code.value(),
                                 fmt::format("the relays' TCP listener: {}", tcp.error().what()));
    r->tcp_ = std::move(*tcp);
    auto client = wire::TlsContext::make(wire::TlsContext::Role::Client, r->c_.key);
    auto server = wire::TlsContext::make(wire::TlsContext::Role::Server, r->c_.key);
    if (!client)
        return client.error();
    if (!server)
        return server.error();
    r->client_ = std::make_unique<wire::TlsContext>(std::move(*client));
    r->server_ = std::make_unique<wire::TlsContext>(std::move(*server));
    auto fd = wire::connect_tcp(r->c_.hub_address);
    if (!fd)
        return Error::from_errno(
            fd.error().code.value(),
            fmt::format("the hub at {}: {}", r->c_.hub_address, fd.error().what()));
    auto hub = wire::tls_connect(*r->client_, std::move(*fd));
    if (!hub)
        return Error::from_errno(
            hub.error().code.value(),
            fmt::format("the hub at {}: {}", r->c_.hub_address, hub.error().what()));
    r->hub_ = std::move(*hub);
    wire::Writer w;
    w.u32(wire::kRelayVersion);
    w.str(r->c_.job);
    w.str(r->c_.host);
    w.str(r->my_address_);
    if (auto s = wire::send_frame(r->hub_, Type::RelayHello, w.data()); !s)
        return Error::from_errno(
            s.error().code.value(),
            fmt::format("the hub at {}: {}", r->c_.hub_address, s.error().what()));
    return r;
}

void Relay::fatal(const std::string& why) {
    std::fprintf(stderr, "bsp-relay %s: %s\n", c_.host.c_str(), why.c_str());
    std::fflush(stderr);
    std::_Exit(1); // the hub sees this host's connections drop: the job fails
}

void Relay::on_directory(const wire::Frame& f) {
    wire::Reader r(f.payload);
    std::lock_guard lk(mu_);
    me_ = static_cast<int>(r.u32());
    const std::uint32_t nhosts = r.u32();
    for (std::uint32_t i = 0; i < nhosts && !r.failed(); ++i) {
        hosts_.push_back(r.str());
        addresses_.push_back(r.str());
    }
    const std::uint32_t nprocs = r.u32();
    for (std::uint32_t i = 0; i < nprocs && !r.failed(); ++i)
        table_.push_back({static_cast<int>(r.u32()), 0});
    if (r.failed() || !r.at_end() || me_ < 0 || me_ >= static_cast<int>(nhosts))
        fatal("malformed DIRECTORY frame from the hub");
    for (const Entry& e : table_)
        if (e.host < 0 || e.host >= static_cast<int>(nhosts))
            fatal("the hub's link table names an unknown host");
    for (std::uint32_t i = 0; i < nhosts; ++i)
        peers_.push_back(nullptr);
    ready_ = true;
    ready_cv_.notify_all();
}

void Relay::on_route(const wire::Frame& f) {
    wire::Reader r(f.payload);
    std::lock_guard lk(mu_);
    const std::uint32_t n = r.u32();
    for (std::uint32_t i = 0; i < n && !r.failed(); ++i) {
        const std::uint32_t vp = r.u32(), h = r.u32(), epoch = r.u32();
        if (r.failed() || vp >= table_.size() || h >= hosts_.size())
            fatal("malformed ROUTE frame from the hub");
        Entry& e = table_[vp];
        if (epoch < e.epoch)
            continue; // an older move's: the entry knows better
        e = {static_cast<int>(h), epoch};
        // What waited here for the VP, or for this entry to catch up, goes
        // where the entry now says.
        std::vector<DataFrame> again = std::move(waiting_[vp]);
        waiting_.erase(vp);
        if (e.host != me_)
            for (auto it = store_.begin(); it != store_.end();) {
                if (it->first.first != vp) {
                    ++it;
                    continue;
                }
                for (auto& d : it->second)
                    again.push_back(std::move(d));
                it = store_.erase(it);
            }
        for (auto& d : again)
            place(std::move(d), true, true);
    }
    if (r.failed() || !r.at_end())
        fatal("malformed ROUTE frame from the hub");
}

void Relay::originate(std::vector<DataFrame> frames) {
    for (auto& d : frames) {
        {
            std::lock_guard lk(mu_);
            ++n_.frames;
            n_.bytes += d.payload.size();
        }
        route(std::move(d), false);
    }
}

void Relay::route(DataFrame f, bool from_peer) {
    std::unique_lock lk(mu_);
    ready_cv_.wait(lk, [&] { return ready_; });
    if (f.target >= table_.size())
        fatal(fmt::format("a DATA frame for vp {} of {}", f.target, table_.size()));
    place(std::move(f), from_peer);
}

// Epochs keep frames from bouncing between relays whose entries disagree
// for a moment: a frame stamped with a newer epoch than this relay's entry
// waits here for the ROUTE that brings the entry up to date, and every
// forward stamps the forwarder's epoch, so a frame only ever moves on to
// an entry as new as the last one it followed.
void Relay::place(DataFrame f, bool from_peer, bool again) {
    const Entry& e = table_[f.target];
    if (e.host == me_) {
        if (!from_peer)
            ++n_.local;
        if (!here_.contains(f.target) && !again)
            ++n_.held;
        store_[{f.target, f.superstep}].push_back(std::move(f));
        store_cv_.notify_all(); // the sessions (one per local VP) check their keys
        return;
    }
    if (from_peer && f.epoch > e.epoch) {
        if (!again)
            ++n_.held;
        waiting_[f.target].push_back(std::move(f));
        return;
    }
    if (from_peer) {
        if (f.hops >= kMaxHops)
            fatal(fmt::format("a DATA frame for vp {} was forwarded {} times: the relays' link "
                              "tables do not agree",
                              f.target, f.hops));
        ++n_.forwarded;
        set_hops(f, f.hops + 1);
    }
    set_epoch(f, e.epoch);
    send_to(e.host, std::move(f));
}

void Relay::send_to(int h, DataFrame f) {
    auto& p = peers_.at(static_cast<std::size_t>(h));
    if (!p) {
        p = std::make_unique<Peer>();
        p->address = addresses_.at(static_cast<std::size_t>(h));
        std::thread([this, h] { peer_writer(h); }).detach();
    }
    p->queue.push_back(std::move(f));
    p->cv.notify_one();
}

void Relay::peer_writer(int h) {
    wire::Link link;
    std::string address;
    {
        std::lock_guard lk(mu_);
        address = peers_.at(static_cast<std::size_t>(h))->address;
    }
    auto fd = wire::connect_tcp(address);
    if (!fd)
        fatal(fmt::format("the relay of {} at {}: {}", hosts_.at(static_cast<std::size_t>(h)),
                          address, fd.error().what()));
    auto l = wire::tls_connect(*client_, std::move(*fd));
    if (!l)
        fatal(fmt::format("the relay of {} at {}: {}", hosts_.at(static_cast<std::size_t>(h)),
                          address, l.error().what()));
    link = std::move(*l);
    std::deque<DataFrame> batch;
    for (;;) {
        {
            std::unique_lock lk(mu_);
            Peer& p = *peers_.at(static_cast<std::size_t>(h));
            p.cv.wait(lk, [&] { return !p.queue.empty(); });
            batch.swap(p.queue); // all that is queued, in order
        }
        for (const DataFrame& f : batch)
            if (auto s = wire::send_frame(link, Type::Data, f.payload); !s)
                fatal(fmt::format("sending to the relay of {}: {}",
                                  hosts_.at(static_cast<std::size_t>(h)), s.error().what()));
        batch.clear();
    }
}

std::vector<DataFrame> Relay::take(std::uint32_t target, std::uint64_t superstep, std::uint32_t n) {
    std::unique_lock lk(mu_);
    const auto key = std::make_pair(target, superstep);
    store_cv_.wait(lk, [&] {
        auto it = store_.find(key);
        return n == 0 || (it != store_.end() && it->second.size() >= n);
    });
    auto it = store_.find(key);
    if (it == store_.end())
        return {};
    if (it->second.size() > n)
        fatal(fmt::format("vp {}: {} DATA frames for superstep {}, the hub expected {}", target,
                          it->second.size(), superstep, n));
    std::vector<DataFrame> out = std::move(it->second);
    store_.erase(it);
    return out;
}

int Relay::run() {
    for (;;) {
        if (!hub_.pending()) {
            pollfd fds[3] = {
                {hub_.fd(), POLLIN, 0}, {local_.get(), POLLIN, 0}, {tcp_.get(), POLLIN, 0}};
            if (::poll(fds, 3, -1) < 0) {
                if (errno == EINTR)
                    continue;
                fatal(fmt::format("poll: {}", std::strerror(errno)));
            }
            if (fds[1].revents & POLLIN) {
                UniqueFd fd(::accept4(local_.get(), nullptr, nullptr, SOCK_CLOEXEC));
                if (fd) {
                    std::thread([this, fd = std::move(fd)]() mutable {
                        session(std::move(fd));
                    }).detach();
                }
            }
            if (fds[2].revents & POLLIN) {
                UniqueFd fd(::accept4(tcp_.get(), nullptr, nullptr, SOCK_CLOEXEC));
                if (fd) {
                    wire::keep_alive(fd.get()); // another host's relay
                    std::thread([this, fd = std::move(fd)]() mutable {
                        peer_reader(std::move(fd));
                    }).detach();
                }
            }
            if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
        }
        auto f = wire::recv_frame(hub_);
        if (!f)
            fatal(fmt::format("lost the hub: {}", f.error().what()));
        switch (f->type) {
        case Type::Directory:
            on_directory(*f);
            break;
        case Type::Route:
            on_route(*f);
            break;
        case Type::End: {
            std::vector<std::byte> stats;
            {
                std::lock_guard lk(mu_);
                stats = encode_stats(c_.host, n_);
            }
            (void)wire::send_frame(hub_, Type::RelayStats, stats);
            // Let the sessions pass ENDOK on before the process goes.
            std::unique_lock lk(mu_);
            store_cv_.wait_for(lk, std::chrono::seconds(30), [&] { return sessions_ == 0; });
            return 0;
        }
        default:
            fatal(fmt::format("unexpected {} frame from the hub", wire::type_name(f->type)));
        }
    }
}

} // namespace ghost::bsp::relay
