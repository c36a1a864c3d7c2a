// SPDX-License-Identifier: GPL-2.0
// Direct remote memory access: registrations, puts and gets. Every check is
// made at the call, against the target's registered size (each VP knows
// every VP's size of every registration since the sync that made it).
#include <cstring>

#include <fmt/format.h>

#include "bsp.h"
#include "state.hpp"

namespace ghost::bsp::vp {

namespace {

bool popped_now(const State& s, std::uint64_t id) {
    for (const auto& op : s.ops)
        if (op.kind == 2 && op.id == id)
            return true;
    return false;
}

} // namespace

std::uint64_t lookup_reg(const char* call, const void* addr) {
    State& s = state();
    auto it = s.by_addr.find(addr);
    if (it != s.by_addr.end())
        for (auto id = it->second.rbegin(); id != it->second.rend(); ++id)
            if (std::strcmp(call, "bsp_pop_reg") != 0 || !popped_now(s, *id))
                return *id;
    for (const auto& p : s.pushed)
        if (p.second == addr)
            die(call, fmt::format("address {} is registered only from the next bsp_sync on "
                                  "(bsp_push_reg takes effect at the sync)",
                                  addr));
    die(call,
        fmt::format("address {} is not registered (bsp_push_reg it, and bsp_sync, first)", addr));
}

void check_range(const char* call, int pid, std::uint64_t reg, int offset, int nbytes) {
    const State& s = state();
    if (pid < 0 || pid >= s.nprocs)
        die(call, fmt::format("pid {} is out of range (0..{})", pid, s.nprocs - 1));
    if (offset < 0)
        die(call, fmt::format("offset {} is negative", offset));
    if (nbytes < 0)
        die(call, fmt::format("size {} is negative", nbytes));
    const std::int64_t size = s.regs[reg].sizes[static_cast<std::size_t>(pid)];
    if (static_cast<std::int64_t>(offset) + nbytes > size)
        die(call, fmt::format("offset {} + {} bytes is past the end of the area registered on "
                              "pid {} ({} bytes, registration #{})",
                              offset, nbytes, pid, size, reg));
}

} // namespace ghost::bsp::vp

using namespace ghost::bsp::vp;

namespace {

void check_pid(const char* call, int pid) {
    const State& s = state();
    if (pid < 0 || pid >= s.nprocs)
        die(call, fmt::format("pid {} is out of range (0..{})", pid, s.nprocs - 1));
}

void put(const char* call, int pid, const void* src, void* dst, int offset, int nbytes, bool hp) {
    State& s = state();
    need_running(call);
    check_pid(call, pid);
    const std::uint64_t reg = lookup_reg(call, dst);
    check_range(call, pid, reg, offset, nbytes);
    if (nbytes == 0)
        return;
    PutRec p;
    p.pid = static_cast<std::uint32_t>(pid);
    p.reg = reg;
    p.off = static_cast<std::uint64_t>(offset);
    p.len = static_cast<std::uint64_t>(nbytes);
    if (hp) {
        p.hp = src;
    } else {
        const auto* b = static_cast<const std::byte*>(src);
        p.copy.assign(b, b + nbytes);
    }
    s.puts.push_back(std::move(p));
    s.bytes_sent += static_cast<std::uint64_t>(nbytes);
}

void get(const char* call, int pid, const void* src, int offset, void* dst, int nbytes) {
    State& s = state();
    need_running(call);
    check_pid(call, pid);
    const std::uint64_t reg = lookup_reg(call, src);
    check_range(call, pid, reg, offset, nbytes);
    if (nbytes == 0)
        return;
    s.gets.push_back({static_cast<std::uint32_t>(pid), reg, static_cast<std::uint64_t>(offset),
                      static_cast<std::uint64_t>(nbytes), dst});
}

} // namespace

extern "C" {

void bsp_push_reg(const void* ident, int size) {
    State& s = state();
    need_running("bsp_push_reg");
    if (size < 0)
        die("bsp_push_reg", fmt::format("size {} is negative", size));
    const std::uint64_t id = s.next_reg++;
    s.regs.push_back({ident, {}, false});
    s.pushed.emplace_back(id, ident);
    s.ops.push_back({1, id, size});
}

void bsp_pop_reg(const void* ident) {
    State& s = state();
    need_running("bsp_pop_reg");
    const std::uint64_t id = lookup_reg("bsp_pop_reg", ident);
    s.ops.push_back({2, id, 0});
}

void bsp_put(int pid, const void* src, void* dst, int offset, int nbytes) {
    put("bsp_put", pid, src, dst, offset, nbytes, false);
}

void bsp_hpput(int pid, const void* src, void* dst, int offset, int nbytes) {
    put("bsp_hpput", pid, src, dst, offset, nbytes, true);
}

void bsp_get(int pid, const void* src, int offset, void* dst, int nbytes) {
    get("bsp_get", pid, src, offset, dst, nbytes);
}

void bsp_hpget(int pid, const void* src, int offset, void* dst, int nbytes) {
    get("bsp_hpget", pid, src, offset, dst, nbytes);
}

} // extern "C"
