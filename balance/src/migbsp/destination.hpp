// SPDX-License-Identifier: LGPL-2.1-or-later
// "Where" (Righi et al., §3.4): the manager of the target Set picks the
// processor p of shortest time(p) (Eq. 7) and answers t1 (Eq. 8); the
// manager of the process compares it with t2 (Eq. 9) and migrates only if
// t1 < t2. No Set receives more processes than it has free processors.
#pragma once

#include <optional>
#include <vector>

#include <ghost/balance/observation.hpp>

#include "metrics.hpp"
#include "sets.hpp"

namespace ghost::balance::migbsp {

// Where every process will be once the moves decided so far in this call
// are carried out: instructions and managed processes per host.
class Placement {
  public:
    explicit Placement(const Observation& obs);

    // Eq. 7 with EXTRA instructions added to the host's own:
    // (sum of I_{k+alpha-1} of the processes on h + extra) /
    // ((1 - external_load(h)) * cpu_power(h) * min(processors, processes)).
    // A host of several processors runs min(processors, processes) of them
    // at once; with one processor this is the paper's Eq. 7.
    double time(HostId h, double extra = 0.0, unsigned extra_procs = 0) const;

    // A processor of h is free: fewer managed processes than processors.
    bool free(HostId h) const;
    void move(HostId from, HostId to, double instructions);

  private:
    const Observation* obs_; // outlives the Placement (one call)
    std::vector<double> instructions_;
    std::vector<long> managed_;
};

// The answer for one candidate: the processor chosen, the times compared
// and the verdict (refusal reason when it does not move).
struct Verdict {
    bool migrate = false;
    bool has_destination = false;
    HostId to = 0;
    double time_p = 0.0;  // time(p): p with the candidate added
    double time_p0 = 0.0; // time(p'): its current host, itself included
    double comm_p = 0.0;  // B_{k+alpha-1}(i, j) * T(j, j)
    double comm_p0 = 0.0; // B_{k+alpha-1}(i, j) * T(set(i), j)
    double t1 = 0.0, t2 = 0.0;
};

// Eq. 7-9 for candidate c. Our readings of the paper:
// - time(p) of a destination includes the candidate ("the simulation of the
//   execution of process i on target processor p"), as time(p') does since
//   the candidate runs there; p is the free, available processor of Set j
//   (not the candidate's own) with the shortest such time, lowest id first.
// - In t1, T(i, j) is "the transferring rate of 1 byte ... inside the Set j":
//   T(j, j); in t2 it is "between the Set of process i and Set j":
//   T(set(i), j). B is what i received from Set j in the window's last
//   superstep. Mem(i, j) is Eq. 5.
Verdict destination(const Observation& obs, const std::vector<SetView>& sets,
                    const Placement& placement, const Potential& c, double last_bytes_from_j,
                    double last_instructions);

} // namespace ghost::balance::migbsp
