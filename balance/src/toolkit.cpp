// SPDX-License-Identifier: LGPL-2.1-or-later
#include "toolkit.hpp"

#include <algorithm>
#include <utility>

namespace ghost::balance::kit {

std::uint64_t Rng::next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

std::uint64_t Rng::below(std::uint64_t n) {
    // Reject the top partial block of 2^64 so that every value is equally likely.
    const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
    std::uint64_t r = next();
    while (r >= limit)
        r = next();
    return r % n;
}

std::vector<HostId> Rng::sample(const std::vector<HostId>& pool, HostId self, std::size_t count) {
    const bool self_in = std::binary_search(pool.begin(), pool.end(), self);
    const std::size_t eligible = pool.size() - (self_in ? 1 : 0);
    count = std::min(count, eligible);
    std::vector<HostId> out;
    out.reserve(count);
    if (count * 2 <= eligible) {
        while (out.size() < count) {
            const HostId h = pool[below(pool.size())];
            if (h != self && std::find(out.begin(), out.end(), h) == out.end())
                out.push_back(h);
        }
        return out;
    }
    std::vector<HostId> rest;
    rest.reserve(eligible);
    for (HostId h : pool)
        if (h != self)
            rest.push_back(h);
    // A partial Fisher-Yates: the first `count` slots are the draw.
    for (std::size_t i = 0; i < count; ++i)
        std::swap(rest[i], rest[i + below(rest.size() - i)]);
    rest.resize(count);
    return rest;
}

RoundLoads::RoundLoads(const Observation& obs) : obs_(obs), expected_(obs.hosts.size(), 0) {}

std::vector<std::vector<ProcId>> procs_by_host(const Observation& obs) {
    std::vector<std::vector<ProcId>> by(obs.hosts.size());
    for (ProcId p = 0; p < obs.procs.size(); ++p)
        if (obs.procs[p].host < by.size())
            by[obs.procs[p].host].push_back(p);
    return by;
}

bool first_at_barrier(const Observation& obs, const std::vector<ProcId>& on_host,
                      const std::vector<bool>& taken, ProcId& out) {
    bool found = false;
    for (ProcId p : on_host) { // ProcId order: a tie keeps the lowest
        if (taken[p])
            continue;
        if (!found || obs.procs[p].step_time < obs.procs[out].step_time) {
            out = p;
            found = true;
        }
    }
    return found;
}

double effective_speed(const Host& h) {
    return std::max(0.0, 1.0 - h.external_load) * h.cpu_power;
}

std::vector<double> relative_power(const Observation& obs) {
    double fastest = 0.0;
    for (const auto& h : obs.hosts)
        fastest = std::max(fastest, h.cpu_power);
    std::vector<double> r(obs.hosts.size(), 1.0);
    if (fastest > 0.0)
        for (std::size_t i = 0; i < r.size(); ++i)
            r[i] = obs.hosts[i].cpu_power / fastest;
    return r;
}

void record(Decision& d, const Params& params, Move m) {
    (params.migrate ? d.moves : d.withheld).push_back(std::move(m));
}

} // namespace ghost::balance::kit
