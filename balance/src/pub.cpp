// SPDX-License-Identifier: LGPL-2.1-or-later
// PUB's global, simple distributed and conservative distributed strategies
// (Bonorden 2007, §4). Each runs at every barrier; loads are the 1-minute
// load average plus one per process already chosen to move to the host in
// this round (kit::RoundLoads), and the process that leaves a host is the
// first to reach the barrier (smallest step_time, kit::first_at_barrier).
#include "pubhector.hpp"
#include "toolkit.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace ghost::balance {

namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

// The global strategy: every node reports its power and load to a master,
// which finds P_max and P_min by load per unit of relative power (the
// fastest host has power 1) and moves one process P_max -> P_min when
// "necessary": the normalised loads differ by at least Params::threshold
// and the process would get more power on P_min, one more task there
// included, than it gets on P_max: (l_min + 1) / r_min < l_max / r_max.
// P_max is the most loaded host that runs a managed process (a host
// without one has nothing to give); P_min the least loaded available host.
class PubGlobal final : public Policy {
  public:
    explicit PubGlobal(const Params& p) : params_(p) {}
    std::string_view name() const override { return "pub-global"; }

    Decision at_barrier(const Observation& obs) override {
        Decision d;
        d.rescheduled = true;
        const auto n = obs.hosts.size();
        const kit::RoundLoads loads(obs);
        const auto rel = kit::relative_power(obs);
        const auto by_host = kit::procs_by_host(obs);
        auto norm = [&](HostId h) { return rel[h] > 0.0 ? loads.load(h) / rel[h] : infinity; };

        bool have_max = false, have_min = false;
        HostId pmax = 0, pmin = 0;
        for (HostId h = 0; h < n; ++h) {
            if (!by_host[h].empty() && (!have_max || norm(h) > norm(pmax))) {
                pmax = h;
                have_max = true;
            }
            if (obs.hosts[h].available && rel[h] > 0.0 && (!have_min || norm(h) < norm(pmin))) {
                pmin = h;
                have_min = true;
            }
        }

        d.cost.messages = n; // one report per node
        d.cost.bytes = n * kit::report_bytes;
        d.cost.rounds = 1;
        d.cost.instructions = static_cast<double>(n) * kit::instructions_per_entry;
        if (!have_max || !have_min || pmax == pmin)
            return d;

        const double gap = norm(pmax) - norm(pmin);
        const double after = (loads.load(pmin) + 1.0) / rel[pmin];
        d.figures = {{"P_max", double(pmax)}, {"P_min", double(pmin)}, {"gap", gap}};
        if (gap < params_.threshold || after >= norm(pmax))
            return d;

        ProcId p = 0;
        const std::vector<bool> taken(obs.procs.size(), false);
        if (!kit::first_at_barrier(obs, by_host[pmax], taken, p))
            return d;
        kit::record(d, params_,
                    {p,
                     pmax,
                     pmin,
                     fmt::format("pub-global: host {} is the most loaded ({:.3g} per unit of "
                                 "power) and host {} the least ({:.3g}); the gap {:.3g} reaches "
                                 "the threshold {:.3g} and {:.3g} there after the move is lower",
                                 pmax, norm(pmax), pmin, norm(pmin), gap, params_.threshold, after),
                     {{"load(from)", loads.load(pmax)},
                      {"load(to)", loads.load(pmin)},
                      {"power(from)", rel[pmax]},
                      {"power(to)", rel[pmin]},
                      {"normalised(from)", norm(pmax)},
                      {"normalised(to)", norm(pmin)},
                      {"normalised(to) after", after},
                      {"threshold", params_.threshold}}});
        ++d.cost.messages; // the order to P_max
        d.cost.bytes += kit::order_bytes;
        ++d.cost.rounds;
        return d;
    }

  private:
    Params params_;
};

// What the two distributed strategies share: every node, in a random order
// drawn from the seed (PUB's random waiting times), asks c = Params::peers
// random other available nodes for their load (and power), and may send one
// process to one of them; the chosen node adds one to its load at once.
class PubDistributed : public Policy {
  public:
    explicit PubDistributed(const Params& p) : params_(p), rng_(p.seed) {}

    Decision at_barrier(const Observation& obs) override {
        Decision d;
        d.rescheduled = true;
        const auto n = obs.hosts.size();
        kit::RoundLoads loads(obs);
        const auto by_host = kit::procs_by_host(obs);
        std::vector<bool> taken(obs.procs.size(), false);

        std::vector<HostId> order(n);
        for (HostId h = 0; h < n; ++h)
            order[h] = h;
        rng_.shuffle(order);

        std::vector<HostId> pool; // the available hosts, sorted
        for (HostId h = 0; h < n; ++h)
            if (obs.hosts[h].available)
                pool.push_back(h);
        std::uint64_t asked = 0;
        for (HostId self : order) {
            const auto peers = rng_.sample(pool, self, params_.peers);
            asked += peers.size();
            if (peers.empty())
                continue;
            HostId to = 0;
            std::vector<Figure> figs;
            std::string why;
            if (!judge(obs, loads, self, peers, to, figs, why))
                continue;
            ProcId p = 0;
            if (!kit::first_at_barrier(obs, by_host[self], taken, p))
                continue;
            taken[p] = true;
            loads.expect(to);
            kit::record(d, params_, {p, self, to, std::move(why), std::move(figs)});
        }

        // Per node: c requests and c replies; one notification per move.
        const std::uint64_t moved = d.moves.size() + d.withheld.size();
        d.cost.messages = 2 * asked + moved;
        d.cost.bytes = asked * (kit::request_bytes + kit::report_bytes) + moved * kit::order_bytes;
        d.cost.rounds = asked > 0 ? (moved > 0 ? 3 : 2) : 0;
        d.cost.instructions = static_cast<double>(asked) * kit::instructions_per_entry;
        d.figures = {{"peers asked", double(asked)}, {"moves", double(moved)}};
        return d;
    }

  protected:
    // Whether `self` sends a process to one of `peers`, and to which.
    virtual bool judge(const Observation& obs, const kit::RoundLoads& loads, HostId self,
                       const std::vector<HostId>& peers, HostId& to, std::vector<Figure>& figs,
                       std::string& why) const = 0;
    Params params_;

  private:
    kit::Rng rng_;
};

// Simple: the least loaded peer (ties: lowest HostId) receives a process
// when its load is below the own load minus d = max(Params::threshold, 1)
// (the paper requires d >= 1). Loads are not normalised by power: the
// paper compares loads only.
class PubSimple final : public PubDistributed {
  public:
    using PubDistributed::PubDistributed;
    std::string_view name() const override { return "pub-simple"; }

  protected:
    bool judge(const Observation&, const kit::RoundLoads& loads, HostId self,
               const std::vector<HostId>& peers, HostId& to, std::vector<Figure>& figs,
               std::string& why) const override {
        to = *std::min_element(peers.begin(), peers.end(), [&](HostId a, HostId b) {
            return loads.load(a) < loads.load(b) || (loads.load(a) == loads.load(b) && a < b);
        });
        const double dd = std::max(params_.threshold, 1.0);
        const double own = loads.load(self), least = loads.load(to);
        if (!(least < own - dd))
            return false;
        figs = {
            {"load(from)", own}, {"load(to)", least}, {"d", dd}, {"peers", double(peers.size())}};
        why = fmt::format("pub-simple: host {} (load {:.3g}) asked {} peers; the least loaded, "
                          "host {} (load {:.3g}), is below the own load minus d = {:.3g}",
                          self, own, peers.size(), to, least, dd);
        return true;
    }
};

// Conservative: a process would get c_j / (l_j + 1) on peer j and gets
// c_i / l_i at home. The best peer must offer more, and the source must be
// the most loaded of the c + 1 nodes: c_j / l_j > c_i / l_i for every peer
// (strictly; a peer as loaded as the source blocks it, so that peer may
// migrate first). A load of 0 counts as an infinite ratio.
class PubConservative final : public PubDistributed {
  public:
    using PubDistributed::PubDistributed;
    std::string_view name() const override { return "pub-conservative"; }

  protected:
    bool judge(const Observation& obs, const kit::RoundLoads& loads, HostId self,
               const std::vector<HostId>& peers, HostId& to, std::vector<Figure>& figs,
               std::string& why) const override {
        auto ratio = [&](HostId h, double extra) {
            const double l = loads.load(h) + extra;
            return l > 0.0 ? obs.hosts[h].cpu_power / l : infinity;
        };
        const double own = ratio(self, 0.0);
        double best = -1.0, least_peer = infinity;
        for (HostId j : peers) { // peers are distinct; ties keep the lowest HostId
            const double r = ratio(j, 1.0);
            if (r > best || (r == best && j < to)) {
                best = r;
                to = j;
            }
            least_peer = std::min(least_peer, ratio(j, 0.0));
        }
        if (!(best > own) || !(least_peer > own))
            return false;
        figs = {{"c/l(from)", own},
                {"c/(l+1)(to)", best},
                {"min c/l(peers)", least_peer},
                {"load(from)", loads.load(self)},
                {"load(to)", loads.load(to)}};
        why = fmt::format("pub-conservative: host {} offers {:.3g} per process, host {} would "
                          "offer {:.3g} with one more, and every peer's c/l (at least {:.3g}) "
                          "exceeds the own, so the source is the most loaded of the {}",
                          self, own, to, best, least_peer, peers.size() + 1);
        return true;
    }
};

} // namespace

std::unique_ptr<Policy> make_pub_global(const Params& params) {
    return std::make_unique<PubGlobal>(params);
}
std::unique_ptr<Policy> make_pub_simple(const Params& params) {
    return std::make_unique<PubSimple>(params);
}
std::unique_ptr<Policy> make_pub_conservative(const Params& params) {
    return std::make_unique<PubConservative>(params);
}

} // namespace ghost::balance
