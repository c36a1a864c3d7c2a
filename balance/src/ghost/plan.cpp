// SPDX-License-Identifier: LGPL-2.1-or-later
#include "plan.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "../toolkit.hpp"

namespace ghost::balance::ghost_policy {

namespace {

constexpr double infinite = std::numeric_limits<double>::infinity();
// A move is taken back when its process, at home, would finish within this
// share of the final critical path: predictions of processes doing the same
// work differ by their communication's last digits, and a move that gains a
// thousandth of the superstep is not worth a migration.
constexpr double needless = 0.01;

// The planner's working state: where every process is, how many occupy each
// host, the predicted times, and per Set the hosts with a free processor,
// fastest first.
class State {
  public:
    State(const Observation& obs, std::span<const Demand> demand)
        : obs_(obs), demand_(demand), where_(obs.procs.size()), occupants_(obs.hosts.size(), 0),
          on_host_(obs.hosts.size()), time_(obs.procs.size(), 0.0), free_(obs.sets) {
        for (ProcId i = 0; i < obs.procs.size(); ++i) {
            where_[i] = obs.procs[i].host;
            ++occupants_[where_[i]];
            on_host_[where_[i]].push_back(i);
        }
        for (HostId h = 0; h < obs.hosts.size(); ++h)
            refresh_free(h);
        for (ProcId i = 0; i < obs.procs.size(); ++i)
            set_time(i, predict(obs_, demand_[i], where_[i], occupants_[where_[i]]));
    }

    ProcId critical() const { return by_time_.begin()->second; }
    double step() const { return obs_.procs.empty() ? 0.0 : -by_time_.begin()->first; }
    double time(ProcId i) const { return time_[i]; }
    HostId where(ProcId i) const { return where_[i]; }
    bool has_free(HostId h) const {
        return obs_.hosts[h].available && occupants_[h] < obs_.hosts[h].processors;
    }

    // The best free destination for i other than its own host: the fastest
    // free host of each Set (ties: lowest HostId), the one where i would
    // finish first. Returns false when no host is free.
    bool best_destination(ProcId i, HostId& to, double& t, std::size_t& examined) const {
        bool found = false;
        for (const auto& hosts : free_)
            for (const auto& [key, h] : hosts) {
                if (h == where_[i])
                    continue;
                ++examined;
                const double th = predict(obs_, demand_[i], h, occupants_[h] + 1);
                if (!found || th < t) {
                    found = true;
                    to = h;
                    t = th;
                }
                break; // the fastest free host of the Set is enough
            }
        return found;
    }

    void move(ProcId i, HostId to) {
        const HostId from = where_[i];
        auto& list = on_host_[from];
        list.erase(std::find(list.begin(), list.end(), i));
        --occupants_[from];
        where_[i] = to;
        ++occupants_[to];
        on_host_[to].push_back(i);
        refresh_free(from);
        refresh_free(to);
        for (HostId h : {from, to})
            for (ProcId k : on_host_[h])
                set_time(k, predict(obs_, demand_[k], h, occupants_[h]));
    }

    // Predicted time of every process of host h if i joined it.
    double worst_if_joined(ProcId i, HostId h) const {
        double worst = predict(obs_, demand_[i], h, occupants_[h] + 1);
        for (ProcId k : on_host_[h])
            worst = std::max(worst, predict(obs_, demand_[k], h, occupants_[h] + 1));
        return worst;
    }

  private:
    void set_time(ProcId i, double t) {
        by_time_.erase({-time_[i], i});
        time_[i] = t;
        by_time_.insert({-t, i}); // slowest first, ties by lowest ProcId
    }
    void refresh_free(HostId h) {
        auto& hosts = free_[obs_.hosts[h].set];
        const std::pair<double, HostId> key{-effective_speed(h), h};
        if (has_free(h))
            hosts.insert({key, h});
        else
            hosts.erase({key, h});
    }
    double effective_speed(HostId h) const { return kit::effective_speed(obs_.hosts[h]); }

    const Observation& obs_;
    std::span<const Demand> demand_;
    std::vector<HostId> where_;
    std::vector<std::size_t> occupants_;
    std::vector<std::vector<ProcId>> on_host_;
    std::vector<double> time_;
    std::set<std::pair<double, ProcId>> by_time_;
    std::vector<std::set<std::pair<std::pair<double, HostId>, HostId>>> free_;
};

} // namespace

double share_speed(const Host& h, std::size_t occupants) {
    const double speed = kit::effective_speed(h);
    if (occupants <= h.processors || occupants == 0)
        return speed;
    return speed * static_cast<double>(h.processors) / static_cast<double>(occupants);
}

double predict(const Observation& obs, const Demand& d, HostId h, std::size_t occupants) {
    const Host& host = obs.hosts[h];
    double t = 0.0;
    if (d.instructions > 0.0) {
        const double speed = share_speed(host, occupants);
        if (speed <= 0.0)
            return infinite;
        t = d.instructions / speed;
    }
    if (obs.net.byte_time.size() == obs.sets * obs.sets)
        for (SetId j = 0; j < d.bytes_from_set.size() && j < obs.sets; ++j)
            t += d.bytes_from_set[j] * obs.net.transfer(host.set, j, obs.sets);
    return t;
}

Plan plan(const Observation& obs, std::span<const Demand> demand, double margin) {
    Plan p;
    if (obs.procs.empty() || demand.size() != obs.procs.size())
        return p;
    State s(obs, demand);
    p.step_before = s.step();
    p.critical = s.critical();

    // Greedy: the slowest process to its best free host while that cuts its
    // time by the margin. Each process moves at most once per plan, which
    // bounds the loop and forbids chains within one decision.
    std::vector<bool> moved(obs.procs.size(), false);
    std::vector<ProcId> order; // processes in the order they moved
    while (true) {
        const ProcId i = s.critical();
        if (moved[i])
            break;
        HostId to = 0;
        double t = 0.0;
        if (!s.best_destination(i, to, t, p.examined) || !(t < s.time(i) * (1.0 - margin)))
            break;
        s.move(i, to);
        moved[i] = true;
        order.push_back(i);
    }
    p.tentative = order.size();

    // Take back, latest first, every move whose process would not exceed the
    // final critical path at home (nor make its old host's processes exceed it).
    const double target = s.step() * (1.0 + needless);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const ProcId i = *it;
        const HostId home = obs.procs[i].host;
        if (s.has_free(home) && s.worst_if_joined(i, home) <= target) {
            s.move(i, home);
            moved[i] = false;
        }
    }
    p.step_after = s.step();

    double longest = 0.0;
    for (ProcId i = 0; i < obs.procs.size(); ++i) {
        if (!moved[i])
            continue;
        PlannedMove m;
        m.proc = i;
        m.from = obs.procs[i].host;
        m.to = s.where(i);
        m.before = predict(obs, demand[i], m.from, 0); // recomputed below with its old sharing
        m.after = s.time(i);
        m.mem_time =
            obs.net.byte_time.size() == obs.sets * obs.sets
                ? static_cast<double>(obs.procs[i].memory_bytes) *
                      obs.net.transfer(obs.hosts[m.from].set, obs.hosts[m.to].set, obs.sets)
                : 0.0;
        longest = std::max(longest, m.mem_time);
        p.moves.push_back(m);
    }
    // A process's time before the plan, with the occupants its host had.
    std::vector<std::size_t> before_occupants(obs.hosts.size(), 0);
    for (const auto& pr : obs.procs)
        ++before_occupants[pr.host];
    for (auto& m : p.moves)
        m.before = predict(obs, demand[m.proc], m.from, before_occupants[m.from]);
    if (!p.moves.empty())
        p.batch_seconds = longest + obs.net.migration_cost;
    return p;
}

} // namespace ghost::balance::ghost_policy
