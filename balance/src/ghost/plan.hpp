// SPDX-License-Identifier: LGPL-2.1-or-later
// The ghost policy's planner: which processes to move where so that the
// next superstep, which lasts as long as its slowest process, ends sooner.
//
// A process's predicted time on host h is its instructions per superstep
// over the speed h gives it, (1 - external_load) * cpu_power shared among
// the processes on h when they outnumber its processors, plus the bytes it
// receives from each Set times T(Set of h, that Set). The planner moves the
// process that finishes last to the free processor where it would finish
// earliest, as long as that shortens its time by the margin, and stops when
// the last one cannot move; then it takes back every move that the final
// critical path did not need. A full host counts as a destination too when
// one of its processes has stopped computing (no instructions and no bytes
// over the window): that process takes the mover's place, in the same
// parallel batch (a swap), so processes done with their work do not hold
// the fast hosts. A pure function of its inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <ghost/balance/observation.hpp>

namespace ghost::balance::ghost_policy {

// What a process is expected to need in the next superstep.
struct Demand {
    double instructions = 0.0;
    std::vector<double> bytes_from_set; // Observation::sets entries
};

struct PlannedMove {
    ProcId proc = 0;
    HostId from = 0;
    HostId to = 0;
    double before = 0.0;   // predicted seconds of the process where it was
    double after = 0.0;    // predicted seconds where it goes
    double mem_time = 0.0; // image bytes x T(from Set, to Set), without the fixed cost
    // Set when this process has stopped computing and leaves its host to
    // the process named here, taking that one's place (a swap).
    std::optional<ProcId> makes_room_for;
};

struct Plan {
    double step_before = 0.0;       // predicted superstep seconds now (the slowest process)
    double step_after = 0.0;        // and after the moves
    ProcId critical = 0;            // the slowest process now
    std::size_t tentative = 0;      // moves the greedy made before taking back the needless ones
    std::size_t examined = 0;       // destinations evaluated (for the cost)
    std::vector<PlannedMove> moves; // ProcId order
    // Seconds the batch keeps everyone at the barrier: the moves run in
    // parallel, so the longest transfer plus the fixed cost (0 if no move).
    double batch_seconds = 0.0;
};

// The speed a host gives each of `occupants` processes.
double share_speed(const Host& h, std::size_t occupants);

// Predicted seconds of a process of demand d on host h among `occupants`.
double predict(const Observation& obs, const Demand& d, HostId h, std::size_t occupants);

// demand has one entry per process of obs. margin in [0, 1): a move must
// cut its process's predicted time by at least this share.
Plan plan(const Observation& obs, std::span<const Demand> demand, double margin);

} // namespace ghost::balance::ghost_policy
