// SPDX-License-Identifier: GPL-2.0
// DATA frames: cut out of a SYNC, spliced into a DELIVER.
#include "data.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include <endian.h>

#include <fmt/format.h>

namespace ghost::bsp::relay {

namespace {

// The body of a DATA frame (after its head) read front to back.
struct Reply {
    std::uint32_t index = 0;
    std::span<const std::byte> data;
};
struct Body {
    std::vector<PutRec> puts;
    std::vector<MsgRec> msgs;
    std::vector<Reply> replies;
};

Result<Body> read_body(std::span<const std::byte> payload) {
    wire::Reader r(payload.subspan(std::min(payload.size(), kHeadSize)));
    Body b;
    const std::uint32_t nputs = r.u32();
    for (std::uint32_t i = 0; i < nputs && !r.failed(); ++i) {
        PutRec p;
        p.reg = r.u64();
        p.off = r.u64();
        p.data = r.blob();
        b.puts.push_back(p);
    }
    const std::uint32_t nmsgs = r.u32();
    for (std::uint32_t i = 0; i < nmsgs && !r.failed(); ++i) {
        MsgRec m;
        m.tag = r.blob();
        m.payload = r.blob();
        b.msgs.push_back(m);
    }
    const std::uint32_t nreplies = r.u32();
    for (std::uint32_t i = 0; i < nreplies && !r.failed(); ++i) {
        Reply g;
        g.index = r.u32();
        g.data = r.blob();
        b.replies.push_back(g);
    }
    if (r.failed() || !r.at_end() || payload.size() < kHeadSize)
        return Error::from_errno(EPROTO, "malformed DATA frame");
    return b;
}

} // namespace

Counters& Counters::operator+=(const Counters& o) {
    frames += o.frames;
    bytes += o.bytes;
    local += o.local;
    forwarded += o.forwarded;
    held += o.held;
    return *this;
}

std::vector<std::byte> encode_stats(std::string_view host, const Counters& n) {
    wire::Writer w;
    w.str(host);
    for (std::uint64_t v : {n.frames, n.bytes, n.local, n.forwarded, n.held})
        w.u64(v);
    auto d = w.data();
    return {d.begin(), d.end()};
}

Result<Counters> decode_stats(std::span<const std::byte> payload) {
    wire::Reader r(payload);
    (void)r.str();
    Counters n;
    for (std::uint64_t* v : {&n.frames, &n.bytes, &n.local, &n.forwarded, &n.held})
        *v = r.u64();
    if (r.failed() || !r.at_end())
        return Error::from_errno(EPROTO, "malformed RELAY_STATS frame");
    return n;
}

Result<DataFrame> decode_data(std::vector<std::byte> payload) {
    wire::Reader r(payload);
    DataFrame f;
    f.target = r.u32();
    f.source = r.u32();
    f.superstep = r.u64();
    f.hops = r.u32();
    f.epoch = r.u32();
    if (r.failed())
        return Error::from_errno(EPROTO, "malformed DATA frame (short head)");
    f.payload = std::move(payload);
    return f;
}

namespace {

void patch(DataFrame& f, std::size_t at, std::uint32_t v) {
    const std::uint32_t le = htole32(v);
    if (f.payload.size() >= at + sizeof le)
        std::memcpy(f.payload.data() + at, &le, sizeof le);
}

} // namespace

void set_hops(DataFrame& f, std::uint32_t hops) {
    f.hops = hops;
    patch(f, kHopsOffset, hops);
}

void set_epoch(DataFrame& f, std::uint32_t epoch) {
    f.epoch = epoch;
    patch(f, kEpochOffset, epoch);
}

std::vector<DataFrame> strip_sync(SyncRequest& s, std::uint32_t source) {
    struct Out {
        std::vector<const PutRec*> puts;
        std::vector<const MsgRec*> msgs;
        std::uint64_t bytes = 0;
    };
    std::map<std::uint32_t, Out> by_target;
    for (const auto& p : s.puts) {
        auto& o = by_target[p.pid];
        o.puts.push_back(&p);
        o.bytes += p.data.size();
    }
    for (const auto& m : s.msgs) {
        auto& o = by_target[m.pid];
        o.msgs.push_back(&m);
        o.bytes += m.tag.size() + m.payload.size();
    }
    std::vector<DataFrame> frames;
    for (const auto& [target, o] : by_target) {
        wire::Writer w;
        w.u32(target);
        w.u32(source);
        w.u64(s.superstep);
        w.u32(0); // hops
        w.u32(0); // epoch: the relay stamps its entry's
        w.u32(static_cast<std::uint32_t>(o.puts.size()));
        for (const PutRec* p : o.puts) {
            w.u64(p->reg);
            w.u64(p->off);
            w.blob(p->data);
        }
        w.u32(static_cast<std::uint32_t>(o.msgs.size()));
        for (const MsgRec* m : o.msgs) {
            w.blob(m->tag);
            w.blob(m->payload);
        }
        w.u32(0); // get replies: split_replies() sends those
        DataFrame f{target, source, s.superstep, 0, 0, {}};
        auto d = w.data();
        f.payload.assign(d.begin(), d.end());
        frames.push_back(std::move(f));
        s.relayed.push_back({target, 1, o.bytes});
    }
    s.puts.clear();
    s.msgs.clear();
    return frames;
}

std::optional<std::vector<std::byte>> encode_routed_gets(std::uint32_t target,
                                                         std::uint64_t superstep,
                                                         std::span<const SyncRequest> syncs) {
    wire::Writer w;
    w.u64(superstep);
    w.u32(0);
    std::uint32_t n = 0;
    for (std::size_t r = 0; r < syncs.size(); ++r)
        for (std::size_t i = 0; i < syncs[r].gets.size(); ++i) {
            const GetRec& g = syncs[r].gets[i];
            if (g.pid != target)
                continue;
            w.u32(static_cast<std::uint32_t>(r));
            w.u32(static_cast<std::uint32_t>(i));
            w.u64(g.reg);
            w.u64(g.off);
            w.u64(g.len);
            ++n;
        }
    if (n == 0)
        return std::nullopt;
    w.patch_u32(8, n);
    auto d = w.data();
    return std::vector<std::byte>(d.begin(), d.end());
}

Result<RoutedGets> decode_routed_gets(std::span<const std::byte> payload) {
    wire::Reader r(payload);
    RoutedGets g;
    g.superstep = r.u64();
    const std::uint32_t n = r.u32();
    for (std::uint32_t i = 0; i < n && !r.failed(); ++i) {
        RoutedGet x;
        x.requester = r.u32();
        x.index = r.u32();
        x.reg = r.u64();
        x.off = r.u64();
        x.len = r.u64();
        g.gets.push_back(x);
    }
    if (r.failed() || !r.at_end())
        return Error::from_errno(EPROTO, "malformed GETS_RELAYED frame");
    return g;
}

std::vector<std::byte> plain_gets(const RoutedGets& g) {
    wire::Writer w;
    w.u32(static_cast<std::uint32_t>(g.gets.size()));
    for (const auto& x : g.gets) {
        w.u64(x.reg);
        w.u64(x.off);
        w.u64(x.len);
    }
    auto d = w.data();
    return {d.begin(), d.end()};
}

Result<std::vector<DataFrame>> split_replies(const RoutedGets& g, std::span<const std::byte> data,
                                             std::uint32_t source) {
    std::uint64_t total = 0; // never more than data.size()
    for (const auto& x : g.gets) {
        if (x.len > data.size() - total)
            return Error::from_errno(
                EPROTO, fmt::format("GETDATA of vp {} is too short for its gets", source));
        total += x.len;
    }
    if (total != data.size())
        return Error::from_errno(EPROTO,
                                 fmt::format("GETDATA of vp {} is too long for its gets", source));
    // Gets come by requester: one frame per run of the same requester.
    std::vector<DataFrame> frames;
    std::size_t pos = 0;
    for (std::size_t i = 0; i < g.gets.size();) {
        const std::uint32_t requester = g.gets[i].requester;
        std::size_t end = i;
        while (end < g.gets.size() && g.gets[end].requester == requester)
            ++end;
        wire::Writer w;
        w.u32(requester);
        w.u32(source);
        w.u64(g.superstep);
        w.u32(0); // hops
        w.u32(0); // epoch
        w.u32(0); // puts
        w.u32(0); // messages
        w.u32(static_cast<std::uint32_t>(end - i));
        for (; i < end; ++i) {
            w.u32(g.gets[i].index);
            w.blob(data.subspan(pos, g.gets[i].len));
            pos += g.gets[i].len;
        }
        DataFrame f{requester, source, g.superstep, 0, 0, {}};
        auto d = w.data();
        f.payload.assign(d.begin(), d.end());
        frames.push_back(std::move(f));
    }
    return frames;
}

bool worth_relaying(std::span<const SyncRequest> syncs) {
    std::uint64_t bytes = 0;
    std::set<std::pair<std::size_t, std::uint32_t>> pairs;
    for (std::size_t r = 0; r < syncs.size(); ++r)
        for (const auto& g : syncs[r].gets) {
            bytes += g.len;
            pairs.emplace(r, g.pid);
        }
    return !pairs.empty() && bytes >= kRelayGetsMin * pairs.size();
}

Result<std::vector<std::byte>> splice_deliver(std::span<const std::byte> deliver,
                                              std::vector<DataFrame> frames, int nprocs,
                                              bool replies_relayed) {
    // Skip to the gets section: superstep, tag size, pushes (each with
    // every VP's size), pops.
    wire::Reader r(deliver);
    (void)r.u64();
    (void)r.i64();
    const std::uint32_t npush = r.u32();
    for (std::uint32_t i = 0; i < npush && !r.failed(); ++i)
        (void)r.bytes(8 + 8 * static_cast<std::uint64_t>(nprocs));
    const std::uint32_t npop = r.u32();
    (void)r.bytes(8 * static_cast<std::uint64_t>(npop));
    const std::size_t head = r.position();
    const std::uint32_t nget = r.u32();
    std::vector<std::span<const std::byte>> replies(nget);
    bool empty_replies = true;
    for (std::uint32_t i = 0; i < nget && !r.failed(); ++i) {
        replies[i] = r.blob();
        empty_replies = replies[i].empty() && empty_replies;
    }
    // What remains must be the two empty sections: two u32 zeros.
    const std::uint32_t hub_puts = r.u32(), hub_msgs = r.u32();
    if (r.failed() || !r.at_end() || hub_puts != 0 || hub_msgs != 0 ||
        (replies_relayed && !empty_replies))
        return Error::from_errno(EPROTO, "a relayed DELIVER must have empty puts and messages "
                                         "sections (and empty get replies when they are "
                                         "relayed)");
    std::stable_sort(frames.begin(), frames.end(),
                     [](const DataFrame& a, const DataFrame& b) { return a.source < b.source; });
    std::vector<Body> bodies;
    std::vector<bool> replied(nget, !replies_relayed);
    for (const auto& f : frames) {
        auto b = read_body(f.payload);
        if (!b)
            return b.error();
        for (const auto& g : b->replies) {
            if (g.index >= nget || replied[g.index]) // the hub's own, or a second one
                return Error::from_errno(
                    EPROTO, fmt::format("vp {} sent a reply to get {} of {} it was not asked for",
                                        f.source, g.index, nget));
            replied[g.index] = true;
            replies[g.index] = g.data;
        }
        bodies.push_back(std::move(*b));
    }
    if (std::find(replied.begin(), replied.end(), false) != replied.end())
        return Error::from_errno(EPROTO, "a relayed DELIVER lacks the reply to one of its gets");
    wire::Writer w;
    w.bytes(deliver.first(head));
    w.u32(nget);
    for (const auto& g : replies)
        w.blob(g);
    std::uint32_t nputs = 0, nmsgs = 0;
    for (const auto& b : bodies) {
        nputs += static_cast<std::uint32_t>(b.puts.size());
        nmsgs += static_cast<std::uint32_t>(b.msgs.size());
    }
    w.u32(nputs);
    for (std::size_t i = 0; i < bodies.size(); ++i)
        for (const auto& p : bodies[i].puts) {
            w.u32(frames[i].source);
            w.u64(p.reg);
            w.u64(p.off);
            w.blob(p.data);
        }
    w.u32(nmsgs);
    for (std::size_t i = 0; i < bodies.size(); ++i)
        for (const auto& m : bodies[i].msgs) {
            w.u32(frames[i].source);
            w.blob(m.tag);
            w.blob(m.payload);
        }
    auto d = w.data();
    return std::vector<std::byte>(d.begin(), d.end());
}

} // namespace ghost::bsp::relay
