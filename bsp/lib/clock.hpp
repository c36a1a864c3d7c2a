// SPDX-License-Identifier: GPL-2.0
// bsp_time across a move. BSPlib's bsp_time is the time since bsp_begin; a
// VP measures it on CLOCK_MONOTONIC, which each machine starts at its own
// boot, so a VP restored on another machine would see its time jump by the
// difference of the two uptimes (forwards or backwards). Across a detach the
// VP keeps what had elapsed, adds the wall-clock time it spent detached
// (CLOCK_REALTIME, which a cluster's hosts keep in step), and re-bases its
// start on the new host's monotonic clock. On one machine this changes
// nothing: both clocks advance alike.
#pragma once

#include <algorithm>

namespace ghost::bsp::vp {

// One instant on both clocks, in seconds.
struct Moment {
    double mono = 0; // CLOCK_MONOTONIC
    double real = 0; // CLOCK_REALTIME
};

// The start time (on after's monotonic clock) that continues bsp_time from
// t0 (on before's): the elapsed time at before, plus the time detached. A
// wall clock set back meanwhile counts as no time, so bsp_time never
// decreases.
inline double continued_t0(double t0, Moment before, Moment after) {
    const double detached = std::max(0.0, after.real - before.real);
    return after.mono - (before.mono - t0) - detached;
}

} // namespace ghost::bsp::vp
