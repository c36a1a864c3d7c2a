// SPDX-License-Identifier: GPL-2.0
// ghost-sim's execution model on small hand-made platforms: superstep time,
// observations, forced migrations paying Mem, the policy's charged cost,
// external load, determinism. SimGrid allows one engine per process, so
// every simulation runs in a forked child that reports back as JSON.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "app.hpp"
#include "bsp.hpp"
#include "platform.hpp"
#include "trace.hpp"

namespace {

using namespace ghost;
using nlohmann::json;

// SimGrid's default network model (LV08) multiplies latencies by 13.01 and
// bandwidths by 0.97.
constexpr double lv08_latency = 13.01;
constexpr double lv08_bandwidth = 0.97;

// Runs f() (which returns JSON) in a child process.
template <class F> json isolated(F f) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        const std::string out = f().dump();
        const ssize_t n = ::write(fds[1], out.data(), out.size());
        ::_exit(n == ssize_t(out.size()) ? 0 : 1);
    }
    ::close(fds[1]);
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
        text.append(buf, std::size_t(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "simulation child failed";
    return text.empty() ? json{{"error", "no output"}} : json::parse(text);
}

json to_json(const Result<sim::RunResult>& r) {
    if (!r)
        return {{"error", r.error().what()}};
    std::vector<double> mem;
    for (const auto& m : r->moves)
        if (m.carried)
            mem.push_back(m.mem_time);
    return {{"makespan", r->makespan},     {"step_end", r->step_end},       {"calls", r->calls},
            {"migrations", r->migrations}, {"policy_time", r->policy_time}, {"mem", mem}};
}

// Set A: one node of 1e9 instructions/s on Fast Ethernet; Set B: `b_nodes`
// nodes of 2e9 on Gigabit. Latencies 100 us per link; Mig 0.5 s; a barrier
// that costs nothing.
sim::PlatformSpec small_platform(unsigned b_nodes = 1) {
    return {.sets = {{"A", 1, 1e9, 12.5e6, 1e-4}, {"B", b_nodes, 2e9, 125e6, 1e-4}},
            .backbone_bandwidth = 125e6,
            .backbone_latency = 1e-4,
            .migration_cost = 0.5,
            .barrier_bytes = 0};
}

// Every process computes `instructions` per superstep; process 0 sends
// `bytes` to process 1.
class TestApp final : public sim::App {
  public:
    TestApp(sim::Proc procs, std::uint64_t steps, double instructions, std::uint64_t bytes,
            std::uint64_t memory)
        : procs_(procs), steps_(steps), instructions_(instructions), bytes_(bytes),
          memory_(memory) {}
    std::string_view name() const override { return "test"; }
    sim::Proc procs() const override { return procs_; }
    std::uint64_t supersteps() const override { return steps_; }
    sim::Step step(std::uint64_t, sim::Proc i) const override {
        sim::Step st;
        st.instructions = instructions_;
        if (bytes_ && i == 0)
            st.sends.push_back({0, 1, bytes_});
        if (bytes_ && i == 1)
            st.recv_count = 1;
        return st;
    }
    std::uint64_t memory_bytes(sim::Proc) const override { return memory_; }

  private:
    sim::Proc procs_;
    std::uint64_t steps_;
    double instructions_;
    std::uint64_t bytes_, memory_;
};

// Test-only policy: moves `proc` to `to` at superstep `at`, charges `cost`
// at every barrier and keeps the last observation.
class ScriptedPolicy final : public balance::Policy {
  public:
    ScriptedPolicy(std::vector<balance::Move> moves, std::uint64_t at, balance::Cost cost = {})
        : moves_(std::move(moves)), at_(at), cost_(cost) {}
    std::string_view name() const override { return "scripted"; }
    balance::Decision at_barrier(const balance::Observation& obs) override {
        last = obs;
        balance::Decision d;
        d.rescheduled = true;
        d.cost = cost_;
        if (obs.superstep == at_)
            d.moves = moves_;
        return d;
    }
    balance::Observation last;

  private:
    std::vector<balance::Move> moves_;
    std::uint64_t at_;
    balance::Cost cost_;
};

balance::Move move(balance::ProcId p, balance::HostId from, balance::HostId to) {
    balance::Move m;
    m.proc = p;
    m.from = from;
    m.to = to;
    m.why = "scripted by the test";
    return m;
}

balance::Cost cost(double instructions, std::uint32_t rounds) {
    balance::Cost c;
    c.instructions = instructions;
    c.rounds = rounds;
    return c;
}

TEST(Sim, SuperstepTimeIsComputationThenTransfer) {
    // Process 0 on A computes 1e9 (1 s), then sends 1 MB to process 1 on B
    // over A's link (12.5 MB/s), A's and B's uplinks and B's link: four
    // links of 100 us.
    json obs;
    auto r = isolated([&] {
        TestApp app(2, 1, 1e9, 1'000'000, 0);
        ScriptedPolicy policy({}, 0);
        sim::RunConfig cfg;
        cfg.scenario = sim::Scenario::ii;
        auto res = sim::run(app, small_platform(), &policy, std::move(cfg));
        json j = to_json(res);
        const auto& o = policy.last;
        j["obs"] = {{"comp0", o.procs[0].comp_time},
                    {"comp1", o.procs[1].comp_time},
                    {"step0", o.procs[0].step_time},
                    {"bytes1", o.procs[1].bytes_from_set},
                    {"recv1", o.procs[1].recv_time_from_set},
                    {"T01", o.net.transfer(0, 1, 2)},
                    {"mig", o.net.migration_cost},
                    {"power1", o.hosts[1].cpu_power},
                    {"managed0", o.hosts[0].managed},
                    {"set1", o.hosts[1].set}};
        return j;
    });
    ASSERT_FALSE(r.contains("error")) << r.dump();
    const double transfer = lv08_latency * 4e-4 + 1e6 / (lv08_bandwidth * 12.5e6);
    EXPECT_NEAR(r["makespan"].get<double>(), 1.0 + transfer, 1e-4);
    const auto& o = r["obs"];
    EXPECT_NEAR(o["comp0"].get<double>(), 1.0, 1e-9);
    EXPECT_NEAR(o["comp1"].get<double>(), 0.5, 1e-9); // B is twice as fast
    EXPECT_NEAR(o["step0"].get<double>(), 1.0 + transfer, 1e-4);
    EXPECT_EQ(o["bytes1"][0].get<double>(), 1e6);
    EXPECT_EQ(o["bytes1"][1].get<double>(), 0.0);
    EXPECT_NEAR(o["recv1"][0].get<double>(), 0.5 + transfer, 1e-4); // blocked from 0.5 s on
    EXPECT_DOUBLE_EQ(o["T01"].get<double>(), 1.0 / 12.5e6);
    EXPECT_EQ(o["mig"].get<double>(), 0.5);
    EXPECT_EQ(o["power1"].get<double>(), 2e9);
    EXPECT_EQ(o["managed0"].get<unsigned>(), 1u);
    EXPECT_EQ(o["set1"].get<unsigned>(), 1u);
}

TEST(Sim, ForcedMigrationPaysMemThenComputesAtTheNewSpeed) {
    // Process 0 (A, 1e9/s) moves to B's second node (2e9/s) after superstep
    // 2 with a 10 MB image: Mem = 10 MB over A's 12.5 MB/s route + 0.5 s.
    auto r = isolated([] {
        TestApp app(2, 4, 1e9, 0, 10'000'000);
        ScriptedPolicy policy({move(0, 0, 2)}, 2);
        sim::RunConfig cfg;
        cfg.scenario = sim::Scenario::iii;
        return to_json(sim::run(app, small_platform(2), &policy, std::move(cfg)));
    });
    ASSERT_FALSE(r.contains("error")) << r.dump();
    const double mem = lv08_latency * 4e-4 + 1e7 / (lv08_bandwidth * 12.5e6) + 0.5;
    const auto end = r["step_end"].get<std::vector<double>>();
    ASSERT_EQ(end.size(), 4u);
    EXPECT_NEAR(end[0], 1.0, 1e-9);
    EXPECT_NEAR(end[1] - end[0], 1.0 + mem, 1e-4); // superstep 2, then the migration
    EXPECT_NEAR(end[2] - end[1], 0.5, 1e-9);       // now at 2e9 instructions/s
    EXPECT_NEAR(end[3] - end[2], 0.5, 1e-9);
    EXPECT_EQ(r["migrations"].get<unsigned>(), 1u);
    EXPECT_NEAR(r["mem"][0].get<double>(), mem, 1e-4);
}

TEST(Sim, ScenarioTwoIsSlowerThanOneByExactlyTheChargedCost) {
    // 3e8 instructions on the deciding host (process 0's, 1e9/s) and two
    // rounds of the A-B route's latency (4 x 100 us) at each of 4 barriers.
    auto once = [](sim::Scenario s) {
        return isolated([s] {
            TestApp app(2, 4, 1e9, 1'000, 0);
            ScriptedPolicy policy({}, 0, cost(3e8, 2));
            sim::RunConfig cfg;
            cfg.scenario = s;
            return to_json(sim::run(app, small_platform(), &policy, std::move(cfg)));
        });
    };
    const json i = once(sim::Scenario::i), ii = once(sim::Scenario::ii);
    ASSERT_FALSE(i.contains("error") || ii.contains("error")) << i.dump() << ii.dump();
    const double charged = 4 * (0.3 + 2 * 4e-4);
    EXPECT_NEAR(ii["makespan"].get<double>() - i["makespan"].get<double>(), charged, 1e-9);
    EXPECT_NEAR(ii["policy_time"].get<double>(), charged, 1e-9);
    EXPECT_EQ(ii["calls"].get<unsigned>(), 4u);
    EXPECT_EQ(i["calls"].get<unsigned>(), 0u);
}

TEST(Sim, ScenarioTwoNeverMigrates) {
    auto r = isolated([] {
        TestApp app(2, 4, 1e9, 0, 10'000'000);
        ScriptedPolicy policy({move(0, 0, 2)}, 2);
        sim::RunConfig cfg;
        cfg.scenario = sim::Scenario::ii;
        return to_json(sim::run(app, small_platform(2), &policy, std::move(cfg)));
    });
    EXPECT_EQ(r["migrations"].get<unsigned>(), 0u);
    EXPECT_NEAR(r["makespan"].get<double>(), 4.0, 1e-9);
}

// Scenario ii, `steps` supersteps of 1e8 instructions on A under the
// --load `load`: the run, and what the policy saw of A at its last call.
json policy_sees(std::uint64_t steps, const std::string& load) {
    return isolated([&] {
        TestApp app(1, steps, 1e8, 0, 0);
        ScriptedPolicy policy({}, 0);
        sim::RunConfig cfg;
        cfg.scenario = sim::Scenario::ii;
        cfg.load = sim::LoadSchedule(2);
        if (!cfg.load.add(load, small_platform()))
            return json{{"error", load + " refused"}};
        json j = to_json(sim::run(app, small_platform(), &policy, std::move(cfg)));
        j["external"] = policy.last.hosts[0].external_load;
        j["load_average"] = policy.last.hosts[0].load_average;
        return j;
    });
}

TEST(Sim, ExternalLoadSlowsTheHostForItsDuration) {
    // A loses half its CPU during the first second, then none: 1e9
    // instructions take 1 s at half speed (0.5e9) + 0.5 s.
    auto r = isolated([] {
        TestApp app(1, 1, 1e9, 0, 0);
        sim::RunConfig cfg;
        cfg.load = sim::LoadSchedule(2);
        cfg.load.set(0, {{0.0, 0.5}, {1.0, 0.0}});
        return to_json(sim::run(app, small_platform(), nullptr, std::move(cfg)));
    });
    ASSERT_FALSE(r.contains("error")) << r.dump();
    EXPECT_NEAR(r["makespan"].get<double>(), 1.5, 1e-6);
    // The policy sees the load in force at the barrier.
    const json seen = policy_sees(1, "0=0.75");
    EXPECT_NEAR(seen["makespan"].get<double>(), 0.4, 1e-9); // 1e8 at a quarter of 1e9
    EXPECT_EQ(seen["external"].get<double>(), 0.75);
    EXPECT_EQ(seen["load_average"].get<double>(), 1.75);
}

TEST(Sim, LoadSetInSuperstepsTakesItsShareFromThatSuperstepOn) {
    // One process of 1e9 instructions per superstep on A (1e9/s): half of
    // A's CPU taken during superstep 2 only, as a hog started and stopped
    // at the barriers around it (bsprun --at-superstep).
    auto r = isolated([] {
        TestApp app(1, 3, 1e9, 0, 0);
        sim::RunConfig cfg;
        cfg.load = sim::LoadSchedule(2);
        if (!cfg.load.add("A=0.5@s2,0@s3", small_platform()))
            return json{{"error", "A=0.5@s2,0@s3 refused"}};
        return to_json(sim::run(app, small_platform(), nullptr, std::move(cfg)));
    });
    ASSERT_FALSE(r.contains("error")) << r.dump();
    const auto end = r["step_end"].get<std::vector<double>>();
    ASSERT_EQ(end.size(), 3u);
    EXPECT_NEAR(end[0], 1.0, 1e-9);
    EXPECT_NEAR(end[1] - end[0], 2.0, 1e-9);
    EXPECT_NEAR(end[2] - end[1], 1.0, 1e-9);
    // The policy sees it as external load in the superstep it is taken.
    const json seen = policy_sees(2, "0=0.75@s1");
    ASSERT_FALSE(seen.contains("error")) << seen.dump();
    EXPECT_NEAR(seen["makespan"].get<double>(), 0.8, 1e-9); // 2 x 1e8 at a quarter of 1e9
    EXPECT_EQ(seen["external"].get<double>(), 0.75);
}

TEST(Sim, LoadSpecificationsNameSetsHostsOrAll) {
    auto spec = small_platform(3);
    sim::LoadSchedule load(4);
    ASSERT_TRUE(load.add("B=0.25@10,0@20", spec));
    EXPECT_EQ(load.at(0, 15.0), 0.0);
    EXPECT_EQ(load.at(2, 15.0), 0.25);
    EXPECT_EQ(load.at(2, 25.0), 0.0);
    EXPECT_EQ(load.at(2, 5.0), 0.0);
    ASSERT_TRUE(load.add("0=0.5", spec));
    EXPECT_EQ(load.at(0, 0.0), 0.5);
    EXPECT_FALSE(load.add("C=0.5", spec));
    EXPECT_FALSE(load.add("all=1.5", spec));
    EXPECT_FALSE(load.add("9=0.5", spec));
    EXPECT_FALSE(load.add("all", spec));
    // In supersteps: from the start of superstep N on; not mixed with seconds.
    ASSERT_TRUE(load.add("1=0.5@s3,0@s5", spec));
    EXPECT_TRUE(load.by_superstep(1));
    EXPECT_EQ(load.at_step(1, 2), 0.0);
    EXPECT_EQ(load.at_step(1, 3), 0.5);
    EXPECT_EQ(load.at_step(1, 4), 0.5);
    EXPECT_EQ(load.at_step(1, 5), 0.0);
    EXPECT_EQ(load.at(1, 100.0), 0.0); // not a load in seconds
    EXPECT_FALSE(load.by_superstep(2));
    EXPECT_FALSE(load.add("1=0.5@s3,0@10", spec));
    EXPECT_FALSE(load.add("1=0.5@s0", spec));
    EXPECT_FALSE(load.add("1=0.5@sx", spec));
}

TEST(Sim, TheTestClusterPlatformIsWhatBsprunTellsItsPolicy) {
    auto spec = sim::cluster_platform(3);
    ASSERT_TRUE(spec.has_value()) << spec.error().what();
    ASSERT_EQ(spec->sets.size(), 3u);
    for (unsigned k = 0; k < 3; ++k) {
        EXPECT_EQ(spec->sets[k].name, "h" + std::to_string(k + 1));
        EXPECT_EQ(spec->sets[k].nodes, 1u);
        EXPECT_EQ(spec->sets[k].speed, 1e9);            // bsprun's nominal power
        EXPECT_EQ(spec->sets[k].link_bandwidth, 100e6); // its byte_time
    }
    EXPECT_EQ(spec->migration_cost, 0.2);
    EXPECT_FALSE(sim::cluster_platform(0).has_value());
    // Two VPs of 0.1 CPU seconds per superstep, VP 1 on h2 with 20% of its
    // CPU (80% external load): each superstep waits 0.5 s for VP 1.
    auto r = isolated([] {
        TestApp app(2, 2, 0.1 * sim::kReplayPower, 0, 0);
        auto spec = *sim::cluster_platform(3);
        spec.barrier_bytes = 0;
        sim::RunConfig cfg;
        cfg.load = sim::LoadSchedule(3);
        if (!cfg.load.add("h2=0.8", spec))
            return json{{"error", "h2=0.8 refused"}};
        return to_json(sim::run(app, spec, nullptr, std::move(cfg)));
    });
    ASSERT_FALSE(r.contains("error")) << r.dump();
    EXPECT_NEAR(r["makespan"].get<double>(), 1.0, 1e-9);
}

TEST(Sim, TwoRunsGiveTheSameTimes) {
    // LBM on MigBSP's platform, Corisco's five processes moved to Aquario.
    auto once = [] {
        return isolated([] {
            auto app = sim::make_app({"lbm", 8, 25, 1});
            std::vector<balance::Move> moves;
            for (balance::ProcId p = 20; p < 25; ++p)
                moves.push_back(move(p, p, 154 + p - 20));
            ScriptedPolicy policy(moves, 3);
            sim::RunConfig cfg;
            cfg.scenario = sim::Scenario::iii;
            return to_json(sim::run(**app, *sim::migbsp_platform(), &policy, std::move(cfg)));
        });
    };
    const json a = once(), b = once();
    ASSERT_FALSE(a.contains("error")) << a.dump();
    EXPECT_EQ(a["makespan"], b["makespan"]);
    EXPECT_EQ(a["step_end"], b["step_end"]);
    EXPECT_EQ(a["migrations"].get<unsigned>(), 5u);
}

TEST(Sim, PlatformScalesToTheRequestedHostCount) {
    auto table = sim::migbsp_platform();
    ASSERT_TRUE(table);
    unsigned total = 0;
    for (const auto& s : table->sets)
        total += s.nodes;
    EXPECT_EQ(total, 174u);
    EXPECT_EQ(table->sets.at(4).name, "Aquario");
    for (unsigned hosts : {5u, 1000u, 10'000u}) {
        auto spec = sim::migbsp_platform(hosts);
        ASSERT_TRUE(spec);
        unsigned sum = 0;
        for (const auto& s : spec->sets) {
            EXPECT_GE(s.nodes, 1u);
            sum += s.nodes;
        }
        EXPECT_EQ(sum, hosts);
    }
    EXPECT_FALSE(sim::migbsp_platform(3));
    // A small LBM on 1000 hosts runs; the mapping wraps past the last host.
    auto r = isolated([] {
        auto app = sim::make_app({"lbm", 2, 2500, 1});
        return to_json(sim::run(**app, *sim::migbsp_platform(1000), nullptr, sim::RunConfig()));
    });
    ASSERT_FALSE(r.contains("error")) << r.dump();
    EXPECT_GT(r["makespan"].get<double>(), 0.0);
}

TEST(Sim, TraceWritesCallsAndMovesInSuperstepOrder) {
    const auto spec = small_platform(2);
    sim::TraceWriter trace(spec);
    balance::Observation obs;
    balance::Decision quiet, busy;
    obs.superstep = 3;
    trace.call(obs, quiet); // nothing decided: no line
    busy.rescheduled = true;
    busy.figures = {{"alpha", 8}};
    busy.cost = cost(1e6, 1);
    obs.superstep = 4;
    trace.call(obs, busy);
    sim::RunResult result;
    auto m = move(0, 0, 2);
    m.figures = {{"PM(0,B)", 1.5}};
    result.moves.push_back({4, m, true, 0.9});
    const std::string path = ::testing::TempDir() + "/sim-trace.jsonl";
    ASSERT_TRUE(trace.write(path, result));
    std::ifstream in(path);
    std::vector<json> lines;
    for (std::string line; std::getline(in, line);)
        lines.push_back(json::parse(line));
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0]["kind"], "call");
    EXPECT_EQ(lines[0]["superstep"], 4);
    EXPECT_EQ(lines[0]["figures"]["alpha"], 8);
    EXPECT_EQ(lines[0]["cost"]["rounds"], 1);
    EXPECT_EQ(lines[1]["kind"], "move");
    EXPECT_EQ(lines[1]["from_set"], "A");
    EXPECT_EQ(lines[1]["to_set"], "B");
    EXPECT_EQ(lines[1]["carried"], true);
    EXPECT_EQ(lines[1]["mem_time"], 0.9);
    EXPECT_EQ(lines[1]["why"], "scripted by the test");
    EXPECT_EQ(lines[1]["figures"]["PM(0,B)"], 1.5);
    EXPECT_FALSE(trace.write("/nonexistent-dir/x.jsonl", result));
}

} // namespace
