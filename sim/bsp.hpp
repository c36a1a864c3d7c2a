// SPDX-License-Identifier: GPL-2.0
// Runs a BSP application on a simulated platform: one SimGrid actor per
// process; a superstep is the computation (this_actor::execute), the sends
// of the application's pattern (mailboxes, eager), the receives, then a
// barrier at which a balancing policy of balance/ is called with what the
// superstep measured. Its cost is charged (scenarios ii and iii) and its
// moves are carried out (scenario iii): the process pays Mem (its image
// over the route plus the fixed cost) and computes on its new host from the
// next superstep on.
//
// SimGrid allows one engine per process: run() may be called once.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include <ghost/balance/policy.hpp>
#include <ghost/result.hpp>

#include "app.hpp"
#include "load.hpp"
#include "platform.hpp"

namespace ghost::sim {

// MigBSP's scenarios: i, no balancer; ii, the balancer decides (and its cost
// is paid) but nothing migrates; iii, it migrates.
enum class Scenario { i, ii, iii };

Result<Scenario> parse_scenario(std::string_view s);
std::string_view scenario_name(Scenario s);

struct MoveRecord {
    std::uint64_t superstep = 0;
    balance::Move move;
    bool carried = false;  // false: withheld (scenario ii or Params::migrate false) or invalid
    double mem_time = 0.0; // seconds the migration took (carried moves)
};

struct RunResult {
    double makespan = 0.0;
    std::vector<double> step_end;  // simulated time at which each superstep ended
    std::uint64_t calls = 0;       // barriers at which the policy rescheduled
    std::uint64_t migrations = 0;  // moves carried out
    double policy_time = 0.0;      // seconds charged for the policy's own cost
    std::vector<MoveRecord> moves; // every move decided, carried or not
};

// Called at every barrier where the policy was called, before any move.
using DecisionHook = std::function<void(const balance::Observation&, const balance::Decision&)>;

struct RunConfig {
    Scenario scenario = Scenario::i;
    LoadSchedule load;          // external load per host; empty: none
    DecisionHook on_decision;   // e.g. the --trace writer
    unsigned stack_kib = 0;     // actor stack size; 0: chosen from the process count
    bool keep_step_ends = true; // false: only the makespan (huge runs)
};

// Runs app on spec. Scenario i never calls policy (it may be null); ii and
// iii need one.
Result<RunResult> run(const App& app, const PlatformSpec& spec, balance::Policy* policy,
                      RunConfig cfg);

} // namespace ghost::sim
