// SPDX-License-Identifier: GPL-2.0
// The "ghost" policy on small clusters worked by hand: which process moves
// where, when a batch pays for itself, free processors, stability over many
// barriers, what its protocol costs, and the fit of visible.hpp. Processes
// not started or stopped, the payback and the reports: balance_ghost_demand_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include <ghost/balance/policy.hpp>

#include "balance_ghost_cluster.hpp"
#include "ghost/ghost.hpp"
#include "ghost/visible.hpp"

using namespace ghost::balance;
using namespace ghost_test;

namespace {

// Set 0: h0, h1 at 1 GHz, h2 at 0.5 GHz; Set 1: h3, h4 at 2 GHz, free.
Cluster slow_third() {
    return Cluster({host(0, 1e9), host(0, 1e9), host(0, 0.5e9), host(1, 2e9), host(1, 2e9)},
                   {0, 1, 2}, {1e9, 1e9, 1e9});
}

} // namespace

TEST(BalanceGhost, IsRegistered) {
    const auto names = policy_names();
    EXPECT_NE(std::find(names.begin(), names.end(), "ghost"), names.end());
    EXPECT_EQ(make_ghost()->name(), "ghost");
    EXPECT_TRUE(make_policy("ghost", {}).has_value());
}

TEST(BalanceGhost, CriticalProcessMovesToTheFastestFreeHost) {
    // p2 takes 2 s on h2, 0.5 s on h3 or h4 (h3: the lower id); p0 and p1
    // then bound the superstep at 1 s, and moving one of them alone would
    // not shorten it: one move, 2 s -> 1 s. Its batch costs 10 MB x 1e-8 +
    // 0.5 = 0.6 s, below 1 s x 1 superstep of horizon: carried out at once.
    Cluster c = slow_third();
    auto policy = make_ghost();
    EXPECT_DOUBLE_EQ(c.step(), 2.0);
    const Decision d = policy->at_barrier(c.obs);
    EXPECT_TRUE(d.rescheduled);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(d.moves[0].proc, 2u);
    EXPECT_EQ(d.moves[0].from, 2u);
    EXPECT_EQ(d.moves[0].to, 3u);
    EXPECT_DOUBLE_EQ(figure(d, "step"), 2.0);
    EXPECT_DOUBLE_EQ(figure(d, "step after"), 1.0);
    EXPECT_DOUBLE_EQ(figure(d, "batch"), 0.6);
    EXPECT_DOUBLE_EQ(figure(d, "saving"), 1.0);
    EXPECT_TRUE(d.withheld.empty());
}

TEST(BalanceGhost, ScenarioTwoWithholdsTheSameMove) {
    Cluster c = slow_third();
    auto policy = make_ghost(false);
    c.step();
    const Decision d = policy->at_barrier(c.obs);
    EXPECT_TRUE(d.moves.empty());
    ASSERT_EQ(d.withheld.size(), 1u);
    EXPECT_EQ(d.withheld[0].proc, 2u);
    EXPECT_EQ(d.withheld[0].to, 3u);
}

TEST(BalanceGhost, RefusesABatchUntilTheHorizonPaysForIt) {
    // A 1 GB image: 10 s + 0.5 s to move, 1 s saved per superstep. The
    // horizon is the supersteps done so far: refused through superstep 10
    // (10 s < 10.5 s), carried out at superstep 11.
    Cluster c({host(0, 1e9), host(0, 1e9), host(0, 0.5e9), host(1, 2e9), host(1, 2e9)}, {0, 1, 2},
              {1e9, 1e9, 1e9}, 1'000'000'000);
    auto policy = make_ghost();
    for (int s = 1; s <= 10; ++s) {
        c.step();
        const Decision d = policy->at_barrier(c.obs);
        EXPECT_TRUE(d.rescheduled) << s;
        EXPECT_TRUE(d.moves.empty()) << s;
        EXPECT_DOUBLE_EQ(figure(d, "batch"), 10.5);
        EXPECT_DOUBLE_EQ(figure(d, "saving"), double(s));
    }
    c.step();
    const Decision d = policy->at_barrier(c.obs);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(d.moves[0].proc, 2u);
}

TEST(BalanceGhost, BalancedClusterMovesNothingAndCallsLessOften) {
    // Every host equal and occupied: no move, and the interval between
    // calls doubles (1, 2, 4, 8...) up to 64.
    Cluster c({host(0, 1e9), host(0, 1e9), host(1, 1e9), host(1, 1e9)}, {0, 1, 2, 3},
              {1e9, 1e9, 1e9, 1e9});
    auto policy = make_ghost();
    std::vector<std::uint64_t> calls;
    for (int s = 1; s <= 200; ++s) {
        c.step();
        const Decision d = policy->at_barrier(c.obs);
        EXPECT_TRUE(d.moves.empty());
        EXPECT_TRUE(d.withheld.empty());
        if (d.rescheduled)
            calls.push_back(c.obs.superstep);
    }
    const std::vector<std::uint64_t> expected = {1, 3, 7, 15, 31, 63, 127, 191};
    EXPECT_EQ(calls, expected);
}

TEST(BalanceGhost, NoMoveBackAndForthOverManyBarriers) {
    // Carrying the moves out in the model: one migration in 300 barriers,
    // and the superstep stays at 1 s after it.
    Cluster c = slow_third();
    auto policy = make_ghost();
    unsigned moves = 0;
    for (int s = 1; s <= 300; ++s) {
        const double len = c.step();
        if (s > 1) {
            EXPECT_DOUBLE_EQ(len, 1.0) << s;
        }
        const Decision d = policy->at_barrier(c.obs);
        moves += unsigned(d.moves.size());
        c.apply(d);
    }
    EXPECT_EQ(moves, 1u);
    EXPECT_EQ(c.obs.procs[2].host, 3u);
}

TEST(BalanceGhost, RespectsFreeProcessorsAndAvailability) {
    // Three processes on 0.5 GHz hosts; h3 (2 GHz) has two processors, h4
    // is faster but unavailable. p2 has half the work (1 s at home): p0 and
    // p1 (2 s) both go to h3 (0.5 s), none to h4, and the superstep drops
    // to p2's 1 s.
    Cluster c({host(0, 0.5e9), host(0, 0.5e9), host(0, 0.5e9), host(1, 2e9, 2), host(1, 4e9)},
              {0, 1, 2}, {1e9, 1e9, 0.5e9});
    c.obs.hosts[4].available = false;
    auto policy = make_ghost();
    c.step();
    const Decision d = policy->at_barrier(c.obs);
    ASSERT_EQ(d.moves.size(), 2u);
    for (const Move& m : d.moves)
        EXPECT_EQ(m.to, 3u);
    EXPECT_EQ(d.moves[0].proc, 0u);
    EXPECT_EQ(d.moves[1].proc, 1u);
    EXPECT_DOUBLE_EQ(figure(d, "step after"), 1.0);

    // With one processor on h3 only one can go: p0 or p1 would still take
    // 2 s, nothing is gained, nothing moves.
    c.obs.hosts[3].processors = 1;
    auto again = make_ghost();
    const Decision one = again->at_barrier(c.obs);
    EXPECT_TRUE(one.moves.empty());
    EXPECT_DOUBLE_EQ(figure(one, "step after"), 2.0);
}

TEST(BalanceGhost, CostIsChargedAndGrowsWithTheCluster) {
    // A call on n hosts and n processes of 2 Sets, no move: each process's
    // demand (2 + 2 numbers and a host id: 36 bytes) and each host's load
    // (12 bytes): 48 n bytes, one message per Set, no extra round. A barrier
    // without a call only keeps the books: instructions, no byte.
    for (std::size_t n : {4u, 40u, 400u}) {
        std::vector<Host> hosts;
        std::vector<HostId> where;
        for (std::size_t h = 0; h < n; ++h) {
            hosts.push_back(host(h % 2 ? 1 : 0, 1e9));
            where.push_back(HostId(h));
        }
        Cluster c(hosts, where, std::vector<double>(n, 1e9));
        auto policy = make_ghost();
        c.step();
        const Decision call = policy->at_barrier(c.obs);
        ASSERT_TRUE(call.rescheduled);
        EXPECT_EQ(call.cost.bytes, 48u * n) << n;
        EXPECT_EQ(call.cost.messages, 2u);
        EXPECT_EQ(call.cost.rounds, 0u);
        EXPECT_GT(call.cost.instructions, 20.0 * double(n));
        c.step();
        const Decision quiet = policy->at_barrier(c.obs); // superstep 2: next call at 3
        EXPECT_FALSE(quiet.rescheduled);
        EXPECT_EQ(quiet.cost.bytes, 0u);
        EXPECT_DOUBLE_EQ(quiet.cost.instructions, 30.0); // 10 x (1 + 2 Sets)
    }
}

TEST(BalanceGhost, SameInputsSameDecisions) {
    Cluster a = slow_third(), b = slow_third();
    auto pa = make_ghost(), pb = make_ghost();
    for (int s = 1; s <= 20; ++s) {
        a.step();
        b.step();
        const Decision da = pa->at_barrier(a.obs), db = pb->at_barrier(b.obs);
        ASSERT_EQ(da.moves.size(), db.moves.size());
        for (std::size_t k = 0; k < da.moves.size(); ++k) {
            EXPECT_EQ(da.moves[k].proc, db.moves[k].proc);
            EXPECT_EQ(da.moves[k].to, db.moves[k].to);
            EXPECT_EQ(da.moves[k].why, db.moves[k].why);
        }
        ASSERT_EQ(da.figures.size(), db.figures.size());
        for (std::size_t k = 0; k < da.figures.size(); ++k)
            EXPECT_EQ(da.figures[k].value, db.figures[k].value);
        a.apply(da);
        b.apply(db);
    }
}

TEST(BalanceGhost, VisibilityIsTheSlopeOfLengthOverSlowest) {
    using ghost::balance::ghost_policy::Visibility;
    Visibility hidden(0.98), shown(0.98), steady(0.98);
    for (int s = 0; s < 50; ++s) {
        const double slowest = s % 2 ? 0.004 : 0.001; // LU's heavy and light supersteps
        hidden.observe(slowest, 0.010);               // a barrier floor hides it
        shown.observe(slowest, slowest + 0.006);      // an additive barrier shows it
        steady.observe(0.3, 0.35);                    // regular: no slope to fit
    }
    EXPECT_NEAR(hidden.slope(), 0.0, 1e-9);
    EXPECT_NEAR(shown.slope(), 1.0, 1e-9);
    EXPECT_DOUBLE_EQ(steady.slope(), 1.0);
}

TEST(BalanceGhost, RefusesTuningOutOfRange) {
    namespace gp = ghost::balance::ghost_policy;
    gp::Tuning t;
    t.margin = 1.0;
    EXPECT_FALSE(gp::make({}, t).has_value());
    t = {};
    t.window = 0;
    EXPECT_FALSE(gp::make({}, t).has_value());
    t = {};
    t.budget = 0.0;
    EXPECT_FALSE(gp::make({}, t).has_value());
    t = {};
    t.payback = 0.0;
    EXPECT_FALSE(gp::make({}, t).has_value());
    t = {};
    t.resend = t.margin; // a stale demand could hide a whole margin
    EXPECT_FALSE(gp::make({}, t).has_value());
}

TEST(BalanceGhost, SplitsProcessesSharingOneProcessor) {
    // p0 and p1 share h0's one processor (2 s each); h1, as fast, is free:
    // p0 moves there and both take 1 s.
    Cluster c({host(0, 1e9), host(0, 1e9)}, {0, 0}, {1e9, 1e9});
    auto policy = make_ghost();
    EXPECT_DOUBLE_EQ(c.step(), 2.0);
    const Decision d = policy->at_barrier(c.obs);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(d.moves[0].proc, 0u);
    EXPECT_EQ(d.moves[0].to, 1u);
    EXPECT_DOUBLE_EQ(figure(d, "step after"), 1.0);
}
