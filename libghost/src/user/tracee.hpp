// SPDX-License-Identifier: LGPL-2.1-or-later
// A process held with ptrace by the user engine: seized and stopped, its
// registers and FPU state read and written, system calls run inside it, its
// memory read and written. Not installed; used by user_export and
// user_import.
#pragma once

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/user.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "ghost/fd.hpp"
#include "ghost/result.hpp"

namespace ghost::user {

using Regs = user_regs_struct;

// Whether a raw system call result is an error (-4095..-1).
inline bool is_err(long r) {
    return r < 0 && r > -4096;
}

// The stop of a system call's entry or exit (PTRACE_O_TRACESYSGOOD).
inline constexpr int kSyscallStop = SIGTRAP | 0x80;

// Whether sig stops a process: the tracer holds such a signal while it
// works and sends it again as it lets go.
inline bool is_stop_signal(int sig) {
    return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

// A registered rseq area (PTRACE_GET_RSEQ_CONFIGURATION).
struct RseqConfig {
    std::uint64_t addr = 0;
    std::uint32_t size = 0, sig = 0;
};

// regs of a task stopped inside a system call, turned into the state that
// runs that call again from user mode (ghost_policy_restart(), shared with
// ghost.ko): rax back to its number, rip on the syscall instruction.
// restart_block: keep an interrupted sleep's remaining time
// (restart_syscall(2)), which only the same task can use; otherwise the call
// itself is run again, a relative sleep for the time it wrote into its rem
// argument if it had one (ghost_policy_sleep_left()), else from its start.
Regs restarted(const Regs& r, bool restart_block);

class Tracee {
  public:
    // PTRACE_SEIZE then PTRACE_INTERRUPT; returns once pid is stopped.
    static Result<Tracee> seize(pid_t pid);
    Tracee(Tracee&& o) noexcept;
    Tracee& operator=(Tracee&&) = delete;
    Tracee(const Tracee&) = delete;
    ~Tracee(); // detaches (without restoring anything) if still attached;
               // a snapshot is killed instead: it must never run

    pid_t pid() const { return pid_; }

    Result<Regs> regs();
    Result<void> set_regs(const Regs& r);
    // The standard-format XSAVE area (NT_X86_XSTATE), as long as this
    // kernel makes it.
    Result<std::vector<std::byte>> xstate();
    Result<void> set_xstate(std::span<const std::byte> x);
    Result<std::uint64_t> signal_mask();
    Result<void> set_signal_mask(std::uint64_t mask);
    // Its rseq area, if it registered one (and the kernel tells, 5.13+).
    std::optional<RseqConfig> rseq_config();
    // Held inside a restartable sequence's critical section (rip in
    // [start_ip, start_ip + post_commit_offset) of the rseq_cs its area
    // names), the section is aborted as a preemption would abort it: r.rip
    // moves to the section's abort handler and the area's rseq_cs is
    // cleared. Without it, the first system call we run in it would have
    // the kernel clear rseq_cs (rip then outside the section) without the
    // abort, and put back, it would go on inside the section unprotected;
    // restored elsewhere, on another CPU. Call it on the registers read at
    // the seize, before any call: it sets the tracee's and r both. Returns
    // whether it aborted one.
    Result<bool> abort_rseq_section(Regs& r);
    // Kill the tracee if the tracer dies (after the point of no return).
    Result<void> kill_on_exit();

    // Where the syscall instruction for call() is; see find_syscall_insn().
    void use_syscall_insn(std::uint64_t addr) {
        insn_ = addr;
        trap_follows_ = false;
    }
    // The instruction call() uses now.
    std::uint64_t syscall_insn() const { return insn_; }
    // The same, where an int3 follows the instruction (code we placed):
    // call() then runs to the trap, one stop per call instead of two.
    void use_syscall_trap(std::uint64_t addr) {
        insn_ = addr;
        trap_follows_ = true;
    }
    // A syscall instruction the tracee can run: just behind rip when it is
    // stopped in a system call, else one inside its vDSO.
    Result<std::uint64_t> find_syscall_insn(const Regs& now);
    // Runs system call nr inside the tracee (its registers are clobbered:
    // the caller saved them) and returns its raw result (-errno on error).
    Result<long> call(long nr, std::uint64_t a1 = 0, std::uint64_t a2 = 0, std::uint64_t a3 = 0,
                      std::uint64_t a4 = 0, std::uint64_t a5 = 0, std::uint64_t a6 = 0);
    // Runs code already in the tracee from r.rip (its other registers as
    // given) until it executes an int3, and returns the registers then
    // (rip just after the int3): one stop for a whole loop of system calls.
    // Stop signals are held for later as in call(); a fault fails.
    // what names it in an error ("code", "a system call").
    Result<Regs> run_to_trap(const Regs& r, const char* what = "code");
    // The last call: runs nr, then on its way out sets the final registers
    // and signal mask and detaches: the tracee goes on with them. (The mask
    // is set last so that no signal is delivered while we still steer.)
    // With sig (SIGSTOP), it is sent sig just before the detach.
    Result<void> call_and_release(const Regs& final, std::uint64_t mask, int sig, long nr,
                                  std::uint64_t a1 = 0, std::uint64_t a2 = 0);
    // Lets it go; with sig, sends it sig first (SIGSTOP, SIGKILL).
    Result<void> detach(int sig = 0);

    // Whether it was stopped by a stop signal (group-stop) when seized.
    bool group_stopped() const { return group_stopped_; }
    // Lets the held tracee run on until done() says so, stopping it at each
    // system call it enters, then holds it again as seize() does (an
    // interrupted call is restarted when it goes on). Returns whether it
    // entered any call that allowed() refuses. A stop signal meanwhile is
    // held for later, any other delivered. While it runs no stop lasts
    // longer than a poll (50 us) beyond the tracer's own work.
    // (user/tracee_gate.cpp)
    Result<bool> run_watched(const std::function<bool()>& done, bool (*allowed)(long nr));

    // Forks the tracee inside it and returns the child, held by us from
    // before its first instruction: a copy-on-write snapshot of the
    // tracee's memory that can be read while the tracee runs on. The clone
    // has exit signal 0, so the tracee gets no SIGCHLD and a plain wait()
    // in it does not see the child; its registers are clobbered as by
    // call(). The child must be ended with kill_and_wait(), and then reaped
    // in the tracee (wait4 with __WALL), whose zombie it otherwise stays.
    Result<Tracee> fork_snapshot();
    // Names this tracee (a snapshot) kSnapshotComm, so that if its exporter
    // dies, the next export of its parent can tell it from the parent's own
    // children and reap it (reap_leftover_snapshots()). Run in it, in a
    // page of its own mapped for the call and unmapped again: nothing of
    // the memory it shows changes. Made after the parent is let go.
    Result<void> name_snapshot();
    // Kills this tracee (a snapshot) and waits, as its tracer, until it is
    // gone; its own parent still has to reap it.
    void kill_and_wait();

    // Memory: read and write through process_vm_readv/writev, falling back
    // to /proc/PID/mem (which ignores protections) where those fail.
    Result<void> read(std::uint64_t addr, std::span<std::byte> out);
    Result<void> write(std::uint64_t addr, std::span<const std::byte> in);
    Result<void> read_mem(std::uint64_t addr, std::span<std::byte> out); // /proc/PID/mem

    // The identity of the process's vDSO, as ghost_mm records it: the size
    // of its [vdso] mapping and the crc32c of those bytes ({0, 0} if none).
    struct VdsoId {
        std::uint32_t size = 0;
        std::uint32_t crc32c = 0;
    };
    Result<VdsoId> vdso_id();

  private:
    explicit Tracee(pid_t pid) : pid_(pid) {}
    // The [vdso] mapping's start and bytes (empty if it has none).
    struct Vdso {
        std::uint64_t start = 0;
        std::vector<std::byte> bytes;
    };
    Result<Vdso> read_vdso();
    Result<int> wait_stop();
    Result<int> mem_fd();
    // Resumes with request (PTRACE_SYSCALL, PTRACE_CONT) until a stop with
    // signal want (kSyscallStop, SIGTRAP), holding stop signals for later
    // and failing on a fault; what ("a system call", "code") names it.
    Result<void> resume_until(__ptrace_request request, int want, const char* what);
    Error died(const char* what);

    pid_t pid_ = -1;
    bool attached_ = false;
    std::uint64_t insn_ = 0;
    bool trap_follows_ = false;
    int held_stop_ = 0;          // a SIGSTOP that arrived while we worked: resent at detach
    bool group_stopped_ = false; // seized in a group-stop
    bool snapshot_ = false;      // made by fork_snapshot(): killed, never let go
    Regs scratch_{};             // register template for call()
    bool have_template_ = false;
    pid_t cloned_ = 0; // the child of the last PTRACE_EVENT_CLONE stop
    UniqueFd mem_;
};

// Holds pid for a moment to run calls(t) in it (its syscall instruction
// set up, every signal blocked), then puts its registers and signal mask
// back and lets it go. An error is the first of calls(t) and the put back.
Result<void> with_held(pid_t pid, const std::function<Result<void>(Tracee&)>& calls);

// The snapshot child of a --leave-running export is the target's child: once
// it is gone, the target reaps its zombie with a wait4 run inside it (held
// for that one call). If the target exited meanwhile, init reaps it.
void reap_snapshot(pid_t parent, pid_t child);

// Reaps the snapshots an exporter left behind in pid (leftover_snapshots()),
// holding it for a moment if it has any; returns how many. Every export
// does this first, and a daemon that recovers from a crash for the
// processes it was exporting. A process we may not hold keeps them.
Result<int> reap_leftover_snapshots(pid_t pid);

// Ends a snapshot (kills it, then has the target reap it) on every path.
class SnapshotGuard {
  public:
    SnapshotGuard(pid_t parent, std::optional<Tracee>& snap) : parent_(parent), snap_(snap) {}
    SnapshotGuard(const SnapshotGuard&) = delete;
    SnapshotGuard& operator=(const SnapshotGuard&) = delete;
    ~SnapshotGuard();

  private:
    pid_t parent_;
    std::optional<Tracee>& snap_;
};

} // namespace ghost::user
