// SPDX-License-Identifier: GPL-2.0
// The barrier's data: decoding SYNC, the collective checks, GETS and DELIVER.
#include "sync.hpp"

#include <cerrno>

#include <fmt/format.h>

namespace ghost::bsp {

Result<SyncRequest> decode_sync(std::vector<std::byte> payload, int nprocs) {
    SyncRequest s;
    s.storage = std::move(payload);
    wire::Reader r(s.storage);
    s.wall = r.f64();
    s.cpu = r.f64();
    s.bytes_sent = r.u64();
    s.memory_bytes = r.u64();
    s.instructions = r.u64();
    s.instructions_errno = static_cast<int>(r.i64());
    s.superstep = r.u64();
    s.tagsize = r.i64();
    const std::uint32_t nops = r.u32();
    for (std::uint32_t i = 0; i < nops && !r.failed(); ++i) {
        RegOp op;
        op.kind = r.u8();
        op.id = r.u64();
        op.size = r.i64();
        s.ops.push_back(op);
    }
    const std::uint32_t nputs = r.u32();
    for (std::uint32_t i = 0; i < nputs && !r.failed(); ++i) {
        PutRec p;
        p.pid = r.u32();
        p.reg = r.u64();
        p.off = r.u64();
        p.data = r.blob();
        s.puts.push_back(p);
    }
    const std::uint32_t ngets = r.u32();
    for (std::uint32_t i = 0; i < ngets && !r.failed(); ++i) {
        GetRec g;
        g.pid = r.u32();
        g.reg = r.u64();
        g.off = r.u64();
        g.len = r.u64();
        s.gets.push_back(g);
    }
    const std::uint32_t nmsgs = r.u32();
    for (std::uint32_t i = 0; i < nmsgs && !r.failed(); ++i) {
        MsgRec m;
        m.pid = r.u32();
        m.tag = r.blob();
        m.payload = r.blob();
        s.msgs.push_back(m);
    }
    const std::uint32_t nrel = r.u32();
    for (std::uint32_t i = 0; i < nrel && !r.failed(); ++i) {
        RelayedRec x;
        x.pid = r.u32();
        x.frames = r.u32();
        x.bytes = r.u64();
        s.relayed.push_back(x);
    }
    if (r.failed() || !r.at_end())
        return Error::from_errno(EPROTO, "malformed SYNC frame");
    const auto bad = [&](std::uint32_t pid) { return pid >= static_cast<std::uint32_t>(nprocs); };
    for (const auto& p : s.puts)
        if (bad(p.pid))
            return Error::from_errno(EPROTO,
                                     fmt::format("SYNC: put to pid {} of {}", p.pid, nprocs));
    for (const auto& g : s.gets)
        if (bad(g.pid))
            return Error::from_errno(EPROTO,
                                     fmt::format("SYNC: get from pid {} of {}", g.pid, nprocs));
    for (const auto& m : s.msgs)
        if (bad(m.pid))
            return Error::from_errno(EPROTO,
                                     fmt::format("SYNC: send to pid {} of {}", m.pid, nprocs));
    for (const auto& x : s.relayed)
        if (bad(x.pid))
            return Error::from_errno(
                EPROTO, fmt::format("SYNC: relayed data to pid {} of {}", x.pid, nprocs));
    return s;
}

std::vector<std::byte> encode_sync(const SyncRequest& s) {
    wire::Writer w;
    w.f64(s.wall);
    w.f64(s.cpu);
    w.u64(s.bytes_sent);
    w.u64(s.memory_bytes);
    w.u64(s.instructions);
    w.i64(s.instructions_errno);
    w.u64(s.superstep);
    w.i64(s.tagsize);
    w.u32(static_cast<std::uint32_t>(s.ops.size()));
    for (const auto& op : s.ops) {
        w.u8(op.kind);
        w.u64(op.id);
        w.i64(op.size);
    }
    w.u32(static_cast<std::uint32_t>(s.puts.size()));
    for (const auto& p : s.puts) {
        w.u32(p.pid);
        w.u64(p.reg);
        w.u64(p.off);
        w.blob(p.data);
    }
    w.u32(static_cast<std::uint32_t>(s.gets.size()));
    for (const auto& g : s.gets) {
        w.u32(g.pid);
        w.u64(g.reg);
        w.u64(g.off);
        w.u64(g.len);
    }
    w.u32(static_cast<std::uint32_t>(s.msgs.size()));
    for (const auto& m : s.msgs) {
        w.u32(m.pid);
        w.blob(m.tag);
        w.blob(m.payload);
    }
    w.u32(static_cast<std::uint32_t>(s.relayed.size()));
    for (const auto& x : s.relayed) {
        w.u32(x.pid);
        w.u32(x.frames);
        w.u64(x.bytes);
    }
    auto d = w.data();
    return {d.begin(), d.end()};
}

namespace {

std::string describe(const RegOp& op) {
    return op.kind == kPush ? fmt::format("bsp_push_reg (registration #{})", op.id)
                            : fmt::format("bsp_pop_reg (registration #{})", op.id);
}

} // namespace

std::string check_collectives(std::span<const SyncRequest> syncs, std::uint64_t superstep,
                              std::int64_t* tagsize) {
    const SyncRequest& first = syncs[0];
    for (std::size_t v = 1; v < syncs.size(); ++v) {
        const SyncRequest& s = syncs[v];
        if (s.tagsize != first.tagsize) {
            const auto said = [](std::int64_t t) {
                return t < 0 ? std::string("did not call it")
                             : fmt::format("asked for {} bytes", t);
            };
            return fmt::format("bsp_set_tagsize is collective, but in superstep {} vp 0 {} and "
                               "vp {} {}",
                               superstep, said(first.tagsize), v, said(s.tagsize));
        }
        const std::size_t n = std::min(first.ops.size(), s.ops.size());
        for (std::size_t i = 0; i < n; ++i)
            if (first.ops[i].kind != s.ops[i].kind || first.ops[i].id != s.ops[i].id)
                return fmt::format("registration order differs between processes in superstep "
                                   "{}: operation {} was {} on vp 0 but {} on vp {} (bsp_push_reg "
                                   "and bsp_pop_reg are collective: every process must call them "
                                   "in the same order)",
                                   superstep, i + 1, describe(first.ops[i]), describe(s.ops[i]), v);
        if (first.ops.size() != s.ops.size())
            return fmt::format("registration order differs between processes in superstep {}: vp "
                               "0 did {} bsp_push_reg/bsp_pop_reg calls and vp {} did {} (they are "
                               "collective)",
                               superstep, first.ops.size(), v, s.ops.size());
    }
    if (first.tagsize >= 0)
        *tagsize = first.tagsize;
    return {};
}

std::vector<std::byte> gets_for(int target, std::span<const SyncRequest> syncs) {
    wire::Writer w;
    w.u32(0);
    std::uint32_t n = 0;
    for (const auto& s : syncs)
        for (const auto& g : s.gets)
            if (g.pid == static_cast<std::uint32_t>(target)) {
                w.u64(g.reg);
                w.u64(g.off);
                w.u64(g.len);
                ++n;
            }
    w.patch_u32(0, n);
    auto d = w.data();
    return {d.begin(), d.end()};
}

Result<void> split_getdata(int target, std::span<const std::byte> data,
                           std::span<const SyncRequest> syncs,
                           std::vector<std::vector<std::span<const std::byte>>>& per_get) {
    std::size_t pos = 0;
    for (std::size_t r = 0; r < syncs.size(); ++r)
        for (std::size_t i = 0; i < syncs[r].gets.size(); ++i) {
            const GetRec& g = syncs[r].gets[i];
            if (g.pid != static_cast<std::uint32_t>(target))
                continue;
            if (g.len > data.size() - pos)
                return Error::from_errno(EPROTO,
                                         fmt::format("GETDATA of vp {} is too short", target));
            per_get[r][i] = data.subspan(pos, g.len);
            pos += g.len;
        }
    if (pos != data.size())
        return Error::from_errno(EPROTO, fmt::format("GETDATA of vp {} is too long", target));
    return {};
}

std::vector<std::byte> build_deliver(int v, std::uint64_t superstep, std::int64_t tagsize,
                                     std::span<const SyncRequest> syncs,
                                     std::span<const std::span<const std::byte>> get_replies) {
    wire::Writer w;
    w.u64(superstep);
    w.i64(tagsize);
    // Registrations: the pushes with every VP's size, then the pops.
    const SyncRequest& first = syncs[0];
    std::uint32_t npush = 0, npop = 0;
    for (const auto& op : first.ops)
        (op.kind == kPush ? npush : npop)++;
    w.u32(npush);
    for (std::size_t i = 0; i < first.ops.size(); ++i) {
        if (first.ops[i].kind != kPush)
            continue;
        w.u64(first.ops[i].id);
        for (const auto& s : syncs)
            w.i64(s.ops[i].size);
    }
    w.u32(npop);
    for (const auto& op : first.ops)
        if (op.kind == kPop)
            w.u64(op.id);
    // Get replies, in the VP's call order.
    w.u32(static_cast<std::uint32_t>(get_replies.size()));
    for (const auto& g : get_replies)
        w.blob(g);
    // Puts to v: by source VP, then call order.
    const auto me = static_cast<std::uint32_t>(v);
    const std::size_t at_puts = w.size();
    w.u32(0);
    std::uint32_t nputs = 0;
    for (std::size_t src = 0; src < syncs.size(); ++src)
        for (const auto& p : syncs[src].puts)
            if (p.pid == me) {
                w.u32(static_cast<std::uint32_t>(src));
                w.u64(p.reg);
                w.u64(p.off);
                w.blob(p.data);
                ++nputs;
            }
    w.patch_u32(at_puts, nputs);
    // Messages to v: by source VP, then send order.
    const std::size_t at_msgs = w.size();
    w.u32(0);
    std::uint32_t nmsgs = 0;
    for (std::size_t src = 0; src < syncs.size(); ++src)
        for (const auto& m : syncs[src].msgs)
            if (m.pid == me) {
                w.u32(static_cast<std::uint32_t>(src));
                w.blob(m.tag);
                w.blob(m.payload);
                ++nmsgs;
            }
    w.patch_u32(at_msgs, nmsgs);
    auto d = w.data();
    return {d.begin(), d.end()};
}

} // namespace ghost::bsp
