// SPDX-License-Identifier: LGPL-2.1-or-later
// The tracer's second half (rebuild.hpp): after the memory, the image's
// descriptors, locks, task and signal state, then the registers and the
// release; and the tracer's life around Rebuild.
#include "user/rebuild.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ghost/io.hpp"
#include "ghost_policy.h"
#include "sys.hpp"
#include "user/creds.hpp"
#include "user/locks.hpp"
#include "user/vma_attrs.hpp"

namespace ghost::user::rebuild {

Result<void> Rebuild::set_files() {
    auto fds = list_fds(t_.pid());
    if (!fds)
        return fds.error();
    for (const int fd : *fds) {
        if (fd >= p_.fd_base)
            continue;
        const bool inherited = std::any_of(img_.files.begin(), img_.files.end(), [&](auto& f) {
            return f.rec.fd == fd && f.rec.kind == GHOST_FILE_INHERIT;
        });
        if (!inherited)
            if (auto r = queue("closing the caller's descriptors", SYS_close,
                               static_cast<std::uint64_t>(fd));
                !r)
                return r;
    }
    const std::vector<int> dups = dup_sources(img_);
    for (std::size_t i = 0; i < img_.files.size(); i++) {
        const auto& r = img_.files[i].rec;
        const std::uint64_t cloexec = (r.fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0;
        int from = -1;
        if (r.kind == GHOST_FILE_PATH)
            from = p_.file_fd[i];
        else if (r.kind == GHOST_FILE_DUP)
            from = dups[i];
        if (from < 0)
            continue;
        if (auto d =
                queue(fmt::format("placing fd {}", r.fd), SYS_dup3,
                      static_cast<std::uint64_t>(from), static_cast<std::uint64_t>(r.fd), cloexec);
            !d)
            return d;
    }
    if (auto r = queue("entering the working directory", SYS_fchdir,
                       static_cast<std::uint64_t>(p_.cwd_fd));
        !r)
        return r;
    if (auto r = queue("umask", SYS_umask, img_.umask); !r)
        return r;
    // The files it opened go first: POSIX locks are taken after the last
    // close of their files and before the rest (a restart waits for them).
    for (const auto& fd : p_.owned)
        if (auto r = queue("closing the restorer's files", SYS_close,
                           static_cast<std::uint64_t>(fd.get()));
            !r)
            return r;
    if (auto r = batch_->flush(); !r)
        return r;
    for (int i = 0; i < GHOST_NRLIMITS; i++) {
        const rlimit rl{img_.rlimits.rlim[i].cur, img_.rlimits.rlim[i].max};
        if (::prlimit(t_.pid(), static_cast<__rlimit_resource>(i), &rl, nullptr) != 0)
            return Error::from_errno(errno,
                                     fmt::format("setting limit {}: {}", i, errno_text(errno)));
    }
    return {};
}

// POSIX locks belong to the process and any close of the file drops them:
// taken here, after the last close of a file the image names
// (take_early_locks() tested them); then the restorer's last descriptors
// go, which tells a waiting restart that the process is restored.
Result<void> Rebuild::set_locks() {
    for (const auto& l : img_.locks) {
        if (l.kind != GHOST_LOCK_POSIX)
            continue;
        const struct flock fl = posix_request(l);
        if (auto w = poke(kLockOff, std::as_bytes(std::span(&fl, 1))); !w)
            return w;
        auto r = t_.call(SYS_fcntl, static_cast<std::uint64_t>(lock_fd(img_, l)), F_SETLK,
                         data(kLockOff));
        if (!r)
            return r.error();
        if (*r == -EAGAIN || *r == -EACCES)
            return lock_conflict(img_, l);
        if (is_err(*r))
            return Error::from_errno(static_cast<int>(-*r),
                                     fmt::format("taking the POSIX lock of fd {} again: {}",
                                                 lock_fd(img_, l),
                                                 errno_text(static_cast<int>(-*r))));
    }
    if (auto r = call("closing the restorer's descriptors", SYS_close_range, p_.fd_base, ~0U, 0);
        !r)
        return r.error();
    return {};
}

// The task (name, personality, tid address, robust list, rseq) and its
// attributes (attrs.hpp), all in one table: one stop.
Result<void> Rebuild::set_task() {
    const auto& tk = img_.task;
    if (auto w = poke(kCommOff, std::as_bytes(std::span(tk.comm))); !w)
        return w;
    if (auto r = queue("prctl(PR_SET_NAME)", SYS_prctl, PR_SET_NAME, data(kCommOff)); !r)
        return r;
    if (auto r = queue("personality", SYS_personality, tk.personality); !r)
        return r;
    if (auto r = queue("set_tid_address", SYS_set_tid_address, tk.clear_child_tid); !r)
        return r;
    if (auto r = queue("set_robust_list", SYS_set_robust_list, tk.robust_list,
                       tk.robust_list_len ? tk.robust_list_len : 24);
        !r)
        return r;
    if (tk.rseq)
        if (auto r = queue("registering the image's rseq area", SYS_rseq, tk.rseq, tk.rseq_len, 0,
                           tk.rseq_sig);
            !r)
            return r;
    if (auto r = commit_attrs(*batch_, p_.attrs); !r)
        return r;
    return batch_->flush();
}

Result<void> Rebuild::set_signals() {
    // Signals pending in the caller are not the image's: ignoring a signal
    // discards it.
    auto status = read_text(fmt::format("/proc/{}/status", t_.pid()));
    if (!status)
        return status.error();
    const std::uint64_t stale = pending_signals(*status);
    std::array<ghost_sigaction, GHOST_NSIG> act{};
    for (int i = 0; i < GHOST_NSIG; i++) {
        act[static_cast<std::size_t>(i)] = img_.signals.action[i];
        act[static_cast<std::size_t>(i)].mask &= ~kUnblockable;
    }
    ghost_sigaction ign{};
    ign.handler = reinterpret_cast<std::uint64_t>(SIG_IGN);
    if (auto w = poke(kActOff, std::as_bytes(std::span(act))); !w)
        return w;
    if (auto w = poke(kActOff + sizeof(act), std::as_bytes(std::span(&ign, 1))); !w)
        return w;
    for (int sig = 1; sig <= GHOST_NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        if ((stale >> (sig - 1)) & 1)
            if (auto r =
                    call("rt_sigaction", SYS_rt_sigaction, sig, data(kActOff + sizeof(act)), 0, 8);
                !r)
                return r.error();
    }
    // Then every action, in one run of the loop.
    Regs r = regs0_;
    r.rip = layout_.scratch + kSetActionsOff;
    r.rbx = 1;
    r.r12 = data(kActOff);
    r.r13 = GHOST_NSIG + 1;
    auto done = t_.run_to_trap(r);
    if (!done)
        return done.error();
    if (done->rax != 0)
        return Error::from_errno(
            static_cast<int>(-static_cast<long>(done->rax)),
            fmt::format("rt_sigaction of signal {}: {}", done->rbx,
                        errno_text(static_cast<int>(-static_cast<long>(done->rax)))));
    const auto& sg = img_.signals;
    stack_t ss{};
    ss.ss_sp = reinterpret_cast<void*>(sg.altstack_sp);
    ss.ss_size = sg.altstack_size;
    ss.ss_flags = static_cast<int>(sg.altstack_flags & ~1u); // never SS_ONSTACK
    // Size 0 is no stack (ghost.ko's images record the task's flags as
    // they are: 0 for a task that never had one), which sigaltstack(2)
    // takes only as SS_DISABLE.
    if (sg.altstack_size == 0)
        ss.ss_flags = SS_DISABLE;
    if (auto w = poke(kAltOff, std::as_bytes(std::span(&ss, 1))); !w)
        return w;
    if (auto r = call("sigaltstack", SYS_sigaltstack, data(kAltOff), 0); !r)
        return r.error();
    // Pending signals wait, blocked, until the tracer lets go.
    for (int sig = 1; sig < 32; sig++)
        if ((sg.pending >> (sig - 1)) & 1)
            if (::syscall(SYS_tgkill, t_.pid(), t_.pid(), sig) != 0)
                return Error::from_errno(
                    errno, fmt::format("queueing signal {}: {}", sig, errno_text(errno)));
    return {};
}

Result<void> Rebuild::commit() {
    if (auto r = t_.kill_on_exit(); !r)
        return r;
    for (auto step :
         {&Rebuild::unmap_caller, &Rebuild::map_image, &Rebuild::set_mm, &Rebuild::set_files,
          &Rebuild::set_locks, &Rebuild::set_task, &Rebuild::set_signals})
        if (auto r = (this->*step)(); !r)
            return r;
    // After the last write to its memory: a process that is not dumpable
    // is out of reach of process_vm_writev, and of a /proc/PID/mem opened
    // from then on, for a tracer without CAP_SYS_PTRACE (as its tracer we
    // keep the registers and the system calls).
    if (p_.attrs.present && (p_.attrs.want.flags & GHOST_ATTRS_NOT_DUMPABLE))
        if (auto r = call("prctl(PR_SET_DUMPABLE, 0)", SYS_prctl, PR_SET_DUMPABLE, 0); !r)
            return r.error();
    if (auto r = t_.set_xstate(xsave_); !r)
        return r;

    Regs final{};
    std::memcpy(&final, &img_.regs, sizeof(final));
    final.cs = regs0_.cs;
    final.ss = regs0_.ss;
    final.ds = regs0_.ds;
    final.es = regs0_.es;
    final.fs = regs0_.fs;
    final.gs = regs0_.gs;
    final.orig_rax = static_cast<unsigned long long>(-1); // not in a system call any more
    final.eflags = (regs0_.eflags & ~GHOST_USER_EFLAGS) | (img_.regs.flags & GHOST_USER_EFLAGS);
    // Stopped: SIGSTOP is queued while we still hold it, so the group stop
    // comes on its way back to user mode, before the image's first
    // instruction.
    return t_.call_and_release(final, img_.signals.blocked & ~kUnblockable,
                               p_.stopped ? SIGSTOP : 0, SYS_munmap, layout_.scratch, kScratchLen);
}

// Kills pid and returns once it is gone or exiting (PF_EXITING, set before
// its descriptors close): as its tracer by waiting, and if no longer
// attached by looking, for at most 5 s.
static void kill_until_gone(Tracee& t, pid_t pid) {
    ::kill(pid, SIGKILL);
    t.kill_and_wait();
    for (int i = 0; i < 5000 && !exiting(pid); ++i)
        ::usleep(1000);
}

// The tracer's whole life: report (errno, reason) on the pipe if the caller
// is still itself, else kill it.
[[noreturn]] void tracer_main(const Plan& p, int report) {
    auto say = [report](const Error& e) {
        const std::string msg = failure_report(e);
        (void)write_all(report, std::as_bytes(std::span(msg)));
    };
    auto t = Tracee::seize(p.self);
    if (!t) {
        say(t.error());
        ::_exit(1);
    }
    Rebuild rb(p, *t);
    if (auto r = rb.prepare(); !r) {
        rb.roll_back();
        say(r.error());
        ::_exit(1);
    }
    if (auto r = rb.commit(); !r) {
        // Gone before we exit: restart() reads the end of its status pipe
        // when our copy closes, and must find the process exiting by then
        // (killed, not restored), its own copy already closed.
        kill_until_gone(*t, p.self);
        std::fprintf(stderr,
                     "ghost: user engine: restoring pid %d failed after the point of no "
                     "return (it is killed): %s\n",
                     p.self, r.error().what().c_str());
        ::_exit(1);
    }
    ::_exit(0);
}

} // namespace ghost::user::rebuild
