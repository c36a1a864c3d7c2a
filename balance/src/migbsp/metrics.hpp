// SPDX-License-Identifier: LGPL-2.1-or-later
// "Which" (Righi et al., §3.3): the Computation, Communication and Memory
// metrics, the Potential of Migration and the two candidate heuristics.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <ghost/balance/observation.hpp>

#include "patterns.hpp"
#include "sets.hpp"

namespace ghost::balance::migbsp {

// Eq. 3: Comp(i, j) = P_comp(i) * CTP_{k+alpha-1}(i) * ISet(j).
inline double comp(double p_comp, double ctp, double iset_j) {
    return p_comp * ctp * iset_j;
}
// Eq. 4: Comm(i, j) = P_comm(i, j) * BTP_{k+alpha-1}(i, j).
inline double comm(double p_comm, double btp) {
    return p_comm * btp;
}
// Eq. 5: Mem(i, j) = M(i) * T(i, j) + Mig, T from the process's Set to j.
inline double mem(std::uint64_t memory_bytes, double byte_time, double migration_cost) {
    return static_cast<double>(memory_bytes) * byte_time + migration_cost;
}
// Eq. 6: PM(i, j) = Comp(i, j) + Comm(i, j) - Mem(i, j).
inline double pm(double comp_ij, double comm_ij, double mem_ij) {
    return comp_ij + comm_ij - mem_ij;
}

// A process's highest PM and the Set it points to, with its terms.
struct Potential {
    ProcId proc = 0;
    SetId set = 0; // j of the highest PM(i, j); ties go to the lowest j
    double pm = 0.0, comp = 0.0, comm = 0.0, mem = 0.0, iset = 0.0;
};

// PM(i, j) for every Set j with an available processor, own Set included
// (the paper computes n of them), and the highest one.
Potential best_potential(const Observation& obs, const std::vector<SetView>& sets, ProcId i,
                         const History& h);

// The candidates, best first: the decreasing list of positive highest PMs
// (a negative PM never makes a process a candidate, §5.1.2), then either its
// first entry (top_one) or every entry with PM > x * max PM. Equal PMs keep
// ProcId order.
std::vector<Potential> candidates(std::vector<Potential> best, bool top_one, double x);

} // namespace ghost::balance::migbsp
