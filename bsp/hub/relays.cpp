// SPDX-License-Identifier: GPL-2.0
// The hub's side of routing through relays (bsp/relay/): the relays'
// directory and link-table entries, DELIVER_RELAYED, and their counters at
// the end.
#include <algorithm>

#include <fmt/format.h>

#include "hub.hpp"

namespace ghost::bsp {

using wire::Type;

void Hub::set_relays(std::vector<std::string> hosts, bool broadcast,
                     std::function<std::string(int vp)> host_of) {
    relays_.clear();
    for (auto& h : hosts)
        relays_.push_back({std::move(h), {}, {}});
    broadcast_ = broadcast;
    host_of_ = std::move(host_of);
}

int Hub::relay_index(const std::string& host) const {
    for (std::size_t i = 0; i < relays_.size(); ++i)
        if (relays_[i].host == host)
            return static_cast<int>(i);
    return -1;
}

void Hub::deliver(int vp, std::span<const std::byte> payload, bool back) {
    Vp& p = vps_[static_cast<std::size_t>(vp)];
    const std::uint32_t expected = static_cast<std::size_t>(vp) < expected_.size()
                                       ? expected_[static_cast<std::size_t>(vp)]
                                       : 0;
    if (!p.relayed) {
        if (expected != 0)
            return fail(vp, fmt::format("vp {} is owed {} DATA frames from relays but is not "
                                        "connected through one",
                                        vp, expected));
        return send_or_fail(vp, Type::Deliver, payload);
    }
    wire::Writer w;
    w.u32(expected);
    w.u32((back ? relay::kDeliverBack : 0) | (gets_relayed_ ? relay::kRepliesRelayed : 0));
    w.bytes(payload);
    send_or_fail(vp, Type::DeliverRelayed, w.data());
}

void Hub::relay_hello(wire::Link link, const Frame& f) {
    wire::Reader r(f.payload);
    const std::uint32_t version = r.u32();
    const std::string job = r.str(), host = r.str(), address = r.str();
    if (r.failed() || version != wire::kRelayVersion || job != job_)
        return fail(-1, fmt::format("a relay said RELAY_HELLO for job '{}' version {}, not this "
                                    "job '{}' version {}",
                                    job, version, job_, wire::kRelayVersion));
    const int i = relay_index(host);
    if (i < 0)
        return fail(-1,
                    fmt::format("a relay on {} said hello, but the job has no relay there", host));
    RelaySlot& slot = relays_[static_cast<std::size_t>(i)];
    if (slot.link)
        return fail(-1, fmt::format("two relays on {} said hello", host));
    slot.link = std::move(link);
    slot.address = address;
    if (std::all_of(relays_.begin(), relays_.end(),
                    [](const RelaySlot& s) { return static_cast<bool>(s.link); }))
        send_directory();
}

// Once every relay is in: each learns the others' addresses and where every
// VP is (all at home at the start; after a restart, where they were put).
void Hub::send_directory() {
    route_.assign(vps_.size(), -1);
    epoch_.assign(vps_.size(), 0);
    for (int v = 0; v < nprocs_; ++v) {
        const std::string host = host_of_(v);
        route_[static_cast<std::size_t>(v)] = relay_index(host);
        if (route_[static_cast<std::size_t>(v)] < 0)
            return fail(v, fmt::format("vp {} is on {}, where the job has no relay", v, host));
    }
    for (std::size_t i = 0; i < relays_.size() && !done_; ++i) {
        wire::Writer w;
        w.u32(static_cast<std::uint32_t>(i));
        w.u32(static_cast<std::uint32_t>(relays_.size()));
        for (const auto& r : relays_) {
            w.str(r.host);
            w.str(r.address);
        }
        w.u32(static_cast<std::uint32_t>(route_.size()));
        for (int h : route_)
            w.u32(static_cast<std::uint32_t>(h));
        if (auto s = wire::send_frame(relays_[i].link, Type::Directory, w.data()); !s)
            fail(-1, fmt::format("the relay on {}: {}", relays_[i].host, s.error().what()), true);
    }
}

// After a move: the old host's relay forwards what still comes to it, the
// new host's keeps what is for the VP; with broadcast every relay updates
// its entry, so none forwards.
void Hub::reroute(int vp) {
    if (relays_.empty() || route_.empty())
        return;
    const int now = relay_index(host_of_(vp));
    const int was = route_[static_cast<std::size_t>(vp)];
    if (now < 0 || now == was)
        return;
    route_[static_cast<std::size_t>(vp)] = now;
    wire::Writer w;
    w.u32(1);
    w.u32(static_cast<std::uint32_t>(vp));
    w.u32(static_cast<std::uint32_t>(now));
    w.u32(++epoch_[static_cast<std::size_t>(vp)]);
    for (std::size_t i = 0; i < relays_.size() && !done_; ++i) {
        const int ii = static_cast<int>(i);
        if (!broadcast_ && ii != was && ii != now)
            continue;
        if (auto s = wire::send_frame(relays_[i].link, Type::Route, w.data()); !s)
            fail(-1, fmt::format("the relay on {}: {}", relays_[i].host, s.error().what()), true);
    }
}

void Hub::on_relay_frame(std::size_t i) {
    RelaySlot& r = relays_[i];
    auto f = wire::recv_frame(r.link);
    if (!f)
        return fail(-1,
                    fmt::format("the relay on {} lost its connection to the hub (bsp-relay died, "
                                "or its host is down): {}",
                                r.host, f.error().what()),
                    true);
    fail(-1, fmt::format("the relay on {} sent an unexpected {} frame", r.host,
                         wire::type_name(f->type)));
}

void Hub::end_relays() {
    for (auto& r : relays_) {
        if (!r.link || !wire::send_frame(r.link, Type::End))
            continue;
        auto f = wire::recv_frame(r.link);
        if (f && f->type == Type::RelayStats)
            if (auto n = relay::decode_stats(f->payload); n) {
                relay_totals_ += *n;
                ++relay_totals_.reported;
            }
        r.link.close();
    }
}

} // namespace ghost::bsp
