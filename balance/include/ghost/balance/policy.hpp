// SPDX-License-Identifier: LGPL-2.1-or-later
// One interface for every balancing policy (PUB's four strategies, MigBSP,
// Hector's, baselines and ours). A policy is called at every barrier with the
// observations of the superstep that just ended and decides whether to
// reschedule, which processes move and where. It is a pure function of its
// inputs, its own state and its seed: no I/O, no clock, no global random
// state, so the same inputs give the same decisions in a test, the
// simulator, the BSP runtime or migd.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <ghost/balance/decision.hpp>
#include <ghost/balance/observation.hpp>
#include <ghost/result.hpp>

namespace ghost::balance {

// Parameters of every policy; each reads the ones it names. Defaults are the
// papers' evaluation settings (MigBSP: omega 3, D 0.5, x 80%).
struct Params {
    std::uint64_t seed = 1; // every random choice draws from a generator seeded here
    bool migrate = true;    // false: decide as usual but carry nothing out (scenario ii)

    // MigBSP (Righi et al.)
    unsigned alpha = 4;    // initial interval between rescheduling calls, in supersteps
    unsigned omega = 3;    // calls without migration before D grows
    double distance = 0.5; // initial D of Inequalities 1 and 2
    double delta = 0.1;    // accepted variation of the instruction prediction (Fig. 5)
    double beta = 0.1;     // accepted variation of the byte prediction (Fig. 6)
    double x = 0.8;        // heuristic "above": candidates have PM > x * max PM
    bool top_one = false;  // heuristic "top-1": only the process of highest PM

    // PUB (Bonorden 2007)
    unsigned peers = 2;     // c: peers asked per node
    double threshold = 1.0; // d: load difference that justifies a migration
    unsigned fanout = 2;    // k: nodes a load report is pushed to (global prediction)

    // Hector (Russ et al.)
    double busy = 0.5; // external load above which a host is busy
    double idle = 0.1; // load below which a host counts as idle

    // Charm++ RefineLB (baseline): a host is overloaded above the average
    // finish time times (1 + tolerance); Charm++'s RefineLB uses 1.05.
    double tolerance = 0.05;
};

class Policy {
  public:
    virtual ~Policy() = default;
    Policy() = default;
    Policy(const Policy&) = delete;
    Policy& operator=(const Policy&) = delete;

    virtual std::string_view name() const = 0;

    // Called at every barrier, in superstep order, with what the superstep
    // that just ended measured. Processes keep their ProcId for the whole job.
    virtual Decision at_barrier(const Observation& obs) = 0;
};

// The policy called NAME ("none", "migbsp", "pub-global", ...), or an error
// naming the unknown name and listing the known ones.
Result<std::unique_ptr<Policy>> make_policy(std::string_view name, const Params& params);

// Every name make_policy() accepts, in a stable order.
std::span<const std::string_view> policy_names();

} // namespace ghost::balance
