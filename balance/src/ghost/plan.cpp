// SPDX-License-Identifier: LGPL-2.1-or-later
#include "plan.hpp"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <optional>
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
          on_host_(obs.hosts.size()), time_(obs.procs.size(), 0.0), free_(obs.sets),
          held_(obs.sets), pinned_(obs.procs.size(), false) {
        for (ProcId i = 0; i < obs.procs.size(); ++i) {
            where_[i] = obs.procs[i].host;
            ++occupants_[where_[i]];
            on_host_[where_[i]].push_back(i);
        }
        for (HostId h = 0; h < obs.hosts.size(); ++h)
            refresh(h);
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

    // The best destination for i other than its own host: the fastest free
    // host of each Set, or failing a faster one, the fastest full host of
    // each Set that holds a stopped process (then victim is that process,
    // which takes i's place: a swap). i goes where it would finish first;
    // ties: a free host, then the lowest Set. Returns false when there is
    // no destination.
    bool best_destination(ProcId i, HostId& to, double& t, std::optional<ProcId>& victim,
                          std::size_t& examined) const {
        bool found = false;
        auto consider = [&](const auto& hosts, bool swap) {
            for (const auto& [key, h] : hosts) {
                if (h == where_[i])
                    continue;
                ++examined;
                // A swap keeps h's number of occupants.
                const double th = predict(obs_, demand_[i], h, occupants_[h] + (swap ? 0 : 1));
                if (!found || th < t) {
                    found = true;
                    to = h;
                    t = th;
                    victim = swap ? std::optional<ProcId>(stopped_on(h)) : std::nullopt;
                }
                break; // the fastest host of the Set is enough
            }
        };
        for (const auto& hosts : free_)
            consider(hosts, false);
        for (const auto& hosts : held_)
            consider(hosts, true);
        return found;
    }

    void move(ProcId i, HostId to) {
        const HostId from = where_[i];
        place(i, to);
        settle({from, to});
    }

    // i and v exchange hosts (a swap, or its undoing).
    void exchange(ProcId i, ProcId v) {
        const HostId a = where_[i];
        const HostId b = where_[v];
        place(i, b);
        place(v, a);
        settle({a, b});
    }

    // A process that moved in this plan is neither moved again nor swapped.
    void pin(ProcId i, bool pinned) {
        pinned_[i] = pinned;
        refresh(where_[i]);
    }

    // Predicted time of every process of host h, its occupants unchanged in
    // number, if i took the place of v there.
    double worst_if_replaced(ProcId i, ProcId v, HostId h) const {
        double worst = predict(obs_, demand_[i], h, occupants_[h]);
        for (ProcId k : on_host_[h])
            if (k != v)
                worst = std::max(worst, predict(obs_, demand_[k], h, occupants_[h]));
        return worst;
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
    void place(ProcId i, HostId to) {
        auto& list = on_host_[where_[i]];
        list.erase(std::find(list.begin(), list.end(), i));
        --occupants_[where_[i]];
        where_[i] = to;
        ++occupants_[to];
        on_host_[to].push_back(i);
    }
    void settle(std::initializer_list<HostId> hosts) {
        for (HostId h : hosts) {
            refresh(h);
            for (ProcId k : on_host_[h])
                set_time(k, predict(obs_, demand_[k], h, occupants_[h]));
        }
    }
    // A process has stopped when its demand is nothing at all: it computed
    // once (or it would be planned with the others' mean) and no longer does.
    bool idle(ProcId k) const {
        return demand_[k].instructions <= 0.0 &&
               std::all_of(demand_[k].bytes_from_set.begin(), demand_[k].bytes_from_set.end(),
                           [](double b) { return b <= 0.0; });
    }
    bool stopped(ProcId k) const { return !pinned_[k] && idle(k); }
    // Whether a process that takes a stopped one's place on h gets a
    // processor of its own: a swap must not make it share with a busy one
    // (the busy one may be about to stop, as SW's second processes are).
    bool room_after_swap(HostId h) const {
        const auto busy = std::count_if(on_host_[h].begin(), on_host_[h].end(),
                                        [&](ProcId k) { return !idle(k); });
        return static_cast<std::size_t>(busy) < obs_.hosts[h].processors;
    }
    ProcId stopped_on(HostId h) const {
        ProcId best = 0;
        bool found = false;
        for (ProcId k : on_host_[h])
            if (stopped(k) && (!found || k < best)) {
                best = k;
                found = true;
            }
        return best;
    }
    bool holds_stopped(HostId h) const {
        return std::any_of(on_host_[h].begin(), on_host_[h].end(),
                           [&](ProcId k) { return stopped(k); });
    }
    // The host's place in the free list, or, when full, in the list of
    // hosts a stopped process could be swapped out of.
    void refresh(HostId h) {
        const SetId set = obs_.hosts[h].set;
        const std::pair<std::pair<double, HostId>, HostId> entry{{-effective_speed(h), h}, h};
        free_[set].erase(entry);
        held_[set].erase(entry);
        if (has_free(h))
            free_[set].insert(entry);
        else if (obs_.hosts[h].available && holds_stopped(h) && room_after_swap(h))
            held_[set].insert(entry);
    }
    double effective_speed(HostId h) const { return kit::effective_speed(obs_.hosts[h]); }

    const Observation& obs_;
    std::span<const Demand> demand_;
    std::vector<HostId> where_;
    std::vector<std::size_t> occupants_;
    std::vector<std::vector<ProcId>> on_host_;
    std::vector<double> time_;
    std::set<std::pair<double, ProcId>> by_time_;
    using HostList = std::set<std::pair<std::pair<double, HostId>, HostId>>; // fastest first
    std::vector<HostList> free_; // per Set: hosts with a free processor
    std::vector<HostList> held_; // per Set: full hosts holding a stopped process
    std::vector<bool> pinned_;
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
    struct Step {
        ProcId proc;
        std::optional<ProcId> victim; // the stopped process it swapped with
    };
    std::vector<bool> moved(obs.procs.size(), false);
    std::vector<Step> order; // in the order they were made
    while (true) {
        const ProcId i = s.critical();
        if (moved[i])
            break;
        HostId to = 0;
        double t = 0.0;
        std::optional<ProcId> victim;
        if (!s.best_destination(i, to, t, victim, p.examined) || !(t < s.time(i) * (1.0 - margin)))
            break;
        if (victim) {
            s.exchange(i, *victim);
            moved[*victim] = true;
            s.pin(*victim, true);
        } else {
            s.move(i, to);
        }
        moved[i] = true;
        s.pin(i, true);
        order.push_back({i, victim});
    }
    p.tentative = order.size();

    // Take back, latest first, every move whose process would not exceed the
    // final critical path at home (nor make its old host's processes exceed
    // it); a swap is undone by swapping back.
    const double target = s.step() * (1.0 + needless);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const ProcId i = it->proc;
        const HostId home = obs.procs[i].host;
        if (it->victim) {
            const ProcId v = *it->victim;
            if (s.worst_if_replaced(i, v, home) <= target) {
                s.exchange(i, v);
                moved[i] = moved[v] = false;
                s.pin(i, false);
                s.pin(v, false);
            }
        } else if (s.has_free(home) && s.worst_if_joined(i, home) <= target) {
            s.move(i, home);
            moved[i] = false;
            s.pin(i, false);
        }
    }
    p.step_after = s.step();
    std::vector<std::optional<ProcId>> room_for(obs.procs.size());
    for (const Step& st : order)
        if (st.victim && moved[st.proc])
            room_for[*st.victim] = st.proc;

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
        m.makes_room_for = room_for[i];
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
