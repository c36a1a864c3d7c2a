// SPDX-License-Identifier: GPL-2.0
// ghost-sim: runs a BSP application of the MigBSP and PUB papers on the
// simulated MigBSP platform with a balancing policy of balance/.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <ghost/balance/policy.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>

#include "app.hpp"
#include "bsp.hpp"
#include "platform.hpp"
#include "trace.hpp"

namespace {

std::string joined(std::span<const std::string_view> names) {
    std::string s;
    for (auto n : names)
        s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
}

// --platform NAME with --hosts.
ghost::Result<ghost::sim::PlatformSpec> platform(const std::string& name, unsigned hosts) {
    using ghost::Error;
    if (name == "migbsp")
        return ghost::sim::migbsp_platform(hosts);
    if (!name.starts_with("cluster:"))
        return Error::from_errno(EINVAL, "--platform '" + name + "': migbsp or cluster:N.");
    if (hosts != 0)
        return Error::from_errno(EINVAL,
                                 "--hosts is for --platform migbsp; cluster:N names its hosts.");
    const std::string n = name.substr(8);
    char* end = nullptr;
    const unsigned long count = std::strtoul(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0')
        return Error::from_errno(EINVAL,
                                 "--platform '" + name + "': cluster:N, N a number of hosts.");
    return ghost::sim::cluster_platform(unsigned(std::min(count, 100000UL)));
}

int fail(const std::string& message) {
    std::fprintf(stderr, "ghost-sim: %s\n", message.c_str());
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    using namespace ghost;
    CLI::App cli{"ghost-sim - run a BSP application of the MigBSP and PUB papers on a simulated "
                 "cluster of clusters (SimGrid), balanced by a policy of ghost's balance/ "
                 "library"};
    cli.footer(
        R"(The platform (--platform migbsp, the default) is MigBSP's five Sets (Labtec, Corisco, Frontal on Fast Ethernet;
ICE, Aquario on Gigabit; one processor per node), processes mapped by filling
one Set, then the next, wrapping. Its node counts and speeds are a table in
sim/platform.cpp, calibrated once (sim/calibrate) and the same for every run.

Scenarios (MigBSP): i runs the application alone (no policy is called);
ii calls the policy at every barrier and charges its cost but never migrates;
iii also carries out its migrations, each paying Mem = image bytes over the
route plus the fixed migration cost.

SIZE is the matrix order for lu and sw, the number of supersteps for lbm,
sat3 and alltoall.

Replay: --app replay --replay FILE --platform cluster:N runs a job that
bsprun --record FILE recorded on the test cluster (bench/bsp_cluster_bench
--sim): each recorded superstep is one here, a VP computes its recorded CPU
seconds at 10^9 instructions per second (bsprun's nominal power) and sends
each VP what that VP received from it; a host's CPU share is external load
(--load h2=0.8 for a host with 20% of a CPU). The platform cluster:N is the
test cluster as bsprun describes it to its policy: hosts h1..hN of one
processor each, 100 MB/s between hosts, Mig 0.2 s, VP i on host i mod N.

Output: a few 'key value' lines, the last one always 'makespan SECONDS'
(simulated seconds). Exit status 0 on success, 2 on a usage error.

Examples:
  ghost-sim --app lu --size 2000 --procs 25 --policy none --scenario i
  ghost-sim --app lbm --size 100 --procs 25 --policy migbsp --alpha 4 --scenario iii \
            --trace moves.jsonl
  ghost-sim --app sat3 --size 50 --procs 32 --policy pub-global --load Labtec=0.6@5
  ghost-sim --app replay --replay lu.jsonl --platform cluster:3 --load h2=0.8 \
            --policy ghost --scenario iii)");

    std::string app_name, policy_name = "none", scenario_text, trace_path, steps_path;
    std::uint64_t size = 0, seed = 1;
    unsigned procs = 0, hosts = 0;
    std::vector<std::string> loads;
    balance::Params params;
    std::string replay_path, platform_name = "migbsp";
    cli.add_option("--app", app_name,
                   "application: lu, lbm, sw, sat3, alltoall, or replay (a job bsprun --record "
                   "wrote: --replay FILE)")
        ->required()
        ->check(CLI::IsMember(sim::app_names()));
    cli.add_option("--size", size,
                   "matrix order (lu, sw) or supersteps (lbm, sat3, alltoall); not with replay")
        ->check(CLI::PositiveNumber);
    cli.add_option("--procs", procs, "number of BSP processes (replay: the recorded job's)")
        ->check(CLI::PositiveNumber);
    cli.add_option("--replay", replay_path,
                   "with --app replay: the file bsprun --record wrote (its VPs' CPU time, "
                   "bytes and memory at every barrier)");
    cli.add_option("--platform", platform_name,
                   "migbsp (MigBSP's five Sets) or cluster:N (the test cluster's N hosts "
                   "h1..hN as bsprun describes them to its policy)")
        ->capture_default_str();
    cli.add_option("--policy", policy_name, "balancing policy: " + joined(balance::policy_names()))
        ->capture_default_str();
    cli.add_option("--scenario", scenario_text,
                   "i (no balancer), ii (decide, never migrate) or iii (migrate); default i "
                   "with --policy none, iii otherwise");
    cli.add_option("--alpha", params.alpha, "MigBSP: initial rescheduling interval in supersteps")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    cli.add_option("--omega", params.omega, "MigBSP: calls without migration before D grows")
        ->capture_default_str();
    cli.add_option("--distance", params.distance, "MigBSP: initial D of Inequalities 1 and 2")
        ->capture_default_str();
    cli.add_option("--x", params.x, "MigBSP: candidates have PM > x max PM")->capture_default_str();
    cli.add_option("--delta", params.delta,
                   "MigBSP: accepted variation of the instruction prediction (Fig. 5)")
        ->capture_default_str();
    cli.add_option("--beta", params.beta,
                   "MigBSP: accepted variation of the byte prediction (Fig. 6)")
        ->capture_default_str();
    cli.add_option("--seed", seed, "seed of the policy's random choices and of sat3's work")
        ->capture_default_str();
    cli.add_option("--hosts", hosts,
                   "total nodes, the Sets' node counts scaled to it (default: the table's 174)");
    cli.add_option("--load", loads,
                   "external load TARGET=F[@T][,F@T...]: Set name, host number or 'all' loses "
                   "the share F of its CPU from time T on, or with @sN from the start of "
                   "superstep N on (repeatable)");
    std::optional<std::uint64_t> barrier_bytes;
    cli.add_option("--barrier-bytes", barrier_bytes,
                   "bytes of each message of the centralised barrier (default: the platform "
                   "table's); 0 makes the barrier a free synchronisation");
    std::vector<std::string> speeds;
    cli.add_option("--speed", speeds,
                   "override a Set's node speed, SET=INSTRUCTIONS_PER_SECOND (repeatable; for "
                   "calibration, sim/calibrate)");
    std::optional<double> mig;
    cli.add_option("--mig", mig,
                   "override the fixed migration cost Mig in seconds (for calibration)");
    unsigned stack_kib = 0;
    cli.add_option("--stack-kib", stack_kib,
                   "stack of each simulated process in KiB (default 256, 32 above 10,000 "
                   "processes, where guard pages are off)");
    cli.add_option("--trace", trace_path,
                   "write every rescheduling call and migration decision as JSON lines");
    cli.add_option("--steps", steps_path, "write the end time of every superstep as CSV");
    CLI11_PARSE(cli, argc, argv);

    params.seed = seed;
    sim::Scenario scenario = policy_name == "none" ? sim::Scenario::i : sim::Scenario::iii;
    if (!scenario_text.empty()) {
        auto s = sim::parse_scenario(scenario_text);
        if (!s)
            return fail(s.error().what());
        scenario = *s;
    }
    params.migrate = scenario == sim::Scenario::iii;

    auto policy = balance::make_policy(policy_name, params);
    if (!policy)
        return fail(policy.error().what());
    const bool replay = app_name == "replay";
    if (replay && size != 0)
        return fail("--size is not for --app replay: the recording has its supersteps.");
    if (!replay && (size == 0 || procs == 0))
        return fail("--app " + app_name + " needs --size and --procs.");
    if (!replay && !replay_path.empty())
        return fail("--replay is for --app replay.");
    auto app = sim::make_app({app_name, size, procs, seed, replay_path});
    if (!app)
        return fail(app.error().what());
    procs = (*app)->procs();
    size = (*app)->supersteps();
    auto spec = platform(platform_name, hosts);
    if (!spec)
        return fail(spec.error().what());
    if (barrier_bytes)
        spec->barrier_bytes = *barrier_bytes;
    if (mig)
        spec->migration_cost = *mig;
    for (const auto& text : speeds)
        if (auto r = sim::override_speed(*spec, text); !r)
            return fail(r.error().what());
    unsigned total_hosts = 0;
    for (const auto& s : spec->sets)
        total_hosts += s.nodes;

    sim::RunConfig cfg;
    cfg.scenario = scenario;
    cfg.stack_kib = stack_kib;
    if (!loads.empty()) {
        cfg.load = sim::LoadSchedule(total_hosts);
        for (const auto& l : loads)
            if (auto r = cfg.load.add(l, *spec); !r)
                return fail(r.error().what());
    }
    sim::TraceWriter trace(*spec);
    if (!trace_path.empty())
        cfg.on_decision = [&](const balance::Observation& o, const balance::Decision& d) {
            trace.call(o, d);
        };
    cfg.keep_step_ends = !steps_path.empty();

    auto result = sim::run(**app, *spec, policy->get(), std::move(cfg));
    if (!result)
        return fail(result.error().what());

    if (!trace_path.empty())
        if (auto r = trace.write(trace_path, *result); !r)
            return fail(r.error().what());
    if (!steps_path.empty()) {
        std::ofstream out(steps_path);
        out << "superstep,end\n";
        for (std::size_t k = 0; k < result->step_end.size(); ++k)
            out << fmt::format("{},{:.6f}\n", k + 1, result->step_end[k]);
        if (!out)
            return fail("cannot write the superstep times to '" + steps_path + "'.");
    }
    fmt::print("app {} size {} procs {} hosts {}\n", app_name, size, procs, total_hosts);
    fmt::print("policy {} scenario {}\n", policy_name, sim::scenario_name(scenario));
    fmt::print("supersteps {}\n", (*app)->supersteps());
    fmt::print("calls {}\n", result->calls);
    fmt::print("migrations {}\n", result->migrations);
    fmt::print("policy_time {:.6f}\n", result->policy_time);
    fmt::print("makespan {:.6f}\n", result->makespan);
    return 0;
}
