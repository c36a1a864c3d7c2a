// SPDX-License-Identifier: LGPL-2.1-or-later
// The "ghost" policy: our own (Documentation/balance.md, "Our policy:
// ghost"). At a call it plans the moves that shorten the superstep's
// critical path (plan.hpp) and carries them out only when the predicted
// saving over a horizon pays for the batch's migration; calls come every
// superstep while there is an imbalance to fix, further apart while there
// is none, and never so often that their estimated cost exceeds a share of
// the elapsed time.
#pragma once

#include <cstddef>
#include <memory>

#include <ghost/balance/policy.hpp>
#include <ghost/result.hpp>

namespace ghost::balance::ghost_policy {

struct Tuning {
    std::size_t window = 4;           // supersteps a process's demand is averaged over
    double margin = 0.05;             // a move, and a batch, must cut the time by this share
    double budget = 0.0025;           // calls' estimated seconds stay below this share of the time
    unsigned max_interval = 64;       // supersteps between calls when nothing is to be fixed
    std::uint64_t horizon_cap = 1000; // supersteps the saving is counted over, at most
    // The saving is counted over this share of the supersteps done so far.
    // A job that has run t supersteps is, with a scale-free prior on its
    // length, still running after another t/2 with probability 2/3 (after t:
    // 1/2), so a batch paid back within t/2 pays more often than not by a
    // clear margin.
    double payback = 1.0 / 3.0;
    double decay = 0.98;  // weight of a superstep in visible.hpp's fit, per superstep
    double resend = 0.01; // a process reports a demand changed by more than this share
};

Result<std::unique_ptr<Policy>> make(const Params& params, const Tuning& tuning = {});

} // namespace ghost::balance::ghost_policy
