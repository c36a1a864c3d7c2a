// SPDX-License-Identifier: GPL-2.0
// What bsprun's balancing costs at one barrier when nothing moves: a
// PolicyHook (observation built from the hub's VpStats, then the policy)
// with a placer that only records, VPs spread over equal hosts. Every VP
// waits at the barrier meanwhile, so this time over a superstep's length is
// the policy's share of the job (issue 14: at most 1% when nothing
// migrates). The baseline, measured in the same run, is the hook with
// --policy none (what every barrier of a multi-host job pays anyway).
// Documentation/performance.md, "bsprun's policy at a barrier".
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "policy_hook.hpp"

using namespace ghost;
using namespace ghost::bsp;

namespace {

class RecordingPlacer final : public Placer {
  public:
    explicit RecordingPlacer(std::vector<std::string> at) : at_(std::move(at)) {}
    const std::string& host_of(int vp) const override {
        return at_.at(static_cast<std::size_t>(vp));
    }
    void plan(int vp, std::string to, std::string /*why*/) override {
        at_.at(static_cast<std::size_t>(vp)) = std::move(to);
        ++planned;
    }
    std::size_t planned = 0;

  private:
    std::vector<std::string> at_;
};

std::vector<std::string> host_names(int n) {
    std::vector<std::string> h;
    for (int i = 1; i <= n; ++i)
        h.push_back("h" + std::to_string(i));
    return h;
}

// LU-like statistics: every VP computed 0.1 ms at full share and received
// a few kB from each other VP.
std::vector<VpStats> lu_stats(int nprocs) {
    std::vector<VpStats> st(static_cast<std::size_t>(nprocs));
    for (int v = 0; v < nprocs; ++v) {
        VpStats& s = st[static_cast<std::size_t>(v)];
        s.vp = v;
        s.comp_wall = 1e-4;
        s.comp_cpu = 1e-4;
        s.memory_bytes = 8ULL << 20;
        s.bytes_from.assign(static_cast<std::size_t>(nprocs), 4000);
        s.instructions_errno = 95; // EOPNOTSUPP: no PMU, as on this machine
    }
    return st;
}

// What happens between two barriers, off the clock: in bsprun the hub
// sleeps in poll(2) and copies the VPs' frames, so the hook meets cold
// caches; --evict-kib writes over a buffer that size, --sleep-us blocks.
struct Between {
    std::vector<char> evict;
    unsigned sleep_us = 0;
    bool any() const { return !evict.empty() || sleep_us > 0; }
    void run() {
        for (std::size_t i = 0; i < evict.size(); i += 64)
            evict[i] = static_cast<char>(evict[i] + 1);
        asm volatile("" : : "r"(evict.data()) : "memory");
        if (sleep_us)
            ::usleep(sleep_us);
    }
};

// Seconds per barrier of a hook with POLICY over VP/host counts, from
// superstep 1 on (superstep 0 places), over `repeat` rounds of `barriers`
// barriers each: back to back, the best round's mean; with something
// between barriers (timed per barrier, off the clock), the median round's.
double per_barrier(const std::string& policy_name, int nprocs, int nhosts, int barriers, int repeat,
                   Between& between, std::size_t& moves) {
    const auto hosts = host_names(nhosts);
    std::vector<std::string> at;
    for (int v = 0; v < nprocs; ++v)
        at.push_back(hosts[static_cast<std::size_t>(v % nhosts)]);
    RecordingPlacer placer(at);
    std::unique_ptr<balance::Policy> policy;
    if (policy_name != "none") {
        auto p = balance::make_policy(policy_name, balance::Params{});
        if (!p) {
            std::fprintf(stderr, "bsp_policy_hook_bench: %s\n", p.error().message.c_str());
            std::exit(2);
        }
        policy = std::move(*p);
    }
    PolicyHook hook(placer, hosts, std::move(policy), 0, nprocs);
    const auto stats = lu_stats(nprocs);
    std::uint64_t superstep = 0;
    std::size_t sink = hook.barrier(superstep++, stats).size();
    double best = 1e300;
    std::vector<double> rounds;
    for (int r = 0; r < repeat; ++r) {
        if (between.any()) {
            std::chrono::duration<double> sum{};
            for (int i = 0; i < barriers; ++i) {
                between.run();
                const auto t0 = std::chrono::steady_clock::now();
                sink += hook.barrier(superstep++, stats).size();
                sum += std::chrono::steady_clock::now() - t0;
            }
            rounds.push_back(sum.count() / barriers);
            continue;
        }
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < barriers; ++i)
            sink += hook.barrier(superstep++, stats).size();
        const std::chrono::duration<double> d = std::chrono::steady_clock::now() - t0;
        best = std::min(best, d.count() / barriers);
    }
    if (!rounds.empty()) {
        std::sort(rounds.begin(), rounds.end());
        best = rounds[rounds.size() / 2];
    }
    moves = placer.planned;
    // The moves returned are the work's result: keep it observable.
    asm volatile("" : : "r"(sink) : "memory");
    return best;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"bsprun's balancing cost at one barrier when nothing moves: the policy hook "
                 "(observation + policy) per barrier, against --policy none in the same run, "
                 "and as a share of a superstep."};
    int barriers = 20000, repeat = 5;
    double superstep_us = 235;
    std::vector<std::string> policies = {"migbsp", "ghost", "pub-global"};
    app.add_option("--barriers", barriers, "barriers per round")->check(CLI::Range(1, 100'000'000));
    app.add_option("--repeat", repeat, "rounds; the best is kept")->check(CLI::Range(1, 1000));
    app.add_option("--superstep-us", superstep_us,
                   "superstep length for the share column (235: LU 1000 on the test cluster, "
                   "Documentation/bsp.md)")
        ->check(CLI::PositiveNumber);
    app.add_option("--policies", policies, "policies besides none")->delimiter(',');
    std::vector<std::string> shapes = {"2:3", "6:3", "25:5", "200:10"};
    app.add_option("--shapes", shapes, "VPS:HOSTS pairs, VP i on host i mod HOSTS")->delimiter(',');
    unsigned evict_kib = 0;
    Between between;
    app.add_option("--evict-kib", evict_kib,
                   "write over a buffer of this many KiB between barriers (cold caches)");
    app.add_option("--sleep-us", between.sleep_us, "sleep this long between barriers");
    CLI11_PARSE(app, argc, argv);
    between.evict.assign(static_cast<std::size_t>(evict_kib) << 10, 0);
    std::vector<std::pair<int, int>> sizes;
    for (const auto& sh : shapes) {
        int p = 0, h = 0;
        if (std::sscanf(sh.c_str(), "%d:%d", &p, &h) != 2 || p < 1 || h < 1) {
            std::fprintf(stderr, "bsp_policy_hook_bench: --shapes: '%s' is not VPS:HOSTS\n",
                         sh.c_str());
            return 2;
        }
        sizes.emplace_back(p, h);
    }

    std::printf("| VPs | hosts | policy | ns per barrier | / none | share of a %.0f us superstep "
                "| moves |\n|---|---|---|---|---|---|---|\n",
                superstep_us);
    for (const auto& [p, h] : sizes) {
        std::size_t moves = 0;
        const double none = per_barrier("none", p, h, barriers, repeat, between, moves);
        std::printf("| %d | %d | none | %.0f | 1.00 | %.3f%% | %zu |\n", p, h, none * 1e9,
                    100 * none / (superstep_us * 1e-6), moves);
        for (const auto& name : policies) {
            const double t = per_barrier(name, p, h, barriers, repeat, between, moves);
            std::printf("| %d | %d | %s | %.0f | %.2f | %.3f%% | %zu |\n", p, h, name.c_str(),
                        t * 1e9, t / none, 100 * t / (superstep_us * 1e-6), moves);
        }
    }
    return 0;
}
