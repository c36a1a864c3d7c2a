// SPDX-License-Identifier: LGPL-2.1-or-later
#include "sets.hpp"

#include <algorithm>
#include <limits>

namespace ghost::balance::migbsp {

double usable_power(const Host& host) {
    return (1.0 - std::clamp(host.external_load, 0.0, 0.99)) * host.cpu_power;
}

std::vector<SetView> set_views(const Observation& obs) {
    std::vector<SetView> sets(obs.sets);
    std::vector<double> sum(obs.sets, 0.0);
    for (HostId h = 0; h < obs.hosts.size(); ++h) {
        const Host& host = obs.hosts[h];
        if (host.set >= obs.sets)
            continue;
        SetView& s = sets[host.set];
        s.hosts.push_back(h);
        if (host.available && host.processors > 0) {
            s.processors += host.processors;
            sum[host.set] += usable_power(host) * host.processors;
        }
    }
    for (std::size_t j = 0; j < sets.size(); ++j)
        if (sets[j].processors > 0)
            sets[j].capacity = sum[j] / sets[j].processors;
    for (ProcId i = 0; i < obs.procs.size(); ++i) {
        const SetId s = set_of(obs, obs.procs[i]);
        if (s < obs.sets)
            sets[s].procs.push_back(i);
    }
    return sets;
}

SetId set_of(const Observation& obs, const Process& p) {
    if (p.host >= obs.hosts.size() || obs.hosts[p.host].set >= obs.sets)
        return static_cast<SetId>(obs.sets);
    return obs.hosts[p.host].set;
}

double iset(const std::vector<SetView>& sets, SetId own, SetId j) {
    double base = sets[own].capacity;
    if (base <= 0.0) {
        base = std::numeric_limits<double>::infinity();
        for (const SetView& s : sets)
            if (s.capacity > 0.0)
                base = std::min(base, s.capacity);
        if (base == std::numeric_limits<double>::infinity())
            return 0.0;
    }
    return sets[j].capacity / base;
}

} // namespace ghost::balance::migbsp
