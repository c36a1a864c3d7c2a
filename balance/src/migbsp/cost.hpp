// SPDX-License-Identifier: LGPL-2.1-or-later
// What MigBSP's distributed protocol pays, as Decision::cost reports it.
//
// Between calls each process only keeps its books (aging predictions and
// patterns): instructions, no message. At a call the protocol runs in
// rounds, each one a network latency on the critical path:
//   1. the Set Managers exchange their Sets' mean capacity (ISet);
//   2. each manager sends ISet(j) for every Set to each of its processes;
//   3. each process computes PM(i, j) for every Set and sends its step
//      times of the window and its highest PM to its manager;
//   4. the managers exchange their Sets' step-time aggregates (for
//      Inequalities 1-2) and their lists of positive PMs;
//   5-6. for each candidate bound for another Set, its manager asks the
//      target Set's manager, which answers p and t1 (only if there is one).
// Cost::instructions is the critical path: one process's own work (all run
// in parallel), the busiest manager's, and the candidates' destination
// searches (one after the other, as each sees the moves decided before).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ghost/balance/decision.hpp>

namespace ghost::balance::migbsp::cost {

// Sizes of the items in a message (no header: the simulator charges a
// latency per round), and instructions per elementary update.
inline constexpr std::uint64_t number_bytes = 8; // a double
inline constexpr std::uint64_t id_bytes = 4;     // a ProcId, HostId or SetId
inline constexpr double update = 10.0;           // one aging, pattern or running-sum update
inline constexpr double potential = 20.0;        // Comp, Comm, Mem and PM for one Set
inline constexpr std::uint64_t request_bytes = 2 * id_bytes + 3 * number_bytes; // i, j, I, M, B
inline constexpr std::uint64_t answer_bytes = id_bytes + number_bytes;          // p, t1
inline constexpr std::uint64_t aggregate_bytes = 3 * number_bytes + id_bytes;   // min, max, sum, n
inline constexpr std::uint64_t pm_entry_bytes = number_bytes + 2 * id_bytes;    // PM, i, j

// Per superstep, on every process: PI, CTP, P_comp, and PB, BTP, P_comm per
// Set, and storing its step time.
Cost bookkeeping(std::size_t sets);

struct CallShape {
    std::size_t window = 0;             // supersteps in the window (alpha)
    std::vector<std::size_t> hosts;     // hosts per Set
    std::vector<std::size_t> procs;     // processes per Set
    std::vector<std::size_t> positives; // processes with a positive PM, per Set
    std::size_t remote_requests = 0;    // candidates asked of another Set's manager
    std::size_t local_requests = 0;     // candidates whose target is their own Set
    std::vector<std::size_t> searched;  // hosts examined for each candidate
};

// The call's own cost (bookkeeping of the superstep not included).
Cost call(const CallShape& shape);

} // namespace ghost::balance::migbsp::cost
