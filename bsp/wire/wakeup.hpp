// SPDX-License-Identifier: GPL-2.0
// Waiting to be moved: a process (a detached VP, a relay not yet on its
// host) holds nothing but memory and waits for SIGUSR2, which comes once
// it has been moved, maybe to another host (Documentation/bsp.md).
#pragma once

#include <functional>

namespace ghost::bsp::wire {

// The SIGUSR2 handler; it does nothing unless wait_for_wakeup() is waiting.
void install_wakeup_handler();

// Blocks SIGUSR2, runs before() (e.g. closes the last socket), then waits
// in sigsuspend for SIGUSR2. The handler jumps out of the wait wherever the
// process is: in sigsuspend, or (in a restored copy) on the instruction
// that re-enters it, since the user engine restarts an interrupted system
// call from its beginning. So the wake-up is never lost. Returns with the
// signal mask it was called with.
void wait_for_wakeup(const std::function<void()>& before);

} // namespace ghost::bsp::wire
