// SPDX-License-Identifier: LGPL-2.1-or-later
// A process the user engine could not hold in bounded time (stuck.cpp).
#pragma once

#include <sys/types.h>

#include <chrono>

#include "ghost/result.hpp"

namespace ghost::user {

// A ptrace stop comes only when each thread returns from the kernel: a
// thread in uninterruptible sleep (D: frozen by a cgroup v1 freezer, or
// waiting on a hung file system) would keep the seize waiting, as would a
// process in a frozen cgroup v2 (asleep in the freezer's trap), and a tracee
// that never stopped cannot be let go. So a process that is frozen (v1 or
// v2) is refused at once (EBUSY, naming its cgroup), and one with a thread
// in D on every look for `patience` is refused after it; a thread that
// leaves D once (disk I/O) lets it through. A thread that goes into D after
// this check still makes the seize wait.
Result<void> check_not_stuck(pid_t pid,
                             std::chrono::milliseconds patience = std::chrono::seconds(1));

} // namespace ghost::user
