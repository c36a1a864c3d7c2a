// SPDX-License-Identifier: LGPL-2.1-or-later
#include "report.hpp"

#include <algorithm>
#include <cmath>

namespace ghost::balance::ghost_policy {

bool Reports::differs(double heard, double now) const {
    return std::abs(now - heard) > tolerance_ * std::max(std::abs(heard), std::abs(now));
}

Reports::Heard Reports::refresh(const Observation& obs, std::span<Demand> demand) {
    Heard heard;
    if (demand_.size() != demand.size()) { // a different job: nothing heard yet
        demand_.assign(demand.size(), {});
        memory_.assign(demand.size(), 0);
        reported_.assign(demand.size(), false);
    }
    for (std::size_t i = 0; i < demand.size(); ++i) {
        const Demand& now = demand[i];
        const Demand& old = demand_[i];
        bool changed = !reported_[i] || differs(old.instructions, now.instructions) ||
                       old.bytes_from_set.size() != now.bytes_from_set.size() ||
                       memory_[i] != obs.procs[i].memory_bytes;
        for (std::size_t j = 0; !changed && j < now.bytes_from_set.size(); ++j)
            changed = differs(old.bytes_from_set[j], now.bytes_from_set[j]);
        if (changed) {
            demand_[i] = now;
            memory_[i] = obs.procs[i].memory_bytes;
            reported_[i] = true;
            ++heard.procs;
        } else {
            demand[i] = old;
        }
    }
    if (hosts_.size() != obs.hosts.size()) {
        hosts_.assign(obs.hosts.size(), {});
        host_reported_.assign(obs.hosts.size(), false);
    }
    for (std::size_t h = 0; h < obs.hosts.size(); ++h) {
        const Host& now = obs.hosts[h];
        const Host& old = hosts_[h];
        // Hosts are reported on any change, so the decider's view of them is
        // the observation's.
        const bool changed = !host_reported_[h] || now.available != old.available ||
                             now.processors != old.processors || now.set != old.set ||
                             now.cpu_power != old.cpu_power ||
                             now.external_load != old.external_load;
        if (changed) {
            hosts_[h] = now;
            host_reported_[h] = true;
            ++heard.hosts;
        }
    }
    return heard;
}

} // namespace ghost::balance::ghost_policy
