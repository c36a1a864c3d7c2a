// SPDX-License-Identifier: GPL-2.0
// The state of the BSPlib runtime inside one virtual processor. All of it
// lives in the process's own memory, and the only descriptor it holds across
// supersteps is the socket to the hub, so a VP can be checkpointed and
// restarted elsewhere inside bsp_sync (Documentation/bsp.md).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "clock.hpp"
#include "counter.hpp"
#include "link.hpp"

namespace ghost::bsp::vp {

struct Reg {
    const void* addr = nullptr;
    std::vector<std::int64_t> sizes; // every VP's size of this registration
    bool live = true;
};

struct PutRec {
    std::uint32_t pid = 0;
    std::uint64_t reg = 0, off = 0, len = 0;
    std::vector<std::byte> copy; // bsp_put: copied at the call
    const void* hp = nullptr;    // bsp_hpput: read at the sync
};

struct GetRec {
    std::uint32_t pid = 0;
    std::uint64_t reg = 0, off = 0, len = 0;
    void* dst = nullptr;
};

struct Msg {
    const std::byte* tag = nullptr;
    std::size_t tag_len = 0;
    const std::byte* payload = nullptr;
    std::size_t len = 0;
};

struct State {
    enum class Phase { Before, Running, Ended } phase = Phase::Before;
    bool under_bsprun = false; // GHOST_BSP_* set: bsprun started us
    int pid = 0, nprocs = 1;
    std::string job;
    wire::Link sock; // the hub connection (the only descriptor held)
    // Another host's VP reaches the hub over TCP with TLS and the job key
    // (GHOST_BSP_HUB, GHOST_BSP_KEY: read once, the key then only here).
    std::string hub_tcp;
    // GHOST_BSP_HUBFILE: a file (in the job directory) holding the hub's
    // current ADDR:PORT; re-read at every reconnect, so a VP restored from
    // a checkpoint finds the hub of the bsprun that restarted it.
    std::string hub_file;
    std::optional<wire::Key> key;
    std::optional<wire::TlsContext> tls; // while connected over TCP
    std::vector<pid_t> children;         // forked mode, vp 0: the hub and vps 1..P-1

    void (*spmd)() = nullptr; // bsp_init's
    double t0 = 0;            // bsp_begin's monotonic time
    double last_wall = 0, last_cpu = 0;
    InstructionCounter instructions; // of the superstep's computation (counter.hpp)
    std::uint64_t bytes_sent = 0;
    std::uint64_t superstep = 0;
    std::uint64_t resident = 0; // resident bytes last read (sync.cpp: resident_bytes)

    // Registrations: by number (the k-th push of the job), and by address
    // (the numbers of its live registrations, most recent last).
    std::vector<Reg> regs;
    std::unordered_map<const void*, std::vector<std::uint64_t>> by_addr;
    std::uint64_t next_reg = 0;
    struct Op {
        std::uint8_t kind;
        std::uint64_t id;
        std::int64_t size;
    };
    std::vector<Op> ops;                                       // this superstep's pushes and pops
    std::vector<std::pair<std::uint64_t, const void*>> pushed; // id -> addr, pending

    std::int64_t tagsize = 0, new_tagsize = -1;

    std::vector<PutRec> puts;
    std::vector<GetRec> gets;
    wire::Writer sends;
    std::uint32_t nsends = 0;

    // The messages of the last superstep: they point into inbox.
    std::vector<std::byte> inbox;
    std::vector<Msg> queue;
    std::size_t head = 0;
};

State& state();

// Misuse or a lost hub: prints "ghost-bsp: vp N: call: message", tells the
// hub (which ends the job) and exits with status 1.
[[noreturn]] void die(const char* call, const std::string& message);
// Checks that bsp_begin ran and bsp_end did not.
void need_running(const char* call);
// The live registration whose address is addr, or die() naming call.
std::uint64_t lookup_reg(const char* call, const void* addr);
// Checks pid, offset and size against the target's registered size.
void check_range(const char* call, int pid, std::uint64_t reg, int offset, int nbytes);
double now_wall();
double now_cpu();
// Both clocks now (bsp_time across a move, clock.hpp).
Moment now_moment();

} // namespace ghost::bsp::vp
