// SPDX-License-Identifier: GPL-2.0
// bsprun --policy: the balance::Observation a policy sees at a barrier, built
// from what the hub measured (VpStats) and where the VPs are. Pure functions
// plus the little state carried between barriers (each host's last power
// estimate); Documentation/bsp.md, "Balancing".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <ghost/balance/observation.hpp>

#include "hub.hpp"

namespace ghost::bsp {

struct ObserveOptions {
    double nominal_power = 1e9;                 // instructions/s of an unloaded processor
    double byte_time = 1.0 / 100e6;             // s per byte between different hosts (Sets)
    double migration_cost = 0.2;                // s, the fixed cost of one migration
    std::uint64_t default_memory = 64ULL << 20; // a VP's image size when it sent none
};

// A VP's CPU share over its computation phase: comp_cpu / comp_wall clamped
// to [0, 1]; 1 when it did not compute measurably (comp_wall 0).
double cpu_share(const VpStats& s);

// Whether the VP's instructions were counted (perf_event_open) rather than
// left to be estimated from its CPU time.
bool counted(const VpStats& s);

class Observer {
  public:
    // hosts: the --hosts list (one host: just the home host); every host
    // is its own MigBSP Set.
    Observer(std::vector<std::string> hosts, ObserveOptions opt = {});

    const std::vector<std::string>& hosts() const { return hosts_; }
    // The host index of a name, or hosts().size() when it is not listed.
    std::size_t index(const std::string& host) const;
    // The CPU share the VPs of host h got when it last had any (1 until
    // measured); the host's external load is 1 minus it.
    double share(std::size_t h) const { return share_.at(h); }
    // Host h's power in instructions per CPU second: the median rate of its
    // VPs whose instructions were counted, when it last had any; until
    // then (or where nothing is counted) the nominal power.
    double power(std::size_t h) const { return power_.at(h); }

    // The observation of the superstep that just ended (superstep counts
    // from 0 in the hub, from 1 in the Observation), written into `out`,
    // whose vectors are reused: at every barrier of a job the same sizes
    // recur, so after the first one nothing is allocated. where[v]: VP v's
    // host index (a VP on a host that is not listed counts on host 0).
    // Updates each host's estimate: the median share of its VPs (external
    // load = 1 - share) and power() (cpu_power); a host with no VP keeps its
    // last ones. A VP's instructions are its counted ones, else its CPU
    // seconds times its host's power.
    void observe(std::uint64_t superstep, double now, std::span<const VpStats> stats,
                 std::span<const std::size_t> where, balance::Observation& out);
    // The same, into a new Observation.
    balance::Observation observe(std::uint64_t superstep, double now,
                                 std::span<const VpStats> stats,
                                 std::span<const std::size_t> where);

  private:
    std::vector<std::string> hosts_;
    ObserveOptions opt_;
    std::vector<double> share_;
    std::vector<double> power_;
    // Scratch kept between barriers so that observing allocates nothing:
    // each VP's host, the VPs grouped by host, and per host its VPs' shares
    // and counted rates.
    std::vector<std::size_t> host_of_, by_host_, first_, fill_;
    std::vector<std::vector<double>> shares_, rates_;
};

} // namespace ghost::bsp
