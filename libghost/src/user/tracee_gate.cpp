// SPDX-License-Identifier: LGPL-2.1-or-later
// A held tracee let run on with its system calls watched
// (Tracee::run_watched): the last image of a pre-copy reads the mappings'
// flags while the process still runs, and needs to know that nothing it did
// meanwhile could have changed them.
#include "user/tracee.hpp"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <cerrno>
#include <ctime>

#include <fmt/format.h>

#include "sys.hpp"

namespace ghost::user {

namespace {

// How long the tracer sleeps between looks: a stopped call waits at most
// this long for it.
constexpr long kPollNs = 50 * 1000;

} // namespace

Result<bool> Tracee::run_watched(const std::function<bool()>& done, bool (*allowed)(long nr)) {
    bool refused = false, interrupted = false;
    int sig = 0;
    // Once done: PTRACE_INTERRUPT. With PTRACE_SYSCALL in effect the kernel
    // may report it as the exit stop of the call it interrupted, and then
    // restarts that call on the next resume; so from then on every stop (a
    // call's or a signal's) is interrupted again and resumed with
    // PTRACE_CONT (no more call stops):
    // the tracee traps on its way back to user mode, before any instruction
    // or call of its own, as seize() leaves it.
    const auto interrupt = [&] {
        if (!interrupted && !done())
            return true;
        interrupted = true;
        return ::ptrace(PTRACE_INTERRUPT, pid_, nullptr, nullptr) == 0;
    };
    for (;;) {
        const auto request = interrupted ? PTRACE_CONT : PTRACE_SYSCALL;
        if (::ptrace(request, pid_, nullptr, reinterpret_cast<void*>(static_cast<long>(sig))) != 0)
            return died("it ran before its last capture");
        sig = 0;
        int st = 0;
        for (;;) {
            const pid_t r = ::waitpid(pid_, &st, __WALL | WNOHANG);
            if (r > 0)
                break;
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return Error::from_errno(
                    errno, fmt::format("waiting for pid {}: {}", pid_, errno_text(errno)));
            if (!interrupted && !interrupt())
                return died("it was being held again");
            const timespec poll{0, kPollNs};
            ::nanosleep(&poll, nullptr);
        }
        if (!WIFSTOPPED(st))
            return died("it ran before its last capture");
        if ((st >> 16) == PTRACE_EVENT_STOP) {
            // Our interrupt (SIGTRAP) holds it; a group-stop cannot come, as
            // stop signals are not delivered.
            if (interrupted && WSTOPSIG(st) == SIGTRAP)
                return refused;
            continue;
        }
        const int s = WSTOPSIG(st);
        if (s == kSyscallStop) {
            __ptrace_syscall_info info{};
            if (::ptrace(PTRACE_GET_SYSCALL_INFO, pid_, reinterpret_cast<void*>(sizeof(info)),
                         &info) <= 0)
                return died("its system calls were watched");
            if (info.op == PTRACE_SYSCALL_INFO_ENTRY && !allowed(static_cast<long>(info.entry.nr)))
                refused = true;
            if (!interrupt())
                return died("it was being held again");
            continue;
        }
        if (is_stop_signal(s))
            held_stop_ = s; // resent at detach, as while it is held
        else
            sig = s;
        if (!interrupt())
            return died("it was being held again");
    }
}

} // namespace ghost::user
