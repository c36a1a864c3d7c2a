// SPDX-License-Identifier: LGPL-2.1-or-later
// What a balancing policy sees at a barrier: the hosts, the managed processes
// and the network, as measured during the superstep that just ended. The
// same structure is filled by the simulator (sim/), the BSP runtime (bsp/)
// and migd; a policy never measures anything itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ghost::balance {

using HostId = std::uint32_t; // index into Observation::hosts
using ProcId = std::uint32_t; // index into Observation::procs
using SetId = std::uint32_t;  // index of a MigBSP Set (a cluster or LAN)

struct Host {
    SetId set = 0;              // the Set (cluster) the host belongs to
    double cpu_power = 1.0;     // instructions per second of one processor, unloaded
    unsigned processors = 1;    // processors of the host
    double load_average = 0.0;  // 1-minute load average (runnable tasks, managed and external)
    double external_load = 0.0; // share of the CPU taken by processes we do not manage, [0, 1]
    unsigned managed = 0;       // managed processes on the host now
    bool available = true;      // false: the host may not receive processes (down, reserved)
};

// One managed process (a BSP virtual processor) over the superstep that just
// ended. Vectors indexed by Set have Observation::sets entries.
struct Process {
    HostId host = 0;                // where it runs now
    std::uint64_t memory_bytes = 0; // M(i): the size of its image
    double instructions = 0.0;      // I_t(i): instructions executed in the superstep
    double comp_time = 0.0;         // CT_t(i): seconds of its computation phase
    double step_time = 0.0; // seconds from the superstep's start to its arrival at the barrier
    std::vector<double> bytes_from_set;     // B_t(i, j): bytes received from processes of Set j
    std::vector<double> recv_time_from_set; // BT_t(i, j): seconds spent receiving them
};

// The network between Sets as measured (or configured): T(a, b), seconds to
// move one byte from a host of Set a to a host of Set b, and Mig, the fixed
// cost of one migration (process creation, reconnection) in seconds.
struct Network {
    std::vector<double> byte_time; // sets x sets, row-major
    double migration_cost = 0.0;

    double transfer(SetId from, SetId to, std::size_t sets) const {
        return byte_time[static_cast<std::size_t>(from) * sets + to];
    }
};

struct Observation {
    std::uint64_t superstep = 0; // number of the superstep that just ended, from 1
    double now = 0.0;            // seconds since the job started
    std::size_t sets = 1;        // number of Sets; every Host::set is below it
    std::vector<Host> hosts;
    std::vector<Process> procs;
    Network net;
};

} // namespace ghost::balance
