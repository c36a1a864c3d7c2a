// SPDX-License-Identifier: LGPL-2.1-or-later
// The Sets and what their Set Managers know at a rescheduling call
// (Righi et al., §3.1 and §3.3.1): which hosts and processes each Set holds
// and its mean load-adjusted capacity, from which ISet(j) is computed.
#pragma once

#include <cstddef>
#include <vector>

#include <ghost/balance/observation.hpp>

namespace ghost::balance::migbsp {

// The instructions per second one processor of HOST gives us:
// (1 - external_load) * cpu_power. A host fully taken by others keeps 1% so
// that Eq. 7 and ISet stay finite (it still ranks last).
double usable_power(const Host& host);

struct SetView {
    std::vector<HostId> hosts; // every host of the Set
    std::vector<ProcId> procs; // every process running in the Set
    double capacity = 0.0;     // mean usable_power over its available processors
    unsigned processors = 0;   // processors of its available hosts
};

// One SetView per Set (obs.sets of them). Hosts whose set is out of range
// and processes on hosts out of range are left out.
std::vector<SetView> set_views(const Observation& obs);

// The Set of the host a process runs on, or obs.sets if the host is unknown.
SetId set_of(const Observation& obs, const Process& p);

// ISet(j) as the manager of Set OWN computes it: Set j's mean capacity
// normalised by its own Set's (so ISet(own) = 1). A Set without an available
// processor has ISet 0; if OWN has none, the others are normalised by the
// smallest positive capacity instead (any Set is then at least as good).
double iset(const std::vector<SetView>& sets, SetId own, SetId j);

} // namespace ghost::balance::migbsp
