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

// The median of v, reordering v (a scratch vector).
double median(std::vector<double>& v) {
    const std::size_t n = v.size();
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(n / 2);
    std::nth_element(v.begin(), mid, v.end());
    if (n % 2)
        return *mid;
    return (*std::max_element(v.begin(), mid) + *mid) / 2;
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

void Observer::observe(std::uint64_t superstep, double now, std::span<const VpStats> stats,
                       std::span<const std::size_t> where, balance::Observation& o) {
    const std::size_t nh = hosts_.size();
    const std::size_t np = stats.size();
    host_of_.resize(np);
    for (std::size_t v = 0; v < np; ++v) {
        const std::size_t h = v < where.size() ? where[v] : 0;
        host_of_[v] = h < nh ? h : 0;
    }
    // The VPs grouped by host (a counting sort): by_host_[first_[h] ..
    // first_[h + 1]) are host h's.
    first_.assign(nh + 1, 0);
    for (std::size_t v = 0; v < np; ++v)
        ++first_[host_of_[v] + 1];
    for (std::size_t h = 0; h < nh; ++h)
        first_[h + 1] += first_[h];
    by_host_.resize(np);
    fill_.assign(first_.begin(), first_.end() - 1);
    for (std::size_t v = 0; v < np; ++v)
        by_host_[fill_[host_of_[v]]++] = v;
    o.superstep = superstep + 1;
    o.now = now;
    o.sets = nh;
    shares_.resize(nh);
    rates_.resize(nh);
    for (std::size_t h = 0; h < nh; ++h) {
        shares_[h].clear();
        rates_[h].clear();
    }
    for (std::size_t v = 0; v < np; ++v) {
        shares_[host_of_[v]].push_back(cpu_share(stats[v]));
        // Counted instructions per CPU second: the speed of the host's
        // processors, whatever else runs there.
        if (counted(stats[v]) && stats[v].comp_cpu > 0)
            rates_[host_of_[v]].push_back(static_cast<double>(stats[v].instructions) /
                                          stats[v].comp_cpu);
    }
    o.hosts.resize(nh);
    for (std::size_t h = 0; h < nh; ++h) {
        balance::Host& host = o.hosts[h];
        host = balance::Host{};
        host.set = static_cast<balance::SetId>(h);
        host.processors = 1;
        host.managed = static_cast<unsigned>(shares_[h].size());
        if (!shares_[h].empty())
            share_[h] = median(shares_[h]);
        if (!rates_[h].empty())
            power_[h] = median(rates_[h]);
        // A CPU quota or other users' load shows as a share below 1: it is
        // external load on a processor of the host's power (nominal, or
        // measured where instructions are counted). Putting it in cpu_power
        // as well would count it twice, since the policies use
        // (1 - external_load) * cpu_power.
        host.cpu_power = power_[h];
        host.external_load = std::clamp(1.0 - share_[h], 0.0, 1.0);
        host.load_average = static_cast<double>(host.managed) + host.external_load;
    }
    o.procs.resize(np);
    for (std::size_t v = 0; v < np; ++v) {
        const VpStats& s = stats[v];
        balance::Process& p = o.procs[v];
        p.host = static_cast<balance::HostId>(host_of_[v]);
        p.memory_bytes = s.memory_bytes ? s.memory_bytes : opt_.default_memory;
        p.instructions =
            counted(s) ? static_cast<double>(s.instructions) : s.comp_cpu * power_[p.host];
        p.comp_time = s.comp_wall;
        p.step_time = s.comp_wall;
        // Bytes from each Set, summed exactly (integers, the sources grouped
        // by host) and converted once; the time to receive them is the
        // bytes from other Sets at the configured rate.
        p.bytes_from_set.assign(nh, 0.0);
        p.recv_time_from_set.assign(nh, 0.0);
        const std::span<const std::uint64_t> from_vp(s.bytes_from);
        for (std::size_t h = 0; h < nh; ++h) {
            std::uint64_t sum = 0;
            for (std::size_t k = first_[h]; k < first_[h + 1]; ++k)
                if (const std::size_t src = by_host_[k]; src < from_vp.size())
                    sum += from_vp[src];
            p.bytes_from_set[h] = static_cast<double>(sum);
        }
        // A source VP beyond the job's (a malformed report) counts on host 0.
        for (std::size_t src = np; src < from_vp.size(); ++src)
            p.bytes_from_set[0] += static_cast<double>(from_vp[src]);
        for (std::size_t from = 0; from < nh; ++from)
            if (from != p.host)
                p.recv_time_from_set[from] = p.bytes_from_set[from] * opt_.byte_time;
    }
    o.net.byte_time.assign(nh * nh, opt_.byte_time);
    for (std::size_t a = 0; a < nh; ++a)
        o.net.byte_time[a * nh + a] = 0.0;
    o.net.migration_cost = opt_.migration_cost;
}

balance::Observation Observer::observe(std::uint64_t superstep, double now,
                                       std::span<const VpStats> stats,
                                       std::span<const std::size_t> where) {
    balance::Observation o;
    observe(superstep, now, stats, where, o);
    return o;
}

} // namespace ghost::bsp
