// SPDX-License-Identifier: LGPL-2.1-or-later
// What the ghost policy's protocol pays, as Decision::cost reports it.
//
// Every superstep each process adds its instructions and bytes per Set to
// its window (instructions, no message). At a call its demand rides on the
// barrier message it sends the deciding process anyway: the mean
// instructions and bytes per Set, its image size and its host (so no extra
// round, but the bytes are counted), only when it changed since its last
// report (report.hpp); each Set's manager adds the external load of its
// hosts that changed (one message per Set). The decider plans (sorting,
// the greedy's priority queue, one prediction per Set per step) and any
// order rides on the release of the process that moves (bytes counted).
#pragma once

#include <cstddef>
#include <cstdint>

#include <ghost/balance/decision.hpp>

namespace ghost::balance::ghost_policy::cost {

inline constexpr std::uint64_t number_bytes = 8; // a double
inline constexpr std::uint64_t id_bytes = 4;     // a ProcId or HostId
inline constexpr double update = 10.0;           // one running-sum or queue update
inline constexpr double prediction = 20.0;       // one predicted time

// Per superstep, on every process (in parallel): its window's update.
Cost bookkeeping(std::size_t sets);

struct CallShape {
    std::size_t procs = 0;
    std::size_t hosts = 0;
    std::size_t sets = 0;
    std::size_t examined = 0;        // destinations the greedy evaluated
    std::size_t steps = 0;           // greedy steps (tentative moves plus the last try)
    std::size_t moves = 0;           // orders sent
    std::size_t reporting_procs = 0; // processes whose demand changed (report.hpp)
    std::size_t reporting_hosts = 0; // hosts whose load changed
};

// One call's own cost (bookkeeping not included).
Cost call(const CallShape& shape);

// The seconds a call is expected to cost: its instructions on a host of
// speed decider_speed, its bytes at byte_time, and one assumed message
// latency (Network does not give latencies).
double seconds(const Cost& c, double decider_speed, double byte_time);
inline constexpr double assumed_latency = 5e-4;

} // namespace ghost::balance::ghost_policy::cost
