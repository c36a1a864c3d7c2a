// SPDX-License-Identifier: GPL-2.0
// The Charm++ baselines, GreedyLB and RefineLB, on clusters worked by hand.
#include "balance_cluster.hpp"

using namespace balance_test;

namespace {

// Processes of the given instruction counts on the given hosts; every host
// has power 1 and no external load unless the test changes it.
Observation work(unsigned hosts, const std::vector<std::pair<HostId, double>>& procs) {
    auto obs = cluster(std::vector<double>(hosts, 0.0), {});
    for (auto [h, w] : procs) {
        Process p;
        p.host = h;
        p.instructions = w;
        obs.procs.push_back(p);
        ++obs.hosts[h].managed;
    }
    return obs;
}

} // namespace

TEST(BalanceGreedy, PlacesHeaviestFirstWhereItFinishesEarliest) {
    // Loads 4, 3, 2, 1 all on host 0 of two equal hosts: 4 stays (a tie
    // keeps it home), 3 -> host 1 (3 < 7), 2 -> host 1 (5 < 6), 1 stays
    // (5 < 6). Finish times 5 and 5, down from 10.
    const auto obs = work(2, {{0, 4}, {0, 3}, {0, 2}, {0, 1}});
    const auto d = policy("greedy")->at_barrier(obs);
    ASSERT_EQ(d.moves.size(), 2u);
    EXPECT_EQ(moves_of(d.moves)[0], std::make_tuple(1u, 0u, 1u));
    EXPECT_EQ(moves_of(d.moves)[1], std::make_tuple(2u, 0u, 1u));
    EXPECT_DOUBLE_EQ(figure(d.figures, "makespan before"), 10.0);
    EXPECT_DOUBLE_EQ(figure(d.figures, "makespan after"), 5.0);
    EXPECT_DOUBLE_EQ(figure(d.moves[1].figures, "finish(to)"), 5.0);
}

TEST(BalanceGreedy, ExternalLoadSlowsAHost) {
    // Host 1 at external load 0.5 has speed 0.5: 4 -> host 0 (4 < 8),
    // 3 -> host 1 (6 < 7), 2 -> host 0 (6 < 10), 1 -> host 0 (7 < 8).
    auto obs = work(2, {{0, 4}, {0, 3}, {0, 2}, {0, 1}});
    obs.hosts[1].external_load = 0.5;
    const auto d = policy("greedy")->at_barrier(obs);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(moves_of(d.moves)[0], std::make_tuple(1u, 0u, 1u));
    EXPECT_DOUBLE_EQ(figure(d.figures, "makespan after"), 7.0);
}

TEST(BalanceGreedy, ABalancedPlacementStays) {
    auto obs = work(2, {{0, 4}, {1, 3}, {1, 2}, {0, 1}});
    EXPECT_TRUE(policy("greedy")->at_barrier(obs).moves.empty());
    obs.hosts[1].available = false; // host 1 may not receive: everything to host 0
    const auto d = policy("greedy")->at_barrier(obs);
    EXPECT_EQ(d.moves.size(), 2u);
    for (const auto& m : d.moves)
        EXPECT_EQ(m.to, 0u);
}

TEST(BalanceGreedy, TiesKeepAProcessAtHome) {
    // Two equal processes on two equal hosts, process 0 on host 1: every
    // choice is a tie, and a tie keeps each process where it is, so greedy
    // does not swap them.
    const auto d = policy("greedy")->at_barrier(work(2, {{1, 1}, {0, 1}}));
    EXPECT_TRUE(d.moves.empty());
    EXPECT_DOUBLE_EQ(figure(d.figures, "makespan after"), 1.0);
}

TEST(BalanceRefine, MovesOnlyFromOverloadedHostsWithinTheLimit) {
    // Host 0 runs 5 and 3 (finishes at 8), hosts 1 and 2 run 2 each.
    // Average 12 / 3 = 4. With tolerance 0.05 (limit 4.2) neither 5 nor 3
    // fits on a host at 2, so nothing moves; with 0.3 (limit 5.2) the 3
    // goes to host 1 (finishing at 5) and host 0 is then within the limit.
    // Greedy, which ignores the placement, moves two processes.
    const auto obs = work(3, {{0, 5}, {0, 3}, {1, 2}, {2, 2}});
    const auto tight = policy("refine")->at_barrier(obs);
    EXPECT_TRUE(tight.moves.empty());
    EXPECT_DOUBLE_EQ(figure(tight.figures, "average"), 4.0);
    EXPECT_DOUBLE_EQ(figure(tight.figures, "limit"), 4.2);

    Params p;
    p.tolerance = 0.3;
    const auto d = policy("refine", p)->at_barrier(obs);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(moves_of(d.moves)[0], std::make_tuple(1u, 0u, 1u));
    EXPECT_DOUBLE_EQ(figure(d.moves[0].figures, "finish(to) after"), 5.0);
    EXPECT_DOUBLE_EQ(figure(d.figures, "makespan after"), 5.0);

    const auto g = policy("greedy")->at_barrier(obs);
    ASSERT_EQ(g.moves.size(), 2u);
    EXPECT_EQ(moves_of(g.moves)[0], std::make_tuple(1u, 0u, 1u));
    EXPECT_EQ(moves_of(g.moves)[1], std::make_tuple(2u, 1u, 2u));
}

TEST(BalanceRefine, EmptiesOverloadedHostsStepByStep) {
    // Six processes of 1 on host 0 of three equal hosts: average 2, limit
    // 2.1. Host 0 gives one to the least loaded host each time (ties: the
    // lowest HostId): hosts 1, 2, 1, 2, after which it finishes at 2.
    const auto obs = work(3, {{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}});
    const auto d = policy("refine")->at_barrier(obs);
    ASSERT_EQ(d.moves.size(), 4u);
    const std::vector<HostId> to = {1, 2, 1, 2};
    for (std::size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(d.moves[i].from, 0u);
        EXPECT_EQ(d.moves[i].to, to[i]);
    }
    EXPECT_DOUBLE_EQ(figure(d.figures, "makespan after"), 2.0);
    // A central gather of 3 host reports and 6 process loads, 4 orders.
    EXPECT_EQ(d.cost.messages, 3u + 4u);
    EXPECT_EQ(d.cost.bytes, 3u * 24u + 6u * 16u + 4u * 16u);
}

TEST(BalanceRefine, WithholdsMovesWhenMigrationIsOff) {
    Params p;
    p.migrate = false;
    const auto d = policy("refine", p)->at_barrier(work(2, {{0, 1}, {0, 1}}));
    EXPECT_TRUE(d.moves.empty());
    EXPECT_EQ(d.withheld.size(), 1u);
}
