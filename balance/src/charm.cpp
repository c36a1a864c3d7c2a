// SPDX-License-Identifier: LGPL-2.1-or-later
// Baselines from outside the papers: Charm++'s GreedyLB and RefineLB,
// centralised strategies that see every process's load and every host's
// speed, and run at every barrier.
//
// Measures. A process's load is the instructions it executed in the
// superstep that just ended (Process::instructions); a host's speed is what
// it offers managed work, (1 - external_load) * cpu_power
// (kit::effective_speed), so the external load acts as Charm++'s
// background load. A host's finish time is the sum of its processes' loads
// over its speed. Only available hosts of positive speed receive processes.
//
// Cost: a central gather (one report per host, 16 bytes per process of
// loads besides the host's report) and one order per move; the work is
// counted as comparisons of table entries (greedy: processes x hosts, as
// we scan the hosts linearly; refine: the pairs it tries).
#include "pubhector.hpp"
#include "toolkit.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include <fmt/format.h>

namespace ghost::balance {

namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();
constexpr std::uint64_t per_process_bytes = 16;

struct Table {
    std::vector<double> speed;  // effective speed; 0 for a host that may not receive
    std::vector<double> finish; // current finish time per host
    double makespan = 0.0;
};

Table current(const Observation& obs) {
    Table t;
    t.speed.resize(obs.hosts.size());
    t.finish.assign(obs.hosts.size(), 0.0);
    std::vector<double> work(obs.hosts.size(), 0.0);
    for (const auto& p : obs.procs)
        if (p.host < work.size())
            work[p.host] += std::max(0.0, p.instructions);
    for (HostId h = 0; h < obs.hosts.size(); ++h) {
        const double s = kit::effective_speed(obs.hosts[h]);
        t.speed[h] = obs.hosts[h].available ? s : 0.0;
        t.finish[h] = work[h] > 0.0 ? (s > 0.0 ? work[h] / s : infinity) : 0.0;
        t.makespan = std::max(t.makespan, t.finish[h]);
    }
    return t;
}

void gather_cost(const Observation& obs, Decision& d, double comparisons) {
    const std::uint64_t n = obs.hosts.size(), moved = d.moves.size() + d.withheld.size();
    d.cost.messages = n + moved;
    d.cost.bytes =
        n * kit::report_bytes + obs.procs.size() * per_process_bytes + moved * kit::order_bytes;
    d.cost.rounds = 1 + (moved > 0 ? 1 : 0);
    d.cost.instructions = comparisons * kit::instructions_per_entry;
}

// GreedyLB: every process, heaviest first (ties: lowest ProcId), goes to
// the host where it would finish earliest given those already placed;
// ties keep the process where it is, then go to the lowest HostId. The
// current placement is ignored, as in Charm++.
class Greedy final : public Policy {
  public:
    explicit Greedy(const Params& p) : params_(p) {}
    std::string_view name() const override { return "greedy"; }

    Decision at_barrier(const Observation& obs) override {
        Decision d;
        d.rescheduled = true;
        const Table t = current(obs);
        std::vector<ProcId> order(obs.procs.size());
        std::iota(order.begin(), order.end(), ProcId{0});
        auto work = [&](ProcId p) { return std::max(0.0, obs.procs[p].instructions); };
        std::stable_sort(order.begin(), order.end(),
                         [&](ProcId a, ProcId b) { return work(a) > work(b); });

        std::vector<double> finish(obs.hosts.size(), 0.0);
        double makespan = 0.0;
        bool any = false;
        for (ProcId p : order) {
            const HostId here = obs.procs[p].host;
            HostId to = 0;
            double best = infinity;
            for (HostId h = 0; h < obs.hosts.size(); ++h) {
                if (t.speed[h] <= 0.0)
                    continue;
                const double f = finish[h] + work(p) / t.speed[h];
                if (f < best || (f == best && h == here)) {
                    best = f;
                    to = h;
                }
            }
            if (best == infinity)
                break; // no host may receive anything
            any = true;
            finish[to] = best;
            makespan = std::max(makespan, best);
            if (to == here)
                continue;
            kit::record(
                d, params_,
                {p,
                 here,
                 to,
                 fmt::format("greedy: process {} ({:.4g} instructions) finishes "
                             "earliest on host {}, at {:.4g} s",
                             p, work(p), to, best),
                 {{"instructions", work(p)}, {"speed(to)", t.speed[to]}, {"finish(to)", best}}});
        }
        gather_cost(obs, d, double(obs.procs.size()) * double(obs.hosts.size()));
        d.figures = {{"makespan before", t.makespan}, {"makespan after", any ? makespan : 0.0}};
        return d;
    }

  private:
    Params params_;
};

// RefineLB: the average finish time is the total load over the total speed;
// a host is overloaded above average * (1 + Params::tolerance). While an
// overloaded host remains, the most loaded one gives its heaviest process
// that fits (ties: lowest ProcId) to the least loaded host (ties: lowest
// HostId) that stays within the limit after receiving it; a host that can
// give nothing is left as it is. Processes of no load never move.
class Refine final : public Policy {
  public:
    explicit Refine(const Params& p) : params_(p) {}
    std::string_view name() const override { return "refine"; }

    Decision at_barrier(const Observation& obs) override {
        Decision d;
        d.rescheduled = true;
        Table t = current(obs);
        const auto n = obs.hosts.size();
        double total_work = 0.0, total_speed = 0.0;
        for (const auto& p : obs.procs)
            total_work += std::max(0.0, p.instructions);
        for (double s : t.speed)
            total_speed += s;
        const double average = total_speed > 0.0 ? total_work / total_speed : 0.0;
        const double limit = average * (1.0 + params_.tolerance);
        d.figures = {{"average", average}, {"limit", limit}, {"makespan before", t.makespan}};
        if (total_speed <= 0.0)
            return d;

        std::vector<std::vector<ProcId>> by_host = kit::procs_by_host(obs);
        for (auto& v : by_host) // heaviest first, ties lowest ProcId
            std::stable_sort(v.begin(), v.end(), [&](ProcId a, ProcId b) {
                return obs.procs[a].instructions > obs.procs[b].instructions;
            });
        std::vector<bool> done(n, false);
        double comparisons = 0.0;
        for (;;) {
            HostId donor = 0;
            bool found = false;
            for (HostId h = 0; h < n; ++h)
                if (!done[h] && t.finish[h] > limit && (!found || t.finish[h] > t.finish[donor])) {
                    donor = h;
                    found = true;
                }
            if (!found)
                break;
            if (!give_one(obs, t, by_host, donor, limit, d, comparisons))
                done[donor] = true;
        }
        gather_cost(obs, d, comparisons);
        d.figures.push_back(
            {"makespan after", *std::max_element(t.finish.begin(), t.finish.end())});
        return d;
    }

  private:
    bool give_one(const Observation& obs, Table& t, std::vector<std::vector<ProcId>>& by_host,
                  HostId donor, double limit, Decision& d, double& comparisons) const {
        std::vector<HostId> light;
        for (HostId h = 0; h < obs.hosts.size(); ++h)
            if (h != donor && t.speed[h] > 0.0 && t.finish[h] <= limit)
                light.push_back(h);
        std::stable_sort(light.begin(), light.end(),
                         [&](HostId a, HostId b) { return t.finish[a] < t.finish[b]; });
        auto& mine = by_host[donor];
        for (std::size_t i = 0; i < mine.size(); ++i) {
            const ProcId p = mine[i];
            const double w = std::max(0.0, obs.procs[p].instructions);
            if (w <= 0.0)
                continue;
            for (HostId to : light) {
                comparisons += 1.0;
                const double after = t.finish[to] + w / t.speed[to];
                if (after > limit)
                    continue;
                const double before = t.finish[donor];
                const double donor_speed = kit::effective_speed(obs.hosts[donor]);
                t.finish[donor] = donor_speed > 0.0 ? before - w / donor_speed : before;
                t.finish[to] = after;
                mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(i));
                if (mine.empty())
                    t.finish[donor] = 0.0; // no rounding residue on an emptied host
                by_host[to].push_back(p);
                kit::record(d, params_,
                            {p,
                             donor,
                             to,
                             fmt::format("refine: host {} finishes at {:.4g} s, above the limit "
                                         "{:.4g} s; process {} ({:.4g} instructions) fits on "
                                         "host {}, which then finishes at {:.4g} s",
                                         donor, before, limit, p, w, to, after),
                             {{"instructions", w},
                              {"finish(from) before", before},
                              {"finish(to) after", after},
                              {"limit", limit}}});
                return true;
            }
        }
        return false;
    }

    Params params_;
};

} // namespace

std::unique_ptr<Policy> make_greedy(const Params& params) {
    return std::make_unique<Greedy>(params);
}
std::unique_ptr<Policy> make_refine(const Params& params) {
    return std::make_unique<Refine>(params);
}

} // namespace ghost::balance
