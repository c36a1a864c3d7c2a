// SPDX-License-Identifier: GPL-2.0
// The MigBSP policy's own time and memory on a large synthetic cluster
// (Documentation/balance.md): HOSTS hosts in SETS Sets of rising speed, the
// last tenth of them free, PROCS regular processes; it reports the wall
// time of a barrier between calls and of a rescheduling call, and the
// Decision's moves and cost.
#include <chrono>
#include <cstdio>
#include <utility>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <ghost/balance/policy.hpp>

using namespace ghost::balance;

namespace {

Observation cluster(unsigned hosts, unsigned procs, unsigned sets) {
    Observation o;
    o.sets = sets;
    for (unsigned h = 0; h < hosts; ++h) {
        Host x;
        x.set = static_cast<SetId>(static_cast<unsigned long>(h) * sets / hosts);
        x.cpu_power = 1e9 * (1 + x.set);
        o.hosts.push_back(x);
    }
    const unsigned busy = hosts - hosts / 10;
    for (unsigned i = 0; i < procs; ++i) {
        Process p;
        p.host = i % busy;
        p.instructions = 1e9;
        p.comp_time = p.instructions / o.hosts[p.host].cpu_power;
        p.step_time = p.comp_time;
        p.memory_bytes = 10'000'000;
        p.bytes_from_set.assign(sets, 1e5);
        p.recv_time_from_set.assign(sets, 1e-3);
        o.procs.push_back(std::move(p));
    }
    o.net.byte_time.assign(static_cast<std::size_t>(sets) * sets, 1e-8);
    o.net.migration_cost = 0.5;
    return o;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"Time MigBSP's decisions on a large synthetic cluster."};
    unsigned hosts = 10'000, procs = 100'000, sets = 5;
    app.add_option("--hosts", hosts, "hosts (the last tenth run nothing)")
        ->check(CLI::Range(10U, 10'000'000U));
    app.add_option("--procs", procs, "processes")->check(CLI::Range(1U, 100'000'000U));
    app.add_option("--sets", sets, "Sets")->check(CLI::Range(1U, 1000U));
    CLI11_PARSE(app, argc, argv);

    const Observation o = cluster(hosts, procs, sets);
    Params params;
    params.alpha = 2;
    auto policy = make_policy("migbsp", params);
    if (!policy) {
        std::fprintf(stderr, "ghost_bench_migbsp: %s\n", policy.error().what().c_str());
        return 1;
    }
    for (int t = 1; t <= 2; ++t) {
        const auto start = std::chrono::steady_clock::now();
        const Decision d = (*policy)->at_barrier(o);
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        fmt::print("superstep {} {}: {:.3f} s, {} moves, cost {:.3g} instructions, {} messages, "
                   "{} bytes, {} rounds\n",
                   t, d.rescheduled ? "call" : "bookkeeping", took.count(), d.moves.size(),
                   d.cost.instructions, d.cost.messages, d.cost.bytes, d.cost.rounds);
    }
    return 0;
}
