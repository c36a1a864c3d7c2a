// SPDX-License-Identifier: GPL-2.0
// Wall time of one at_barrier() of PUB's, Hector's and the Charm++ baseline
// policies on clusters of 100 and 1000 hosts with 10 processes each
// (Documentation/balance.md). Loads are uneven (a quarter of the
// hosts run 20 processes, a quarter none) so that every policy has moves to
// find; each iteration calls a fresh policy's first barrier, then a second
// one (the prediction arrays are filled at the first).
#include <benchmark/benchmark.h>

#include <string_view>

#include <ghost/balance/policy.hpp>

namespace {

using namespace ghost::balance;

Observation cluster(unsigned hosts) {
    Observation obs;
    obs.superstep = 1;
    for (unsigned h = 0; h < hosts; ++h) {
        Host host;
        host.cpu_power = 1e9 * (1.0 + (h % 3));
        host.external_load = (h % 7 == 0) ? 0.6 : 0.0;
        host.managed = (h % 4 == 0) ? 20 : (h % 4 == 1 ? 0 : 10);
        host.load_average = host.managed + (h % 7 == 0 ? 1.0 : 0.0);
        obs.hosts.push_back(host);
        for (unsigned i = 0; i < host.managed; ++i) {
            Process p;
            p.host = h;
            p.instructions = 1e9 * (1.0 + (i % 5));
            p.step_time = 1.0 + i / 100.0;
            obs.procs.push_back(p);
        }
    }
    return obs;
}

void at_barrier(benchmark::State& state, std::string_view name) {
    const auto obs = cluster(static_cast<unsigned>(state.range(0)));
    Params params;
    params.migrate = false;
    std::size_t moves = 0;
    for (auto _ : state) {
        auto made = make_policy(name, params);
        if (!made) {
            state.SkipWithError("unknown policy");
            return;
        }
        auto& pol = *made.value();
        moves = pol.at_barrier(obs).withheld.size();
        moves += pol.at_barrier(obs).withheld.size();
        benchmark::DoNotOptimize(moves);
    }
    state.counters["moves"] = static_cast<double>(moves);
    state.counters["procs"] = static_cast<double>(obs.procs.size());
}

} // namespace

#define GHOST_BALANCE_BENCH(label, name)                                                           \
    BENCHMARK_CAPTURE(at_barrier, label, name)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond)

GHOST_BALANCE_BENCH(pub_global, "pub-global");
GHOST_BALANCE_BENCH(pub_simple, "pub-simple");
GHOST_BALANCE_BENCH(pub_conservative, "pub-conservative");
GHOST_BALANCE_BENCH(pub_prediction, "pub-prediction");
GHOST_BALANCE_BENCH(hector_busy, "hector-busy");
GHOST_BALANCE_BENCH(hector_idle, "hector-idle");
GHOST_BALANCE_BENCH(greedy, "greedy");
GHOST_BALANCE_BENCH(refine, "refine");

BENCHMARK_MAIN();
