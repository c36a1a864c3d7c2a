// SPDX-License-Identifier: LGPL-2.1-or-later
// PUB's global prediction strategy (Bonorden 2007, §4): every node keeps an
// array of the other nodes' loads, refreshed only by the reports that k
// random nodes push to it at each barrier, and decides alone from it, so its
// entries age (mean age O(p/k), Hill et al.).
//
// Our reading, at every barrier, in this order:
//  1. every node, in a random order drawn from the seed, pushes its load
//     average to k = Params::fanout distinct random other nodes, which
//     overwrite their entry for it (age 0);
//  2. every node, in another random order, applies the global strategy's
//     rule to its own array: the least loaded known available node j (load
//     per unit of relative power; ties: lowest HostId) receives the node's
//     first process at the barrier when own - j >= Params::threshold and
//     (l_j + 1) / r_j < own. The own load is exact (load average + 1 per
//     process chosen to move here this round); the deciding node adds one to
//     its own entry for j (it knows it sent a task), but the other nodes
//     learn of it only from j's next push: stale entries are the difference
//     from pub-global.
// A node that never heard of a host does not consider it. Memory: one entry
// per pair of nodes that have exchanged a report (at most n^2).
#include "pubhector.hpp"
#include "toolkit.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace ghost::balance {

namespace {

class PubPrediction final : public Policy {
  public:
    explicit PubPrediction(const Params& p) : params_(p), rng_(p.seed) {}
    std::string_view name() const override { return "pub-prediction"; }

    Decision at_barrier(const Observation& obs) override {
        Decision d;
        d.rescheduled = true;
        ++calls_;
        const auto n = obs.hosts.size();
        if (view_.size() != n)
            view_.assign(n, {});
        kit::RoundLoads loads(obs);
        const auto rel = kit::relative_power(obs);
        const auto by_host = kit::procs_by_host(obs);

        // 1. Pushes.
        std::vector<HostId> order(n);
        for (HostId h = 0; h < n; ++h)
            order[h] = h;
        const std::vector<HostId> order_sorted = order;
        rng_.shuffle(order);
        std::uint64_t pushes = 0;
        for (HostId from : order) {
            for (HostId to : rng_.sample(order_sorted, from, params_.fanout)) {
                auto& row = view_[to];
                if (row.empty())
                    row.assign(n, Entry{});
                row[from] = {obs.hosts[from].load_average, calls_};
                ++pushes;
            }
        }

        // 2. Decisions from the arrays.
        rng_.shuffle(order);
        std::vector<bool> taken(obs.procs.size(), false);
        std::uint64_t scanned = 0;
        std::uint64_t oldest = 0;
        for (HostId self : order) {
            auto& row = view_[self];
            if (row.empty() || rel[self] <= 0.0)
                continue;
            const double own = loads.load(self) / rel[self];
            bool found = false;
            HostId to = 0;
            double best = 0.0;
            for (HostId j = 0; j < n; ++j) {
                if (j == self || row[j].received == 0)
                    continue;
                ++scanned;
                if (!obs.hosts[j].available || rel[j] <= 0.0)
                    continue;
                const double v = row[j].load / rel[j];
                if (!found || v < best) {
                    best = v;
                    to = j;
                    found = true;
                }
            }
            if (!found)
                continue;
            const double gap = own - best;
            const double after = (row[to].load + 1.0) / rel[to];
            if (gap < params_.threshold || after >= own)
                continue;
            ProcId p = 0;
            if (!kit::first_at_barrier(obs, by_host[self], taken, p))
                continue;
            taken[p] = true;
            loads.expect(to);
            const std::uint64_t age = calls_ - row[to].received;
            oldest = std::max(oldest, age);
            kit::record(d, params_,
                        {p,
                         self,
                         to,
                         fmt::format("pub-prediction: host {} (load {:.3g} per unit of power) "
                                     "holds host {} as the least loaded ({:.3g}, an entry {} "
                                     "barrier(s) old); the gap {:.3g} reaches the threshold "
                                     "{:.3g}",
                                     self, own, to, best, age, gap, params_.threshold),
                         {{"load(from)", loads.load(self)},
                          {"load(to) as known", row[to].load},
                          {"load(to) now", obs.hosts[to].load_average},
                          {"age", double(age)},
                          {"normalised(from)", own},
                          {"normalised(to)", best},
                          {"threshold", params_.threshold}}});
            row[to].load += 1.0; // the sender knows; the others learn at to's next push
        }

        const std::uint64_t moved = d.moves.size() + d.withheld.size();
        d.cost.messages = pushes + moved;
        d.cost.bytes = pushes * kit::report_bytes + moved * kit::order_bytes;
        d.cost.rounds = (pushes > 0 ? 1 : 0) + (moved > 0 ? 1 : 0);
        d.cost.instructions = static_cast<double>(scanned) * kit::instructions_per_entry;
        d.figures = {{"pushes", double(pushes)},
                     {"moves", double(moved)},
                     {"oldest entry used", double(oldest)}};
        return d;
    }

  private:
    struct Entry {
        double load = 0.0;
        std::uint64_t received = 0; // the call that brought it; 0: never heard of
    };
    Params params_;
    kit::Rng rng_;
    std::uint64_t calls_ = 0;
    std::vector<std::vector<Entry>> view_; // view_[node][other], allocated on first report
};

} // namespace

std::unique_ptr<Policy> make_pub_prediction(const Params& params) {
    return std::make_unique<PubPrediction>(params);
}

} // namespace ghost::balance
