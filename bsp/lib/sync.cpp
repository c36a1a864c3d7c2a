// SPDX-License-Identifier: GPL-2.0
// bsp_sync: the SYNC frame, the GETS round, DETACH (close the socket, wait
// for SIGUSR2 in sigsuspend, reconnect) and applying DELIVER.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "bsp.h"
#include "state.hpp"
#include "sync.hpp"
#include "sync_vp.hpp"
#include "wakeup.hpp"

namespace ghost::bsp::vp {

namespace {

void detach_and_wait() {
    State& s = state();
    const Moment before = now_moment();
    wire::wait_for_wakeup([&s] {
        std::fflush(nullptr);
        (void)wire::send_frame(s.sock, wire::Type::Detached);
        disconnect_hub(); // no socket, no TLS state across the move
    });
    // Maybe on another machine now, with a monotonic clock of its own.
    s.t0 = continued_t0(s.t0, before, now_moment());
    connect_hub(true);
}

// The bytes [off, off + len) of this VP's registration reg, or it dies: a
// hub only asks for what the other VPs checked against the sizes (drma.cpp),
// and none may reach past the area.
static const std::byte* own_area(const State& s, std::uint64_t reg, std::uint64_t off,
                                 std::uint64_t len) {
    if (reg >= s.regs.size())
        die("bsp_sync", fmt::format("the hub named registration #{}, unknown here", reg));
    const auto& sizes = s.regs[reg].sizes;
    const auto me = static_cast<std::size_t>(s.pid);
    const std::uint64_t size =
        me < sizes.size() && sizes[me] > 0 ? static_cast<std::uint64_t>(sizes[me]) : 0;
    if (off > size || len > size - off)
        die("bsp_sync", fmt::format("the hub named bytes {}..{} of registration #{}, which has {}",
                                    off, off + len, reg, size));
    return static_cast<const std::byte*>(s.regs[reg].addr) + off;
}

void answer_gets(const wire::Frame& f) {
    State& s = state();
    wire::Reader r(f.payload);
    const std::uint32_t n = r.u32();
    wire::Writer w;
    for (std::uint32_t i = 0; i < n && !r.failed(); ++i) {
        const std::uint64_t reg = r.u64(), off = r.u64(), len = r.u64();
        if (r.failed())
            break;
        w.bytes({own_area(s, reg, off, len), len});
    }
    if (r.failed())
        die("bsp_sync", "malformed GETS frame from the hub");
    if (auto e = wire::send_frame(s.sock, wire::Type::GetData, w.data()); !e)
        die("bsp_sync", fmt::format("lost the hub: {}", e.error().what()));
}

void apply_deliver(wire::Frame&& f) {
    State& s = state();
    s.inbox = std::move(f.payload);
    wire::Reader r(s.inbox);
    s.superstep = r.u64();
    s.tagsize = r.i64();
    s.new_tagsize = -1;
    const std::uint32_t npush = r.u32();
    for (std::uint32_t i = 0; i < npush && !r.failed(); ++i) {
        const std::uint64_t id = r.u64();
        if (id >= s.regs.size())
            die("bsp_sync", fmt::format("the hub named registration #{}, unknown here", id));
        Reg& reg = s.regs[id];
        reg.sizes.resize(static_cast<std::size_t>(s.nprocs));
        for (auto& sz : reg.sizes)
            sz = r.i64();
        reg.live = true;
        s.by_addr[reg.addr].push_back(id);
    }
    const std::uint32_t npop = r.u32();
    std::vector<std::uint64_t> pops;
    for (std::uint32_t i = 0; i < npop && !r.failed(); ++i)
        pops.push_back(r.u64());
    const std::uint32_t nget = r.u32();
    if (nget != s.gets.size())
        die("bsp_sync", "the hub answered a different number of gets");
    for (std::uint32_t i = 0; i < nget && !r.failed(); ++i) {
        auto d = r.blob();
        if (d.size() == s.gets[i].len)
            std::memcpy(s.gets[i].dst, d.data(), d.size());
    }
    const std::uint32_t nput = r.u32();
    for (std::uint32_t i = 0; i < nput && !r.failed(); ++i) {
        (void)r.u32(); // source
        const std::uint64_t reg = r.u64(), off = r.u64();
        auto d = r.blob();
        if (!r.failed() && reg < s.regs.size())
            std::memcpy(const_cast<std::byte*>(own_area(s, reg, off, d.size())), d.data(),
                        d.size());
    }
    // Pops after the puts: a put to an area popped in the same superstep
    // still lands (the pop takes effect at the end of the sync).
    for (std::uint64_t id : pops) {
        if (id >= s.regs.size())
            continue;
        s.regs[id].live = false;
        auto& v = s.by_addr[s.regs[id].addr];
        std::erase(v, id);
        if (v.empty())
            s.by_addr.erase(s.regs[id].addr);
    }
    s.queue.clear();
    s.head = 0;
    const std::uint32_t nmsg = r.u32();
    for (std::uint32_t i = 0; i < nmsg && !r.failed(); ++i) {
        (void)r.u32(); // source
        auto tag = r.blob();
        auto payload = r.blob();
        s.queue.push_back({tag.data(), tag.size(), payload.data(), payload.size()});
    }
    if (r.failed() || !r.at_end())
        die("bsp_sync", "malformed DELIVER frame from the hub");
    s.gets.clear();
    s.ops.clear();
    s.pushed.clear();
}

// The resident size in bytes (/proc/self/statm's second field times the page
// size), 0 when it cannot be read. The file is closed before returning: a VP
// holds nothing a migration cannot carry across bsp_sync.
std::uint64_t read_resident_bytes() {
    std::FILE* f = std::fopen("/proc/self/statm", "re");
    if (!f)
        return 0;
    unsigned long long size = 0, resident = 0;
    const int n = std::fscanf(f, "%llu %llu", &size, &resident);
    std::fclose(f);
    if (n != 2)
        return 0;
    return static_cast<std::uint64_t>(resident) *
           static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

// The resident size sent with this superstep's SYNC: read at the first
// superstep and every kResidentEvery-th, and the last value sent between.
// Opening, parsing and closing /proc/self/statm takes about 6.5 us here,
// more than a short superstep can spare at every barrier; the size is
// only the policies' estimate of a migration's image, which changes slowly.
constexpr std::uint64_t kResidentEvery = 16;

std::uint64_t resident_bytes(State& s) {
    if (s.superstep % kResidentEvery == 0 || s.resident == 0)
        s.resident = read_resident_bytes();
    return s.resident;
}

// The SYNC payload of this superstep (encode_sync: the hub's own layout).
// Puts point at their copies, or for bsp_hpput at the source, read now.
std::vector<std::byte> sync_payload(double wall, double cpu, const InstructionCounter::Count& n) {
    State& s = state();
    SyncRequest req;
    req.wall = wall;
    req.cpu = cpu;
    req.bytes_sent = s.bytes_sent;
    req.memory_bytes = resident_bytes(s);
    req.instructions = n.instructions;
    req.instructions_errno = n.error;
    req.superstep = s.superstep;
    req.tagsize = s.new_tagsize;
    for (const auto& op : s.ops)
        req.ops.push_back({op.kind, op.id, op.size});
    for (const auto& p : s.puts)
        req.puts.push_back({p.pid, p.reg, p.off,
                            p.hp ? std::span(static_cast<const std::byte*>(p.hp), p.len)
                                 : std::span<const std::byte>(p.copy)});
    for (const auto& g : s.gets)
        req.gets.push_back({g.pid, g.reg, g.off, g.len});
    wire::Reader r(s.sends.data()); // bsp_send's: u32 destination, blob tag, blob payload
    for (std::uint32_t i = 0; i < s.nsends; ++i) {
        ghost::bsp::MsgRec m;
        m.pid = r.u32();
        m.tag = r.blob();
        m.payload = r.blob();
        req.msgs.push_back(m);
    }
    return encode_sync(req);
}

} // namespace

} // namespace ghost::bsp::vp

using namespace ghost::bsp;
using namespace ghost::bsp::vp;

extern "C" void bsp_sync(void) {
    State& s = state();
    need_running("bsp_sync");
    const double wall = now_wall(), cpu = now_cpu();
    // Closed before anything else: this sync may migrate or checkpoint us.
    const InstructionCounter::Count counted = s.instructions.stop();
    const auto payload = sync_payload(wall - s.last_wall, cpu - s.last_cpu, counted);
    s.puts.clear();
    s.sends.clear();
    s.nsends = 0;
    if (payload.size() > wire::kMaxPayload)
        die("bsp_sync", fmt::format("this superstep's puts and sends come to {} bytes, above the "
                                    "{} a superstep may carry from one VP: split them over more "
                                    "supersteps",
                                    payload.size(), wire::kMaxPayload));
    if (auto r = wire::send_frame(s.sock, wire::Type::Sync, payload); !r)
        die("bsp_sync", fmt::format("lost the hub (the job was aborted?): {}", r.error().what()));
    for (;;) {
        auto f = wire::recv_frame(s.sock);
        if (!f)
            die("bsp_sync",
                fmt::format("lost the hub (the job was aborted?): {}", f.error().what()));
        if (f->type == wire::Type::Gets) {
            answer_gets(*f);
        } else if (f->type == wire::Type::Detach) {
            // A checkpoint's DETACH (u32 1): this superstep's DELIVER
            // follows at once; apply it, then detach. After the wake-up no
            // DELIVER is owed: bsp_sync is done.
            wire::Reader r(f->payload);
            const bool deliver_first = !f->payload.empty() && r.u32() == 1;
            if (!deliver_first) {
                detach_and_wait();
                continue;
            }
            auto d = wire::recv_frame(s.sock);
            if (!d || d->type != wire::Type::Deliver)
                die("bsp_sync", "the hub's checkpoint DETACH was not followed by DELIVER");
            apply_deliver(std::move(*d));
            detach_and_wait();
            break;
        } else if (f->type == wire::Type::Deliver) {
            apply_deliver(std::move(*f));
            break;
        } else {
            die("bsp_sync",
                fmt::format("unexpected {} frame from the hub", wire::type_name(f->type)));
        }
    }
    s.bytes_sent = 0;
    s.last_wall = now_wall();
    s.last_cpu = now_cpu();
    s.instructions.start();
}
