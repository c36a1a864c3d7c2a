// SPDX-License-Identifier: LGPL-2.1-or-later
// System calls queued by the user engine's restorer and run inside the
// process being rebuilt a table at a time: one ptrace stop for a whole
// table instead of one (or two) per call. Each costs a round trip between
// two processes, about 50 us natively and far more under emulation, and a
// restart makes one or two per mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ghost/result.hpp"
#include "user/tracee.hpp"

namespace ghost::user {

// The loop that runs a table, as machine code for the tracee (x86-64):
//   loop: mov rax, [r12]; mov rdi, [r12+8]; mov rsi, [r12+16];
//         mov rdx, [r12+24]; mov r10, [r12+32]; mov r8, [r12+40];
//         mov r9, [r12+48]; syscall; mov [r12+56], rax;
//         cmp rax, -4095; jae done; add r12, 64; cmp r12, r13; jne loop
//   done: int3
// with r12 the first entry and r13 the end of the table. It stops at the
// first call that fails (-4095..-1); each entry's result is in its slot.
std::span<const std::byte> call_loop_code();

// One table entry as the loop reads it: number, six arguments, result.
struct CallEntry {
    std::uint64_t nr = 0;
    std::uint64_t arg[6] = {};
    std::uint64_t result = 0;
};
static_assert(sizeof(CallEntry) == 64);

// The same loop without the test: every entry runs, whatever the ones
// before it returned (51 bytes).
std::span<const std::byte> call_each_code();

// Runs every entry of calls inside the tracee in one stop, and fills in each
// one's result (-errno when it failed): questions, whose answers the caller
// reads. call_each_code() is written at code, the table at table (writable
// memory of the tracee that no call writes). base: registers to run from.
Result<void> run_each(Tracee& t, const Regs& base, std::uint64_t code, std::uint64_t table,
                      std::span<CallEntry> calls);

class CallBatch {
  public:
    // The loop is at code in the tracee, and the table may use capacity
    // entries from table (writable memory of the tracee, not touched by
    // the calls). base: registers to run from (rip, r12 and r13 are set).
    CallBatch(Tracee& t, const Regs& base, std::uint64_t code, std::uint64_t table,
              std::size_t capacity);

    // Queues a call (what names it in an error); runs the queue first when
    // it is full. With expect, any other result fails too (mmap's address).
    Result<void> add(std::string what, long nr, std::uint64_t a1 = 0, std::uint64_t a2 = 0,
                     std::uint64_t a3 = 0, std::uint64_t a4 = 0, std::uint64_t a5 = 0,
                     std::uint64_t a6 = 0, std::optional<std::uint64_t> expect = std::nullopt);
    // Runs what is queued, in order; fails naming the first call that failed
    // (the calls after it did not run).
    Result<void> flush();

  private:
    struct Pending {
        std::string what;
        std::optional<std::uint64_t> expect;
    };
    Tracee& t_;
    Regs base_;
    std::uint64_t code_, table_;
    std::size_t capacity_;
    std::vector<CallEntry> entries_;
    std::vector<Pending> pending_;
};

} // namespace ghost::user
