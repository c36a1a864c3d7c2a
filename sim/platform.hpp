// SPDX-License-Identifier: GPL-2.0
// The simulated platform: MigBSP's five Sets (Labtec, Corisco, Frontal, ICE,
// Aquario), one processor per node, each node joined to its Set by its own
// link, the Sets joined by a backbone. Built as one SimGrid star zone per
// Set under a full root zone, so that it scales to 10,000 hosts (routes are
// per host and per Set pair, never per host pair).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ghost/balance/observation.hpp>
#include <ghost/result.hpp>

namespace simgrid::s4u {
class Host;
}

namespace ghost::sim {

struct SetSpec {
    std::string name;
    unsigned nodes = 0;          // nodes of one processor each
    double speed = 0.0;          // instructions per second of a node
    double link_bandwidth = 0.0; // bytes per second of a node's link to its Set
    double link_latency = 0.0;   // seconds
};

struct PlatformSpec {
    std::vector<SetSpec> sets;
    double backbone_bandwidth = 0.0; // bytes per second of each Set's uplink
    double backbone_latency = 0.0;   // seconds, per uplink
    double migration_cost = 0.0;     // fixed seconds of a migration (Mig)
    // MigBSP's barrier is centralised (its Table 6): process 0 receives a
    // message of barrier_bytes from every other process, then sends one to
    // each. 0: a barrier that costs nothing.
    std::uint64_t barrier_bytes = 0;
};

// The MigBSP platform of the table in platform.cpp, its node counts scaled
// so that they add up to hosts (0: the table's own counts).
Result<PlatformSpec> migbsp_platform(unsigned hosts = 0);

// The test cluster (tests/cluster) as bsprun describes it to its policy
// (bsp/bsprun/observe.hpp): hosts h1..hN, each its own Set of one node of
// 10^9 instructions per second (bsprun's nominal power; a host's CPU share
// is external load, --load hK=F), 100 MB/s between any two hosts, Mig
// 0.2 s. For replaying a job bsprun recorded there (--app replay).
Result<PlatformSpec> cluster_platform(unsigned hosts);

// Sets the speed of the Set named in "SET=INSTRUCTIONS_PER_SECOND"; an unknown
// Set or a speed that is not a positive number is an error.
Result<void> override_speed(PlatformSpec& spec, std::string_view text);

// The platform as built in SimGrid (the Engine must exist).
struct Platform {
    PlatformSpec spec;
    std::vector<simgrid::s4u::Host*> hosts; // hosts in Set order: the mapping order
    std::vector<balance::SetId> host_set;   // Set of each host
    std::vector<unsigned> first_host;       // first host index of each Set
    balance::Network net;                   // T(a, b) measured on the routes, and Mig
    std::vector<double> set_latency;        // sets x sets: route latency between Sets

    std::size_t sets() const { return spec.sets.size(); }
    double latency(balance::SetId a, balance::SetId b) const { return set_latency[a * sets() + b]; }
};

// Builds spec into the current SimGrid engine.
Platform build_platform(const PlatformSpec& spec);

} // namespace ghost::sim
