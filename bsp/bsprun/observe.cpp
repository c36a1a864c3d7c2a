// SPDX-License-Identifier: GPL-2.0
// Observer: VpStats and placement -> balance::Observation.
#include "observe.hpp"

#include <algorithm>

namespace ghost::bsp {

double cpu_share(const VpStats& s) {
    if (!(s.comp_wall > 0))
        return 1.0;
    return std::clamp(s.comp_cpu / s.comp_wall, 0.0, 1.0);
}

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

} // namespace

bool counted(const VpStats& s) {
    return s.instructions_errno == 0 && s.instructions > 0;
}

Observer::Observer(std::vector<std::string> hosts, ObserveOptions opt)
    : hosts_(std::move(hosts)), opt_(opt), share_(hosts_.size(), 1.0),
      power_(hosts_.size(), opt_.nominal_power) {}

std::size_t Observer::index(const std::string& host) const {
    return static_cast<std::size_t>(std::find(hosts_.begin(), hosts_.end(), host) - hosts_.begin());
}

balance::Observation Observer::observe(std::uint64_t superstep, double now,
                                       std::span<const VpStats> stats,
                                       std::span<const std::size_t> where) {
    const std::size_t nh = hosts_.size();
    const auto host_of = [&](std::size_t v) {
        const std::size_t h = v < where.size() ? where[v] : 0;
        return h < nh ? h : 0;
    };
    balance::Observation o;
    o.superstep = superstep + 1;
    o.now = now;
    o.sets = nh;
    std::vector<std::vector<double>> shares(nh), rates(nh);
    for (std::size_t v = 0; v < stats.size(); ++v) {
        shares[host_of(v)].push_back(cpu_share(stats[v]));
        // Counted instructions per CPU second: the speed of the host's
        // processors, whatever else runs there.
        if (counted(stats[v]) && stats[v].comp_cpu > 0)
            rates[host_of(v)].push_back(static_cast<double>(stats[v].instructions) /
                                        stats[v].comp_cpu);
    }
    for (std::size_t h = 0; h < nh; ++h) {
        balance::Host host;
        host.set = static_cast<balance::SetId>(h);
        host.processors = 1;
        host.managed = static_cast<unsigned>(shares[h].size());
        if (!shares[h].empty())
            share_[h] = median(shares[h]);
        if (!rates[h].empty())
            power_[h] = median(rates[h]);
        // A CPU quota or other users' load shows as a share below 1: it is
        // external load on a processor of the host's power (nominal, or
        // measured where instructions are counted). Putting it in cpu_power
        // as well would count it twice, since the policies use
        // (1 - external_load) * cpu_power.
        host.cpu_power = power_[h];
        host.external_load = std::clamp(1.0 - share_[h], 0.0, 1.0);
        host.load_average = static_cast<double>(shares[h].size()) + host.external_load;
        o.hosts.push_back(host);
    }
    for (std::size_t v = 0; v < stats.size(); ++v) {
        const VpStats& s = stats[v];
        balance::Process p;
        p.host = static_cast<balance::HostId>(host_of(v));
        p.memory_bytes = s.memory_bytes ? s.memory_bytes : opt_.default_memory;
        p.instructions =
            counted(s) ? static_cast<double>(s.instructions) : s.comp_cpu * power_[p.host];
        p.comp_time = s.comp_wall;
        p.step_time = s.comp_wall;
        p.bytes_from_set.assign(nh, 0.0);
        p.recv_time_from_set.assign(nh, 0.0);
        for (std::size_t src = 0; src < s.bytes_from.size(); ++src) {
            const std::size_t from = host_of(src);
            const double b = static_cast<double>(s.bytes_from[src]);
            p.bytes_from_set[from] += b;
            p.recv_time_from_set[from] += from == p.host ? 0.0 : b * opt_.byte_time;
        }
        o.procs.push_back(std::move(p));
    }
    o.net.byte_time.assign(nh * nh, 0.0);
    for (std::size_t a = 0; a < nh; ++a)
        for (std::size_t b = 0; b < nh; ++b)
            if (a != b)
                o.net.byte_time[a * nh + b] = opt_.byte_time;
    o.net.migration_cost = opt_.migration_cost;
    return o;
}

} // namespace ghost::bsp
