// SPDX-License-Identifier: LGPL-2.1-or-later
#include "cost.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ghost::balance::migbsp::cost {

Cost bookkeeping(std::size_t sets) {
    Cost c;
    c.instructions = update * (3.0 + 3.0 * static_cast<double>(sets) + 1.0);
    return c;
}

Cost call(const CallShape& s) {
    const std::size_t sets = s.hosts.size();
    std::size_t managers = 0; // a Set without hosts has no manager
    for (std::size_t h : s.hosts)
        managers += h > 0 ? 1 : 0;
    const std::size_t procs = std::accumulate(s.procs.begin(), s.procs.end(), std::size_t{0});
    const std::size_t positives =
        std::accumulate(s.positives.begin(), s.positives.end(), std::size_t{0});
    const auto w = static_cast<double>(s.window);
    const std::uint64_t peers = managers > 0 ? managers * (managers - 1) : 0;

    Cost c;
    // 1. capacities between managers.
    c.messages += peers;
    c.bytes += peers * number_bytes;
    // 2. ISet to every process.
    c.messages += procs;
    c.bytes += procs * sets * number_bytes;
    // 3. step times and highest PM to the manager.
    c.messages += procs;
    c.bytes += procs * (s.window * number_bytes + pm_entry_bytes);
    // 4. aggregates and positive PMs between managers: each manager sends
    // its own to every other one.
    c.messages += peers;
    for (std::size_t j = 0; j < sets; ++j)
        if (s.hosts[j] > 0)
            c.bytes +=
                (managers - 1) * (s.window * aggregate_bytes + s.positives[j] * pm_entry_bytes);
    c.rounds = 4;
    // 5-6. destination requests to other Sets' managers and their answers.
    if (s.remote_requests > 0) {
        c.messages += 2 * s.remote_requests;
        c.bytes += s.remote_requests * (request_bytes + answer_bytes);
        c.rounds += 2;
    }

    // Critical path: one process computes PM for every Set; the busiest
    // manager averages its hosts' capacities and aggregates its processes'
    // times; then every manager combines the Sets' aggregates, checks the
    // inequalities per superstep, sorts the PM list and applies the
    // heuristic; finally each candidate's target manager scans its hosts.
    double busiest = 0.0;
    for (std::size_t j = 0; j < sets; ++j)
        busiest = std::max(busiest, update * static_cast<double>(s.hosts[j]) +
                                        3.0 * update * static_cast<double>(s.procs[j]) * w);
    const auto n = static_cast<double>(positives);
    const double sort = n > 1.0 ? update * n * std::log2(n) : 0.0;
    double search = 0.0;
    for (std::size_t hosts : s.searched)
        search += update * static_cast<double>(hosts) + potential;
    c.instructions = potential * static_cast<double>(sets) + busiest +
                     3.0 * update * static_cast<double>(managers) * w + update * w + sort +
                     update * n + search;
    return c;
}

} // namespace ghost::balance::migbsp::cost
