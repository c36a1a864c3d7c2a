// SPDX-License-Identifier: LGPL-2.1-or-later
// Hector's master allocator (Russ et al. 1998, §II.C and §III.C): slave
// allocators report every host's power, load and share of external
// (non-Hector) CPU time to one master, which decides. §III.C compares two
// policies on the same program: "only-migrate-when-busy", which moves a task
// off a workstation that external, interactive load has made busy, and
// "also-migrate-when-idle", which in addition considers a migration
// "whenever a workstation became idle" and moves a task to a newly available
// faster machine. Our reading, at every barrier:
//
//  busy: a host is busy while external_load > Params::busy. Each busy host
//    that still runs managed processes sheds one per barrier (its first at
//    the barrier: smallest step_time, ties lowest ProcId) to the least
//    loaded non-busy available host (load average + 1 per task already
//    sent there this round), ties to the fastest ((1 - external_load) *
//    cpu_power), then the lowest HostId. The test is a level, not an edge:
//    a host that could not shed when it crossed the threshold still sheds
//    later, and an owner gets the workstation back one task per barrier.
//  idle (hector-idle only): a host is idle when it is available, not busy
//    and its load is below Params::idle; it is newly idle when it was not
//    idle at the previous call (every idle host is new at the first call:
//    the job's start is its first look at the cluster). A newly idle host h
//    reclaims one process: the one whose host gives it the least speed,
//    speed(s) / managed(s), when h would give it more, speed(h) / (managed(h)
//    + 1); ties go to the longest step_time, then the lowest ProcId. This is
//    an edge: an idle host that had nothing to reclaim waits until it is
//    newly idle again, as the paper's policy considered migrations only when
//    a workstation became idle.
#include "pubhector.hpp"
#include "toolkit.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace ghost::balance {

namespace {

class Hector final : public Policy {
  public:
    Hector(const Params& p, bool idle_too) : params_(p), idle_too_(idle_too) {}
    std::string_view name() const override { return idle_too_ ? "hector-idle" : "hector-busy"; }

    Decision at_barrier(const Observation& obs) override {
        Decision d;
        d.rescheduled = true;
        const auto n = obs.hosts.size();
        kit::RoundLoads loads(obs);
        const auto by_host = kit::procs_by_host(obs);
        std::vector<bool> taken(obs.procs.size(), false);
        double scanned = static_cast<double>(n);

        for (HostId h = 0; h < n; ++h) {
            if (!busy(obs.hosts[h]))
                continue;
            ProcId p = 0;
            if (!kit::first_at_barrier(obs, by_host[h], taken, p))
                continue;
            scanned += static_cast<double>(n);
            HostId to = 0;
            if (!least_loaded_fastest(obs, loads, h, to))
                continue;
            taken[p] = true;
            kit::record(d, params_,
                        {p,
                         h,
                         to,
                         fmt::format("{}: host {} is busy (external load {:.3g} above {:.3g}); "
                                     "host {} is the least loaded non-busy host (load {:.3g})",
                                     name(), h, obs.hosts[h].external_load, params_.busy, to,
                                     loads.load(to)),
                         {{"external_load(from)", obs.hosts[h].external_load},
                          {"busy", params_.busy},
                          {"load(to)", loads.load(to)},
                          {"speed(to)", kit::effective_speed(obs.hosts[to])}}});
            loads.expect(to);
        }

        if (idle_too_) {
            was_idle_.resize(n, false);
            std::vector<ProcId> slowest; // filled at the first newly idle host
            std::size_t cursor = 0;      // slowest[..cursor) are all taken
            for (HostId h = 0; h < n; ++h) {
                const bool idle =
                    obs.hosts[h].available && !busy(obs.hosts[h]) && loads.load(h) < params_.idle;
                const bool newly = idle && !was_idle_[h];
                was_idle_[h] = idle;
                if (!newly)
                    continue;
                if (slowest.empty())
                    slowest = by_speed(obs, by_host, scanned);
                reclaim(obs, loads, by_host, slowest, cursor, taken, h, d);
            }
        }

        const std::uint64_t moved = d.moves.size() + d.withheld.size();
        d.cost.messages = n + moved; // every slave allocator reports; one order per move
        d.cost.bytes = n * kit::report_bytes + moved * kit::order_bytes;
        d.cost.rounds = 1 + (moved > 0 ? 1 : 0);
        d.cost.instructions = scanned * kit::instructions_per_entry;
        return d;
    }

  private:
    bool busy(const Host& h) const { return h.external_load > params_.busy; }

    bool least_loaded_fastest(const Observation& obs, const kit::RoundLoads& loads, HostId from,
                              HostId& to) const {
        bool found = false;
        for (HostId h = 0; h < obs.hosts.size(); ++h) {
            const Host& c = obs.hosts[h];
            if (h == from || !c.available || busy(c) || kit::effective_speed(c) <= 0.0)
                continue;
            if (!found || loads.load(h) < loads.load(to) ||
                (loads.load(h) == loads.load(to) &&
                 kit::effective_speed(c) > kit::effective_speed(obs.hosts[to]))) {
                to = h;
                found = true;
            }
        }
        return found;
    }

    static double speed_of(const Observation& obs, const std::vector<std::vector<ProcId>>& by_host,
                           ProcId p) {
        const HostId s = obs.procs[p].host;
        return kit::effective_speed(obs.hosts[s]) /
               double(std::max<std::size_t>(1, by_host[s].size()));
    }

    // The processes from the least speed to the most; ties: the longest
    // step_time, then the lowest ProcId. Sorting once per barrier keeps a
    // round with many newly idle hosts at O(p log p), not O(idle x p).
    static std::vector<ProcId> by_speed(const Observation& obs,
                                        const std::vector<std::vector<ProcId>>& by_host,
                                        double& scanned) {
        std::vector<ProcId> v;
        for (ProcId p = 0; p < obs.procs.size(); ++p)
            if (obs.procs[p].host < by_host.size())
                v.push_back(p);
        std::stable_sort(v.begin(), v.end(), [&](ProcId a, ProcId b) {
            const double sa = speed_of(obs, by_host, a), sb = speed_of(obs, by_host, b);
            return sa < sb || (sa == sb && obs.procs[a].step_time > obs.procs[b].step_time);
        });
        scanned += static_cast<double>(v.size());
        return v;
    }

    void reclaim(const Observation& obs, kit::RoundLoads& loads,
                 const std::vector<std::vector<ProcId>>& by_host,
                 const std::vector<ProcId>& slowest, std::size_t& cursor, std::vector<bool>& taken,
                 HostId h, Decision& d) const {
        const double offered =
            kit::effective_speed(obs.hosts[h]) / double(by_host[h].size() + loads.expected(h) + 1);
        while (cursor < slowest.size() && taken[slowest[cursor]])
            ++cursor;
        bool found = false;
        ProcId best = 0;
        for (std::size_t i = cursor; i < slowest.size() && !found; ++i) {
            const ProcId p = slowest[i];
            if (taken[p] || obs.procs[p].host == h)
                continue;
            if (!(speed_of(obs, by_host, p) < offered))
                break; // the slowest other process would not gain: none would
            best = p;
            found = true;
        }
        if (!found)
            return;
        taken[best] = true;
        const HostId from = obs.procs[best].host;
        kit::record(d, params_,
                    {best,
                     from,
                     h,
                     fmt::format("hector-idle: host {} became idle (load {:.3g} below {:.3g}) and "
                                 "would give process {} a speed of {:.4g} where host {} gives "
                                 "{:.4g}",
                                 h, loads.load(h), params_.idle, best, offered, from,
                                 speed_of(obs, by_host, best)),
                     {{"load(to)", loads.load(h)},
                      {"idle", params_.idle},
                      {"speed(from) per process", speed_of(obs, by_host, best)},
                      {"speed(to) per process", offered}}});
        loads.expect(h);
    }

    Params params_;
    bool idle_too_;
    std::vector<bool> was_idle_;
};

} // namespace

std::unique_ptr<Policy> make_hector_busy(const Params& params) {
    return std::make_unique<Hector>(params, false);
}
std::unique_ptr<Policy> make_hector_idle(const Params& params) {
    return std::make_unique<Hector>(params, true);
}

} // namespace ghost::balance
