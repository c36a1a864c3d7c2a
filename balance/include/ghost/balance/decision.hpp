// SPDX-License-Identifier: LGPL-2.1-or-later
// What a balancing policy answers at a barrier: the migrations to carry out,
// with the numbers that led to each, and what computing the answer cost
// (so a simulator can charge it and a log can show why).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ghost/balance/observation.hpp>

namespace ghost::balance {

// A named number behind a decision: "PM(3,Aquario)" = 1.25, "alpha" = 8.
struct Figure {
    std::string name;
    double value = 0.0;
};

struct Move {
    ProcId proc = 0;
    HostId from = 0;
    HostId to = 0;
    std::string why;             // one sentence: which rule chose it
    std::vector<Figure> figures; // the numbers that rule compared
};

// What the policy's own work costs, as the distributed protocol it models
// would pay it: instructions computed (on the deciding hosts), messages and
// bytes exchanged, and how many of those messages follow one another (a
// round is one network latency on the critical path).
struct Cost {
    double instructions = 0.0;
    std::uint64_t messages = 0;
    std::uint64_t bytes = 0;
    std::uint32_t rounds = 0;
};

struct Decision {
    bool rescheduled = false;    // a rescheduling call happened at this barrier
    std::vector<Move> moves;     // migrations to carry out, in order
    std::vector<Move> withheld;  // chosen but not carried out (Params::migrate false)
    std::vector<Figure> figures; // the policy's state after the call (alpha, D, ...)
    Cost cost;
};

} // namespace ghost::balance
