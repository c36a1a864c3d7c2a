// SPDX-License-Identifier: LGPL-2.1-or-later
// What only a held process can say about itself (its signal actions,
// alternate stack, tid address, interval timers, break, securebits, and the
// attributes of attrs.hpp), asked with system calls run inside it.
#pragma once

#include <array>
#include <cstdint>

#include <signal.h>

#include <linux/ghost.h>

#include "ghost/result.hpp"
#include "user/tracee.hpp"

namespace ghost::user {

struct Asked {
    std::array<ghost_sigaction, GHOST_NSIG> act{};
    stack_t altstack{};
    std::uint64_t tid_address = 0;
    bool itimer_armed = false;
    std::uint64_t brk = 0;
    ghost_attrs attrs{}; // what prctl and membarrier say (attrs.cpp)
    std::uint32_t securebits = 0;
};

// Maps a scratch page in the held process, asks, and unmaps it: six ptrace
// stops (two for the mapping, one for the signal actions, one for every
// other question in one table, two for the unmapping) where the page may
// hold code; where it may not (a W^X policy), two stops per question.
Result<Asked> ask(Tracee& t);

} // namespace ghost::user
