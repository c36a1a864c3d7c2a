// SPDX-License-Identifier: GPL-2.0
// DATA frames: cut out of a SYNC, spliced into a DELIVER.
#include "data.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include <endian.h>

#include <fmt/format.h>

namespace ghost::bsp::relay {

namespace {

// The body of a DATA frame (after its head) read front to back.
struct Body {
    std::vector<PutRec> puts;
    std::vector<MsgRec> msgs;
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

Result<std::vector<std::byte>> splice_deliver(std::span<const std::byte> deliver,
                                              std::vector<DataFrame> frames, int nprocs) {
    // Skip to the puts section: superstep, tag size, pushes (each with
    // every VP's size), pops, get replies.
    wire::Reader r(deliver);
    (void)r.u64();
    (void)r.i64();
    const std::uint32_t npush = r.u32();
    for (std::uint32_t i = 0; i < npush && !r.failed(); ++i)
        (void)r.bytes(8 + 8 * static_cast<std::uint64_t>(nprocs));
    const std::uint32_t npop = r.u32();
    (void)r.bytes(8 * static_cast<std::uint64_t>(npop));
    const std::uint32_t nget = r.u32();
    for (std::uint32_t i = 0; i < nget && !r.failed(); ++i)
        (void)r.blob();
    // What remains must be the two empty sections: two u32 zeros.
    const std::size_t head = deliver.size() - std::min<std::size_t>(deliver.size(), 8);
    const std::uint32_t hub_puts = r.u32(), hub_msgs = r.u32();
    if (r.failed() || !r.at_end() || hub_puts != 0 || hub_msgs != 0)
        return Error::from_errno(EPROTO, "a relayed DELIVER must end with empty puts and "
                                         "messages sections");
    std::sort(frames.begin(), frames.end(),
              [](const DataFrame& a, const DataFrame& b) { return a.source < b.source; });
    std::vector<Body> bodies;
    for (const auto& f : frames) {
        auto b = read_body(f.payload);
        if (!b)
            return b.error();
        bodies.push_back(std::move(*b));
    }
    wire::Writer w;
    w.bytes(deliver.first(head));
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
