// SPDX-License-Identifier: LGPL-2.1-or-later
#include "destination.hpp"

#include <algorithm>

namespace ghost::balance::migbsp {

Placement::Placement(const Observation& obs)
    : obs_(&obs), instructions_(obs.hosts.size(), 0.0), managed_(obs.hosts.size(), 0) {
    for (const Process& p : obs.procs)
        if (p.host < obs.hosts.size()) {
            instructions_[p.host] += p.instructions;
            ++managed_[p.host];
        }
    // Host::managed may count processes of other jobs too: the larger wins.
    for (HostId h = 0; h < obs.hosts.size(); ++h)
        managed_[h] = std::max<long>(managed_[h], obs.hosts[h].managed);
}

double Placement::time(HostId h, double extra, unsigned extra_procs) const {
    const Host& host = obs_->hosts[h];
    const long procs = std::max<long>(1, managed_[h] + extra_procs);
    const long used = std::min<long>(std::max(1U, host.processors), procs);
    return (instructions_[h] + extra) / (usable_power(host) * static_cast<double>(used));
}

bool Placement::free(HostId h) const {
    return managed_[h] < static_cast<long>(obs_->hosts[h].processors);
}

void Placement::move(HostId from, HostId to, double instructions) {
    instructions_[from] -= instructions;
    instructions_[to] += instructions;
    --managed_[from];
    ++managed_[to];
}

Verdict destination(const Observation& obs, const std::vector<SetView>& sets,
                    const Placement& placement, const Potential& c, double last_bytes_from_j,
                    double last_instructions) {
    const Process& p = obs.procs[c.proc];
    const SetId own = set_of(obs, p);
    const SetId j = c.set;
    Verdict v;
    for (HostId h : sets[j].hosts) {
        if (h == p.host || !obs.hosts[h].available || !placement.free(h))
            continue;
        const double t = placement.time(h, last_instructions, 1);
        if (!v.has_destination || t < v.time_p) {
            v.has_destination = true;
            v.to = h;
            v.time_p = t;
        }
    }
    v.time_p0 = placement.time(p.host);
    v.comm_p = last_bytes_from_j * obs.net.transfer(j, j, obs.sets);
    v.comm_p0 = last_bytes_from_j * obs.net.transfer(own, j, obs.sets);
    v.t2 = v.time_p0 + v.comm_p0;
    if (!v.has_destination)
        return v;
    v.t1 = v.time_p + v.comm_p + c.mem;
    v.migrate = v.t1 < v.t2;
    return v;
}

} // namespace ghost::balance::migbsp
