// SPDX-License-Identifier: GPL-2.0
// Hector's migrate-when-busy and also-migrate-when-idle (Russ et al. 1998,
// §II.C, §III.C) on small clusters worked by hand.
#include "balance_cluster.hpp"

using namespace balance_test;

TEST(BalanceHectorBusy, ShedsAProcessAboveTheBusyThreshold) {
    // busy = 0.5 by default: host 0 at 0.6 sheds its first process to the
    // least loaded host, host 2 (load 0.5 < 1).
    auto obs = cluster({2, 1, 0.5}, {2, 1, 0});
    obs.hosts[0].external_load = 0.6;
    const auto d = policy("hector-busy")->at_barrier(obs);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(moves_of(d.moves)[0], std::make_tuple(0u, 0u, 2u));
    EXPECT_DOUBLE_EQ(figure(d.moves[0].figures, "external_load(from)"), 0.6);
    EXPECT_DOUBLE_EQ(figure(d.moves[0].figures, "load(to)"), 0.5);
    EXPECT_EQ(d.cost.messages, 3u + 1u); // three reports, one order

    for (double ext : {0.5, 0.4}) { // at or below the threshold: not busy
        obs.hosts[0].external_load = ext;
        EXPECT_TRUE(policy("hector-busy")->at_barrier(obs).moves.empty()) << ext;
    }
    Params p;
    p.busy = 0.7; // a higher threshold: 0.6 is no longer busy
    obs.hosts[0].external_load = 0.6;
    EXPECT_TRUE(policy("hector-busy", p)->at_barrier(obs).moves.empty());
}

TEST(BalanceHectorBusy, KeepsSheddingWhileBusy) {
    auto obs = cluster({3, 0, 0, 0}, {3, 0, 0, 0});
    obs.hosts[0].external_load = 0.9;
    auto pol = policy("hector-busy");
    EXPECT_EQ(pol->at_barrier(obs).moves.size(), 1u);
    EXPECT_EQ(pol->at_barrier(obs).moves.size(), 1u); // a level, not an edge
}

TEST(BalanceHectorBusy, TiesGoToTheFastestAndBusyHostsReceiveNothing) {
    auto obs = cluster({2, 0, 0, 0}, {2, 0, 0, 0});
    obs.hosts[0].external_load = 0.8;
    obs.hosts[2].cpu_power = 2.0; // equal loads 0: host 2 is the fastest
    obs.hosts[3].cpu_power = 3.0;
    obs.hosts[3].external_load = 0.6; // but host 3 is busy
    const auto d = policy("hector-busy")->at_barrier(obs);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(d.moves[0].to, 2u);
    EXPECT_DOUBLE_EQ(figure(d.moves[0].figures, "speed(to)"), 2.0);
}

TEST(BalanceHectorBusy, ExpectedTaskSpreadsTwoBusyHosts) {
    // Hosts 0 and 1 busy; host 2 (load 0) takes the first process and then
    // counts 1, so host 3 (load 0.5) takes the second.
    auto obs = cluster({2, 2, 0, 0.5}, {2, 2, 0, 0});
    obs.hosts[0].external_load = 0.9;
    obs.hosts[1].external_load = 0.9;
    const auto d = policy("hector-busy")->at_barrier(obs);
    ASSERT_EQ(d.moves.size(), 2u);
    EXPECT_EQ(moves_of(d.moves)[0], std::make_tuple(0u, 0u, 2u));
    EXPECT_EQ(moves_of(d.moves)[1], std::make_tuple(2u, 1u, 3u));
}

TEST(BalanceHectorBusy, NeverReclaimsIdleHosts) {
    auto obs = cluster({1, 0}, {1, 0});
    obs.hosts[1].cpu_power = 2.0;
    EXPECT_TRUE(policy("hector-busy")->at_barrier(obs).moves.empty());
}

TEST(BalanceHectorIdle, AFasterIdleHostReclaimsAProcess) {
    // Host 1 is idle (load 0 < 0.1) and twice as fast: process 0 would get
    // 2 there instead of 1.
    auto obs = cluster({1, 0}, {1, 0});
    obs.hosts[1].cpu_power = 2.0;
    const auto d = policy("hector-idle")->at_barrier(obs);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(moves_of(d.moves)[0], std::make_tuple(0u, 0u, 1u));
    EXPECT_DOUBLE_EQ(figure(d.moves[0].figures, "speed(from) per process"), 1.0);
    EXPECT_DOUBLE_EQ(figure(d.moves[0].figures, "speed(to) per process"), 2.0);
}

TEST(BalanceHectorIdle, ReclaimsTheSlowestProcess) {
    // Host 0 (power 1) and host 1 (power 0.5) run one process each; idle
    // host 2 (power 2) reclaims the one on host 1, which runs slowest.
    auto obs = cluster({1, 1, 0}, {1, 1, 0});
    obs.hosts[1].cpu_power = 0.5;
    obs.hosts[2].cpu_power = 2.0;
    const auto d = policy("hector-idle")->at_barrier(obs);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(moves_of(d.moves)[0], std::make_tuple(1u, 1u, 2u));
    EXPECT_DOUBLE_EQ(figure(d.moves[0].figures, "speed(from) per process"), 0.5);
}

TEST(BalanceHectorIdle, ASlowerIdleHostReclaimsNothing) {
    auto obs = cluster({1, 0}, {1, 0});
    obs.hosts[1].cpu_power = 0.5;
    EXPECT_TRUE(policy("hector-idle")->at_barrier(obs).moves.empty());
    // Sharing counts: three processes on host 0 get 1/3 each, more than 0.5
    // would be slower, so the slower idle host now helps.
    auto shared = cluster({3, 0}, {3, 0});
    shared.hosts[1].cpu_power = 0.5;
    EXPECT_EQ(policy("hector-idle")->at_barrier(shared).moves.size(), 1u);
}

TEST(BalanceHectorIdle, TheIdleThresholdDecides) {
    auto obs = cluster({1, 0.05}, {1, 0});
    obs.hosts[1].cpu_power = 2.0;
    EXPECT_EQ(policy("hector-idle")->at_barrier(obs).moves.size(), 1u);
    obs.hosts[1].load_average = 0.2; // above idle = 0.1
    EXPECT_TRUE(policy("hector-idle")->at_barrier(obs).moves.empty());
    Params p;
    p.idle = 0.3;
    EXPECT_EQ(policy("hector-idle", p)->at_barrier(obs).moves.size(), 1u);
}

TEST(BalanceHectorIdle, OnlyANewlyIdleHostReclaimsAndOnlyOneProcess) {
    // Barrier 1: host 1 runs external work (load 1), not idle. Barrier 2:
    // it is idle: newly, it reclaims one process of the three (the one that
    // reached the barrier last). Barrier 3, still idle: not newly, nothing.
    auto busy = cluster({3, 1}, {3, 0});
    busy.hosts[1].cpu_power = 2.0;
    auto idle = busy;
    idle.hosts[1].load_average = 0.0;
    auto pol = policy("hector-idle");
    EXPECT_TRUE(pol->at_barrier(busy).moves.empty());
    const auto d = pol->at_barrier(idle);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(moves_of(d.moves)[0], std::make_tuple(2u, 0u, 1u));
    EXPECT_TRUE(pol->at_barrier(idle).moves.empty());
    // Busy again, then idle again: newly idle once more.
    EXPECT_TRUE(pol->at_barrier(busy).moves.empty());
    EXPECT_EQ(pol->at_barrier(idle).moves.size(), 1u);
}

TEST(BalanceHectorIdle, ShedsFromBusyHostsToo) {
    auto obs = cluster({2, 1}, {2, 0});
    obs.hosts[0].external_load = 0.7;
    obs.hosts[1].load_average = 1.0; // not idle: only the busy rule acts
    const auto d = policy("hector-idle")->at_barrier(obs);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(d.moves[0].to, 1u);
    EXPECT_NE(d.moves[0].why.find("busy"), std::string::npos);
}

TEST(BalanceHectorIdle, WithholdsMovesWhenMigrationIsOff) {
    auto obs = cluster({1, 0}, {1, 0});
    obs.hosts[1].cpu_power = 2.0;
    Params p;
    p.migrate = false;
    const auto d = policy("hector-idle", p)->at_barrier(obs);
    EXPECT_TRUE(d.rescheduled);
    EXPECT_TRUE(d.moves.empty());
    EXPECT_EQ(d.withheld.size(), 1u);
}
