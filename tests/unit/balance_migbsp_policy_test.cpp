// SPDX-License-Identifier: GPL-2.0
// The "migbsp" policy through make_policy(): when it calls, which process
// moves where, what it withholds in scenario ii and what its protocol costs,
// on small clusters worked by hand.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <ghost/balance/policy.hpp>

using namespace ghost::balance;

namespace {

Host host(SetId set, double cpu) {
    Host h;
    h.set = set;
    h.cpu_power = cpu;
    return h;
}

Process proc(HostId on, double instructions, double seconds) {
    Process p;
    p.host = on;
    p.instructions = instructions;
    p.comp_time = seconds;
    p.step_time = seconds;
    p.memory_bytes = 10'000'000;
    p.bytes_from_set = {0, 0};
    p.recv_time_from_set = {0, 0};
    return p;
}

Network net() {
    Network n;
    n.byte_time = {1e-8, 1e-8, 1e-8, 1e-9}; // 100 MB/s, 1 GB/s inside Set 1
    n.migration_cost = 0.5;
    return n;
}

// Set 0 (slow, 1e9/s): hosts 0, 1. Set 1 (fast, 2e9/s): hosts 2, 3, 4.
// Process 0 on host 0 is the busiest (2e9 instructions, 2 s), process 1 on
// host 1 does 1e9 (1 s), processes 2 and 3 on hosts 2, 3 take 0.5 s; host
// 4 is free. Times 2, 1, 0.5, 0.5: average 1, 2 < 1.5 fails: unbalanced.
//   PM(0,1) = 1*2*2 - (1e7*1e-8 + 0.5) = 3.4, PM(0,0) = 2 - 0.6 = 1.4
//   PM(1,1) = 2 - 0.6 = 1.4, PM(2,1) = PM(3,1) = 0.5 - 0.51 = -0.01
// x 0.8: only process 0 (3.4 > 2.72). Host 4: time(p) = 2e9/2e9 = 1,
// t1 = 1 + 0 + 0.6 = 1.6 < t2 = time(host 0) = 2e9/1e9 = 2: it moves.
Observation unbalanced() {
    Observation o;
    o.sets = 2;
    o.hosts = {host(0, 1e9), host(0, 1e9), host(1, 2e9), host(1, 2e9), host(1, 2e9)};
    o.procs = {proc(0, 2e9, 2), proc(1, 1e9, 1), proc(2, 1e9, 0.5), proc(3, 1e9, 0.5)};
    o.net = net();
    return o;
}

// Two Sets of equal hosts (1e9/s), one process per host, host 4 free in
// Set 1. Everyone takes 1 s: balanced. Every PM is positive (1 - 0.6 or
// 1 - 0.51) but no move pays: Set 0 has no free processor and for Set 1,
// t1 = 1 + 0.51 = 1.51 > t2 = 1.
Observation balanced() {
    Observation o;
    o.sets = 2;
    o.hosts = {host(0, 1e9), host(0, 1e9), host(1, 1e9), host(1, 1e9), host(1, 1e9)};
    o.procs = {proc(0, 1e9, 1), proc(1, 1e9, 1), proc(2, 1e9, 1), proc(3, 1e9, 1)};
    o.net = net();
    return o;
}

std::unique_ptr<Policy> migbsp(Params p = {}) {
    auto r = make_policy("migbsp", p);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().what());
    return std::move(r).value();
}

double figure(const std::vector<Figure>& figures, const std::string& name) {
    for (const Figure& f : figures)
        if (f.name == name)
            return f.value;
    ADD_FAILURE() << "no figure " << name;
    return -1;
}

Decision run(Policy& policy, Observation o, std::uint64_t superstep) {
    o.superstep = superstep;
    return policy.at_barrier(o);
}

} // namespace

TEST(MigBSP, IsRegisteredAndRefusesParametersOutOfRange) {
    bool listed = false;
    for (auto n : policy_names())
        listed = listed || n == "migbsp";
    EXPECT_TRUE(listed);
    EXPECT_EQ(migbsp()->name(), "migbsp");
    Params p;
    p.alpha = 0;
    auto r = make_policy("migbsp", p);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().what().find("alpha"), std::string::npos) << r.error().what();
    p = {};
    p.distance = 1.5;
    r = make_policy("migbsp", p);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().what().find("D = 1.5"), std::string::npos) << r.error().what();
}

TEST(MigBSP, PolicyAlphaGoesFrom10To20AndCallsOnlyAtTheWindowsEnd) {
    Params p;
    p.alpha = 10;
    auto policy = migbsp(p);
    for (std::uint64_t t = 1; t <= 10; ++t) {
        const Decision d = run(*policy, balanced(), t);
        EXPECT_EQ(d.rescheduled, t == 10) << "superstep " << t;
        if (t < 10) {
            EXPECT_EQ(d.cost.messages, 0U); // between calls: local bookkeeping only
        }
    }
    const Decision d = run(*policy, balanced(), 11);
    EXPECT_DOUBLE_EQ(figure(d.figures, "alpha"), 20);
    EXPECT_DOUBLE_EQ(figure(d.figures, "alpha'"), 21);
}

TEST(MigBSP, StableSystemCallsAtTheSmithWatermanSupersteps) {
    // §5.2.2: alpha 2 on a stable system calls at supersteps 2, 6, 14, 30, 62.
    Params p;
    p.alpha = 2;
    auto policy = migbsp(p);
    std::vector<std::uint64_t> calls;
    for (std::uint64_t t = 1; t <= 70; ++t)
        if (run(*policy, balanced(), t).rescheduled)
            calls.push_back(t);
    EXPECT_EQ(calls, (std::vector<std::uint64_t>{2, 6, 14, 30, 62}));
}

TEST(MigBSP, SlowSetsBusiestRegularProcessMovesToTheFastSet) {
    Params p;
    p.alpha = 2;
    auto policy = migbsp(p);
    EXPECT_FALSE(run(*policy, unbalanced(), 1).rescheduled);
    const Decision d = run(*policy, unbalanced(), 2);
    ASSERT_TRUE(d.rescheduled);
    ASSERT_EQ(d.moves.size(), 1U);
    EXPECT_TRUE(d.withheld.empty());
    const Move& m = d.moves[0];
    EXPECT_EQ(m.proc, 0U);
    EXPECT_EQ(m.from, 0U);
    EXPECT_EQ(m.to, 4U);
    EXPECT_DOUBLE_EQ(figure(m.figures, "PM"), 3.4);
    EXPECT_DOUBLE_EQ(figure(m.figures, "Comp"), 4.0);
    EXPECT_DOUBLE_EQ(figure(m.figures, "Comm"), 0.0);
    EXPECT_DOUBLE_EQ(figure(m.figures, "Mem"), 0.6);
    EXPECT_DOUBLE_EQ(figure(m.figures, "time(p)"), 1.0);
    EXPECT_DOUBLE_EQ(figure(m.figures, "time(p')"), 2.0);
    EXPECT_DOUBLE_EQ(figure(m.figures, "t1"), 1.6);
    EXPECT_DOUBLE_EQ(figure(m.figures, "t2"), 2.0);
    EXPECT_NE(m.why.find("PM(0, Set 1) = 3.4"), std::string::npos) << m.why;
    EXPECT_NE(m.why.find("the highest PM, and on host 4 t1 = 1.6 s"), std::string::npos) << m.why;
    // Unbalanced: alpha stays 2; it migrated: gamma 0, D unchanged.
    EXPECT_DOUBLE_EQ(figure(d.figures, "alpha"), 2);
    EXPECT_DOUBLE_EQ(figure(d.figures, "D"), 0.5);
    EXPECT_DOUBLE_EQ(figure(d.figures, "gamma"), 0);
}

TEST(MigBSP, BalancedClusterMovesNothing) {
    Params p;
    p.alpha = 2;
    auto policy = migbsp(p);
    run(*policy, balanced(), 1);
    const Decision d = run(*policy, balanced(), 2);
    ASSERT_TRUE(d.rescheduled);
    EXPECT_TRUE(d.moves.empty());
    EXPECT_TRUE(d.withheld.empty());
    EXPECT_DOUBLE_EQ(figure(d.figures, "candidates"), 4); // 0.49, 0.49, 0.4, 0.4 > 0.392
    EXPECT_DOUBLE_EQ(figure(d.figures, "refused"), 4);
    EXPECT_DOUBLE_EQ(figure(d.figures, "alpha"), 4);
    EXPECT_DOUBLE_EQ(figure(d.figures, "gamma"), 1);
}

TEST(MigBSP, FreeProcessorsLimitAndT1NotBelowT2Refuse) {
    // x 0.4: processes 0 (3.4) and 1 (1.4 > 1.36) are candidates for Set 1.
    Params p;
    p.alpha = 2;
    p.x = 0.4;
    auto policy = migbsp(p);
    run(*policy, unbalanced(), 1);
    Decision d = run(*policy, unbalanced(), 2);
    ASSERT_EQ(d.moves.size(), 1U); // host 4 taken by process 0: none left
    EXPECT_EQ(d.moves[0].proc, 0U);
    EXPECT_DOUBLE_EQ(figure(d.figures, "candidates"), 2);
    EXPECT_DOUBLE_EQ(figure(d.figures, "refused"), 1);

    // A second free host (5) in Set 1: process 1 could go, but time(p) =
    // 1e9/2e9 = 0.5, t1 = 0.5 + 0.6 = 1.1 >= t2 = 1: refused all the same.
    Observation o = unbalanced();
    o.hosts.push_back(host(1, 2e9));
    policy = migbsp(p);
    run(*policy, o, 1);
    d = run(*policy, o, 2);
    ASSERT_EQ(d.moves.size(), 1U);
    EXPECT_EQ(d.moves[0].proc, 0U);
    EXPECT_DOUBLE_EQ(figure(d.figures, "refused"), 1);

    // Top-1: only process 0 is a candidate.
    p.top_one = true;
    policy = migbsp(p);
    run(*policy, o, 1);
    d = run(*policy, o, 2);
    EXPECT_DOUBLE_EQ(figure(d.figures, "candidates"), 1);
}

TEST(MigBSP, ScenarioIiWithholdsTheMovesAndGrowsD) {
    Params p;
    p.alpha = 2;
    p.migrate = false;
    auto policy = migbsp(p);
    Decision d;
    for (std::uint64_t t = 1; t <= 6; ++t) {
        d = run(*policy, unbalanced(), t);
        if (t == 2) {
            EXPECT_TRUE(d.moves.empty());
            ASSERT_EQ(d.withheld.size(), 1U);
            EXPECT_EQ(d.withheld[0].to, 4U);
            EXPECT_DOUBLE_EQ(figure(d.figures, "gamma"), 1);
            EXPECT_DOUBLE_EQ(figure(d.figures, "D"), 0.5);
        }
    }
    // Calls at 2, 4 and 6 (alpha stays 2), none migrated: gamma 3 = omega,
    // D = 0.5 + 0.25.
    EXPECT_TRUE(d.rescheduled);
    EXPECT_DOUBLE_EQ(figure(d.figures, "gamma"), 3);
    EXPECT_DOUBLE_EQ(figure(d.figures, "D"), 0.75);

    // Scenario iii on the same observations migrates at every call: D stays.
    p.migrate = true;
    policy = migbsp(p);
    for (std::uint64_t t = 1; t <= 6; ++t)
        d = run(*policy, unbalanced(), t);
    EXPECT_EQ(d.moves.size(), 1U);
    EXPECT_DOUBLE_EQ(figure(d.figures, "gamma"), 0);
    EXPECT_DOUBLE_EQ(figure(d.figures, "D"), 0.5);
}

TEST(MigBSP, CostCountsTheProtocolsMessagesAndScalesWithProcsAndSets) {
    Params p;
    p.alpha = 2;
    auto policy = migbsp(p);
    const Decision between = run(*policy, unbalanced(), 1);
    EXPECT_EQ(between.cost.messages, 0U);
    EXPECT_EQ(between.cost.rounds, 0U);
    EXPECT_DOUBLE_EQ(between.cost.instructions, 100); // 10 * (3 + 3*2 + 1)
    const Decision d = run(*policy, unbalanced(), 2);
    // 2 managers, 4 processes, window 2, positive PMs 2 in Set 0, 1 remote
    // request: capacities 2 x 8 B, ISet 4 x 16 B, times and PM 4 x 32 B,
    // aggregates and PMs (56 + 32) + 56 B, request and answer 32 + 12 B.
    EXPECT_EQ(d.cost.messages, 2U + 4 + 4 + 2 + 2);
    EXPECT_EQ(d.cost.bytes, 16U + 64 + 128 + 144 + 44);
    EXPECT_EQ(d.cost.rounds, 6U);

    // Four Sets of two hosts, eight processes: more of everything.
    Observation big;
    big.sets = 4;
    for (SetId s = 0; s < 4; ++s)
        for (int h = 0; h < 2; ++h)
            big.hosts.push_back(host(s, 1e9));
    for (HostId h = 0; h < 8; ++h) {
        big.procs.push_back(proc(h, 1e9, 1));
        big.procs.back().bytes_from_set.assign(4, 0);
        big.procs.back().recv_time_from_set.assign(4, 0);
    }
    big.net.byte_time.assign(16, 1e-8);
    big.net.migration_cost = 0.5;
    auto large = migbsp(p);
    run(*large, big, 1);
    const Decision b = run(*large, big, 2);
    ASSERT_TRUE(b.rescheduled);
    // Every PM is 1 - 0.6 (ties go to Set 0): eight candidates, the six of
    // Sets 1-3 ask Set 0's manager (which has no free processor to offer).
    EXPECT_EQ(b.cost.messages, 12U + 8 + 8 + 12 + 2 * 6);
    EXPECT_GT(b.cost.bytes, d.cost.bytes);
    EXPECT_GT(b.cost.instructions, d.cost.instructions);
}

TEST(MigBSP, SameInputsAndSeedGiveTheSameDecisions) {
    Params p;
    p.alpha = 2;
    p.x = 0.3;
    p.seed = 7;
    auto a = migbsp(p);
    auto b = migbsp(p);
    std::size_t moved = 0;
    for (std::uint64_t t = 1; t <= 40; ++t) {
        Observation o = unbalanced();
        o.hosts.push_back(host(1, 3e9));
        for (std::size_t i = 0; i < o.procs.size(); ++i) {
            const double f = 1.0 + 0.1 * static_cast<double>((t * 7 + i * 3) % 5);
            o.procs[i].instructions *= f;
            o.procs[i].comp_time *= f;
            o.procs[i].step_time *= f;
        }
        const Decision x = a->at_barrier(o);
        const Decision y = b->at_barrier(o);
        ASSERT_EQ(x.rescheduled, y.rescheduled);
        ASSERT_EQ(x.moves.size(), y.moves.size());
        moved += x.moves.size();
        for (std::size_t m = 0; m < x.moves.size(); ++m) {
            EXPECT_EQ(x.moves[m].proc, y.moves[m].proc);
            EXPECT_EQ(x.moves[m].to, y.moves[m].to);
            EXPECT_EQ(x.moves[m].why, y.moves[m].why);
        }
        ASSERT_EQ(x.figures.size(), y.figures.size());
        for (std::size_t f = 0; f < x.figures.size(); ++f)
            EXPECT_EQ(x.figures[f].value, y.figures[f].value) << x.figures[f].name;
        EXPECT_EQ(x.cost.bytes, y.cost.bytes);
        EXPECT_EQ(x.cost.instructions, y.cost.instructions);
    }
    EXPECT_GT(moved, 0U); // the comparison covered real moves
}

// Three one-host Sets of equal power 1e9/s: host 0 runs process 0 (1 s),
// host 1 runs process 1 under 80% external load (1e9 instructions in 5 s),
// host 2 is free. PM(1, Set 0) = PM(1, Set 2) (equal hosts); Set 0 is full
// and would refuse it, so the tie goes to Set 2: t1 = 1 + (1e7 * 1e-8 +
// 0.5) = 1.6 s < t2 = 5 s. (Before this reading the tie went to Set 0 by
// its lower id and the process never moved.)
TEST(MigBSP, EqualSetsTieGoesToTheOneWithAFreeProcessor) {
    Observation o;
    o.sets = 3;
    o.hosts = {host(0, 1e9), host(1, 1e9), host(2, 1e9)};
    o.hosts[1].external_load = 0.8;
    o.procs = {proc(0, 1e9, 1), proc(1, 1e9, 5)};
    for (Process& p : o.procs) {
        p.bytes_from_set = {0, 0, 0};
        p.recv_time_from_set = {0, 0, 0};
    }
    o.net.byte_time = {0, 1e-8, 1e-8, 1e-8, 0, 1e-8, 1e-8, 1e-8, 0};
    o.net.migration_cost = 0.5;
    Params p;
    p.alpha = 2;
    auto policy = migbsp(p);
    EXPECT_FALSE(run(*policy, o, 1).rescheduled);
    const Decision d = run(*policy, o, 2);
    ASSERT_TRUE(d.rescheduled);
    ASSERT_EQ(d.moves.size(), 1U);
    EXPECT_EQ(d.moves[0].proc, 1U);
    EXPECT_EQ(d.moves[0].to, 2U);
    EXPECT_DOUBLE_EQ(figure(d.moves[0].figures, "t1"), 1.6);
    EXPECT_DOUBLE_EQ(figure(d.moves[0].figures, "t2"), 5.0);
}
