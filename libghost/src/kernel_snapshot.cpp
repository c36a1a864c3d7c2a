// SPDX-License-Identifier: LGPL-2.1-or-later
#include "kernel_snapshot.hpp"

#include <sys/ioctl.h>

#include <cerrno>
#include <chrono>

#include <fmt/format.h>
#include <linux/ghost.h>

#include "ghost/c/export_target.h"
#include "user/attrs.hpp"
#include "user/tracee.hpp"
#include "user/user.hpp"

namespace ghost::detail {

namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t ns_since(Clock::time_point t0) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// A pidfd and /proc/PID/mem of pid, closed with this.
struct Target {
    UniqueFd pidfd, mem;
    static std::optional<Target> open(pid_t pid) {
        ghost_export e{};
        const char* step = "";
        if (ghost_export_target_open(&e, pid, &step) != 0)
            return std::nullopt;
        return Target{UniqueFd(e.pidfd), UniqueFd(e.mem_fd)};
    }
};

} // namespace

std::optional<Result<ExportStats>> kernel_snapshot_export(int ghost_fd, pid_t pid) {
    // What the module would refuse, and what may not be traced (a stopped
    // process would be let go; a seccomp one killed by the fork run in it).
    if (!user::check_untouched(pid))
        return std::nullopt;
    auto held = user::Tracee::seize(pid);
    if (!held)
        return std::nullopt;
    user::Tracee& t = *held;
    const auto t0 = Clock::now();
    // Held now: checked again, before any system call runs in it.
    if (!user::check_attrs(pid))
        return std::nullopt; // the destructor lets it go, untouched
    auto regs0 = t.regs();
    auto mask0 = t.signal_mask();
    if (!regs0 || !mask0)
        return std::nullopt; // the destructor lets it go, untouched
    // Before our fork runs in it (and so in the image): out of a
    // restartable sequence's critical section, as a preemption would.
    if (!t.abort_rseq_section(*regs0))
        return std::nullopt;

    bool clobbered = false;
    const auto put_back = [&] {
        if (clobbered)
            (void)t.set_regs(user::restarted(*regs0, true));
        (void)t.set_signal_mask(*mask0);
        return t.detach();
    };
    std::optional<user::Tracee> snap;
    // Declared after put_back's captures, so it ends the snapshot after the
    // process was let go (it holds the process again to reap it).
    user::SnapshotGuard end_snap(pid, snap);

    // No handler may run in it while it forks.
    if (!t.set_signal_mask(~0ULL)) {
        (void)put_back();
        return std::nullopt;
    }
    auto insn = t.find_syscall_insn(*regs0);
    if (!insn) {
        (void)put_back();
        return std::nullopt;
    }
    t.use_syscall_insn(*insn);
    clobbered = true;
    if (auto s = t.fork_snapshot())
        snap.emplace(std::move(*s));
    auto target = Target::open(pid);
    auto of_snap = snap ? Target::open(snap->pid()) : std::nullopt;
    // ghost.ko reads the registers and mask as they were when it stopped.
    if (!snap || !target || !of_snap || !t.set_regs(*regs0) || !t.set_signal_mask(*mask0)) {
        (void)put_back();
        return std::nullopt;
    }
    ghost_export e{};
    e.size = sizeof(e);
    e.flags = GHOST_EXPORT_RUN | GHOST_EXPORT_SNAPSHOT;
    e.pidfd = target->pidfd.get();
    e.mem_fd = target->mem.get();
    e.snap_pidfd = of_snap->pidfd.get();
    e.snap_mem_fd = of_snap->mem.get();
    const bool taken = ::ioctl(ghost_fd, GHOST_IOC_EXPORT, &e) == 0;
    if (auto d = put_back(); !d)
        return Result<ExportStats>(d.error());
    if (!taken)
        return std::nullopt;
    const std::uint64_t frozen_ns = ns_since(t0);
    // So that the next export can reap it if we die before we do.
    (void)snap->name_snapshot();

    ghost_export f{};
    f.size = sizeof(f);
    f.flags = GHOST_EXPORT_FINISH;
    if (::ioctl(ghost_fd, GHOST_IOC_EXPORT, &f) != 0)
        return Result<ExportStats>(
            ioctl_error(errno, f.reason, fmt::format("writing the image of process {}", pid)));
    return Result<ExportStats>(ExportStats{f.bytes, frozen_ns, true});
}

} // namespace ghost::detail
