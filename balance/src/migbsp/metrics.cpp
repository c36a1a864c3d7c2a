// SPDX-License-Identifier: LGPL-2.1-or-later
#include "metrics.hpp"

#include <algorithm>

namespace ghost::balance::migbsp {

Potential best_potential(const Observation& obs, const std::vector<SetView>& sets, ProcId i,
                         const History& h) {
    const Process& p = obs.procs[i];
    const SetId own = set_of(obs, p);
    Potential best;
    best.proc = i;
    bool found = false;
    // Our reading on a tie: Sets of equal PM (equal hosts, as a runtime
    // that has not measured a host yet sees them) go to one with a free
    // processor, since a full Set refuses the process (Eq. 7-9) and the
    // candidate would then stay where it is.
    const auto has_room = [&](SetId j) { return sets[j].processors > sets[j].procs.size(); };
    for (SetId j = 0; j < sets.size(); ++j) {
        if (sets[j].processors == 0)
            continue; // nowhere to go in Set j
        Potential c;
        c.proc = i;
        c.set = j;
        c.iset = iset(sets, own, j);
        c.comp = comp(h.p_comp(), h.ctp(), c.iset);
        c.comm = comm(h.p_comm(j), h.btp(j));
        c.mem = mem(p.memory_bytes, obs.net.transfer(own, j, obs.sets), obs.net.migration_cost);
        c.pm = pm(c.comp, c.comm, c.mem);
        if (!found || c.pm > best.pm || (c.pm == best.pm && has_room(j) && !has_room(best.set))) {
            best = c;
            found = true;
        }
    }
    if (!found)
        best.pm = -1.0; // no Set can receive anything: never a candidate
    return best;
}

std::vector<Potential> candidates(std::vector<Potential> best, bool top_one, double x) {
    std::erase_if(best, [](const Potential& c) { return !(c.pm > 0.0); });
    std::stable_sort(best.begin(), best.end(),
                     [](const Potential& a, const Potential& b) { return a.pm > b.pm; });
    if (best.empty())
        return best;
    if (top_one) {
        best.resize(1);
        return best;
    }
    // The list is sorted: keep its head while PM > x * max PM. The first
    // entry always stays (with x = 1 the strict test would drop even it).
    const double bar = x * best.front().pm;
    std::size_t keep = 1;
    while (keep < best.size() && best[keep].pm > bar)
        ++keep;
    best.resize(keep);
    return best;
}

} // namespace ghost::balance::migbsp
