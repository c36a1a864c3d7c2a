// SPDX-License-Identifier: GPL-2.0
// bsp_sync: the SYNC frame, the GETS round, DETACH (close the socket, wait
// for SIGUSR2 in sigsuspend, reconnect) and applying DELIVER.
#include <setjmp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "bsp.h"
#include "state.hpp"
#include "sync_vp.hpp"

namespace ghost::bsp::vp {

namespace {

sigjmp_buf g_wake;
volatile sig_atomic_t g_armed = 0;

// Jumps out of the wait, wherever the process is: in sigsuspend, or (in a
// restarted copy) on the instruction that re-enters it, so the wake-up is
// never lost.
void on_wakeup(int) {
    if (g_armed) {
        g_armed = 0;
        siglongjmp(g_wake, 1);
    }
}

void detach_and_wait() {
    State& s = state();
    // Set before sigsetjmp and never changed after: valid after the jump.
    const Moment before = now_moment();
    sigset_t usr2, old;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    sigprocmask(SIG_BLOCK, &usr2, &old);
    // sigsetjmp saves the mask with SIGUSR2 blocked; siglongjmp restores it.
    if (sigsetjmp(g_wake, 1) == 0) {
        g_armed = 1;
        std::fflush(nullptr);
        (void)wire::send_frame(s.sock, wire::Type::Detached);
        disconnect_hub(); // no socket, no TLS state across the move
        sigset_t wait = old;
        sigdelset(&wait, SIGUSR2);
        for (;;)
            sigsuspend(&wait);
    }
    sigprocmask(SIG_SETMASK, &old, nullptr);
    // Maybe on another machine now, with a monotonic clock of its own.
    s.t0 = continued_t0(s.t0, before, now_moment());
    connect_hub(true);
}

void answer_gets(const wire::Frame& f) {
    State& s = state();
    wire::Reader r(f.payload);
    const std::uint32_t n = r.u32();
    wire::Writer w;
    for (std::uint32_t i = 0; i < n && !r.failed(); ++i) {
        const std::uint64_t reg = r.u64(), off = r.u64(), len = r.u64();
        if (reg >= s.regs.size())
            die("bsp_sync", fmt::format("the hub asked for registration #{}, unknown here", reg));
        const auto* base = static_cast<const std::byte*>(s.regs[reg].addr);
        w.bytes({base + off, len});
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
        if (reg < s.regs.size())
            std::memcpy(static_cast<std::byte*>(const_cast<void*>(s.regs[reg].addr)) + off,
                        d.data(), d.size());
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
std::uint64_t resident_bytes() {
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

} // namespace

void install_wakeup_handler() {
    struct sigaction sa {};
    sa.sa_handler = on_wakeup;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; // not SA_RESTART: the handler never returns while armed
    sigaction(SIGUSR2, &sa, nullptr);
}

} // namespace ghost::bsp::vp

using namespace ghost::bsp;
using namespace ghost::bsp::vp;

extern "C" void bsp_sync(void) {
    State& s = state();
    need_running("bsp_sync");
    const double wall = now_wall(), cpu = now_cpu();
    // Closed before anything else: this sync may migrate or checkpoint us.
    const InstructionCounter::Count counted = s.instructions.stop();
    wire::Writer w;
    w.f64(wall - s.last_wall);
    w.f64(cpu - s.last_cpu);
    w.u64(s.bytes_sent);
    w.u64(resident_bytes());
    w.u64(counted.instructions);
    w.i64(counted.error);
    w.u64(s.superstep);
    w.i64(s.new_tagsize);
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
        if (p.hp) // bsp_hpput: its source is read now
            w.blob({static_cast<const std::byte*>(p.hp), p.len});
        else
            w.blob(p.copy);
    }
    w.u32(static_cast<std::uint32_t>(s.gets.size()));
    for (const auto& g : s.gets) {
        w.u32(g.pid);
        w.u64(g.reg);
        w.u64(g.off);
        w.u64(g.len);
    }
    w.u32(s.nsends);
    w.bytes(s.sends.data());
    w.u32(0); // relayed counts: a relay fills them in
    s.puts.clear();
    s.sends.clear();
    s.nsends = 0;
    if (auto r = wire::send_frame(s.sock, wire::Type::Sync, w.data()); !r)
        die("bsp_sync", fmt::format("lost the hub (the job was aborted?): {}", r.error().what()));
    w.clear();
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
