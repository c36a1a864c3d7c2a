// SPDX-License-Identifier: GPL-2.0
// The ghost policy where a process's demand is not what its last supersteps
// show (Smith-Waterman's wavefront): the window from a process's first
// computing superstep, processes not started yet planned with the others'
// mean, swaps with processes that have stopped; and when a batch is worth
// it (the payback) and what a call's reports cost. Worked by hand.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <ghost/balance/policy.hpp>

#include "balance_ghost_cluster.hpp"
#include "ghost/window.hpp"

using namespace ghost::balance;
using namespace ghost_test;

TEST(BalanceGhost, WindowStartsAtTheFirstComputingSuperstep) {
    // Instructions 0, 0, 4e8, 6e8 over a window of 4: the mean is over the
    // two supersteps since the process started, 5e8 (not 2.5e8); bytes too.
    using ghost::balance::ghost_policy::Window;
    Window w(4, 1);
    Process p;
    p.bytes_from_set = {0};
    w.observe(p);
    w.observe(p);
    EXPECT_FALSE(w.started());
    EXPECT_DOUBLE_EQ(w.instructions(), 0.0);
    p.instructions = 4e8;
    p.bytes_from_set = {100};
    w.observe(p);
    EXPECT_TRUE(w.started());
    p.instructions = 6e8;
    p.bytes_from_set = {300};
    w.observe(p);
    EXPECT_DOUBLE_EQ(w.instructions(), 5e8);
    EXPECT_DOUBLE_EQ(w.bytes_from(0), 200.0);
    // Once started, idle supersteps count: 6e8, 0, 0, 0 -> 1.5e8.
    p.instructions = 0;
    p.bytes_from_set = {0};
    for (int k = 0; k < 3; ++k)
        w.observe(p);
    EXPECT_TRUE(w.started());
    EXPECT_DOUBLE_EQ(w.instructions(), 1.5e8);
}

TEST(BalanceGhost, ProcessNotStartedIsPlannedWithTheOthersMeanDemand) {
    // p0 computes 1e9 on h0 (1 GHz, 1 s); p1 on h1 (0.5 GHz) has not
    // computed yet. Planned with p0's 1e9 it would take 2 s: it is the
    // critical process and goes to h2 (2 GHz, 0.5 s); p0 then bounds the
    // superstep at 1 s: 2 s -> 1 s, saving 1 s > the batch's 0.6 s, carried
    // out at superstep 1. Planned as idle, p0 would be moved instead
    // (1 s -> 0.5 s, 0.5 s < 0.6 s: refused).
    Cluster c({host(0, 1e9), host(0, 0.5e9), host(1, 2e9)}, {0, 1}, {1e9, 0.0});
    auto policy = make_ghost();
    EXPECT_DOUBLE_EQ(c.step(), 1.0);
    const Decision d = policy->at_barrier(c.obs);
    EXPECT_DOUBLE_EQ(figure(d, "imputed"), 1.0);
    EXPECT_DOUBLE_EQ(figure(d, "step"), 2.0);
    EXPECT_DOUBLE_EQ(figure(d, "step after"), 1.0);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(d.moves[0].proc, 1u);
    EXPECT_EQ(d.moves[0].to, 2u);
}

namespace {

// p0 computes 1e9 every superstep on h0 (0.5 GHz, 2 s); p1 computes 1e9
// in superstep 1 only, on the 2 GHz host h1 with the given processors,
// where p2 (if busy) computes 1e8 every superstep. No host is free, so
// nothing can move until p1 has stopped: its window of 4 is all zero at
// superstep 5, and the calls come at 1, 3, 7 (the interval doubles while
// there is nothing to try). Returns the decision at superstep 7.
// With p1_receives, p1 keeps receiving 1000 bytes a superstep from Set 0.
// With a third host h2 (Set 0, 1.5 GHz), it becomes available at superstep 7.
Decision after_p1_stopped(unsigned h1_processors, bool with_p2, bool p1_receives = false,
                          bool h2_late = false) {
    std::vector<HostId> where = {0, 1};
    std::vector<double> work = {1e9, 1e9};
    if (with_p2) {
        where.push_back(1);
        work.push_back(1e8);
    }
    std::vector<Host> hosts = {host(0, 0.5e9), host(1, 2e9, h1_processors)};
    if (h2_late) {
        hosts.push_back(host(0, 1.5e9));
        hosts.back().available = false;
    }
    Cluster c(hosts, where, work);
    auto policy = make_ghost();
    Decision d;
    for (int s = 1; s <= 7; ++s) {
        c.step();
        c.work[1] = 0.0;
        if (p1_receives)
            c.obs.procs[1].bytes_from_set = {1000, 0};
        if (h2_late && s == 7)
            c.obs.hosts[2].available = true;
        d = policy->at_barrier(c.obs);
        if (s < 7) {
            EXPECT_TRUE(d.moves.empty()) << s;
        }
        c.apply(d);
    }
    EXPECT_TRUE(d.rescheduled);
    return d;
}

} // namespace

TEST(BalanceGhost, StoppedProcessGivesUpItsFastHost) {
    // At superstep 7 p1 has stopped: p0 takes its place on h1 (0.5 s) and
    // p1 takes p0's on h0, in one batch: 2 s -> 0.5 s, saving 1.5 s x 7
    // supersteps > the batch's 10 MB x 1e-8 + 0.5 = 0.6 s.
    const Decision d = after_p1_stopped(1, false);
    ASSERT_EQ(d.moves.size(), 2u);
    EXPECT_EQ(d.moves[0].proc, 0u);
    EXPECT_EQ(d.moves[0].to, 1u);
    EXPECT_EQ(d.moves[1].proc, 1u);
    EXPECT_EQ(d.moves[1].to, 0u);
    EXPECT_NE(d.moves[1].why.find("has stopped computing"), std::string::npos) << d.moves[1].why;
    EXPECT_DOUBLE_EQ(figure(d, "step after"), 0.5);
    EXPECT_DOUBLE_EQ(figure(d, "batch"), 0.6);
}

TEST(BalanceGhost, SwapNeverMakesTheMoverShareAProcessor) {
    // h1 has one processor and p2 is busy on it: taking p1's place, p0
    // would share that processor with p2; no move. With two processors on
    // h1 p0 gets one of its own (2 GHz with 2 occupants: 0.5 s): the swap.
    const Decision shared = after_p1_stopped(1, true);
    EXPECT_TRUE(shared.moves.empty());
    const Decision own = after_p1_stopped(2, true);
    ASSERT_EQ(own.moves.size(), 2u);
    EXPECT_EQ(own.moves[0].proc, 0u);
    EXPECT_EQ(own.moves[0].to, 1u);
    EXPECT_EQ(own.moves[1].proc, 1u);
    EXPECT_EQ(own.moves[1].to, 0u);
}

TEST(BalanceGhost, ProcessThatStillReceivesHasNotStopped) {
    // p1 computes nothing after superstep 1 but receives 1000 bytes every
    // superstep: its demand is not nothing, it keeps h1, nothing moves.
    const Decision d = after_p1_stopped(1, false, true);
    EXPECT_TRUE(d.moves.empty());
}

TEST(BalanceGhost, SwapWinsOverASlowerFreeHost) {
    // At superstep 7 h2 (1.5 GHz, free) becomes available: p0 would take
    // 0.667 s there, 0.5 s in p1's place on h1 (one processor, p1 leaves):
    // the swap.
    const Decision d = after_p1_stopped(1, false, false, true);
    ASSERT_EQ(d.moves.size(), 2u);
    EXPECT_EQ(d.moves[0].proc, 0u);
    EXPECT_EQ(d.moves[0].to, 1u);
    EXPECT_EQ(d.moves[1].proc, 1u);
    EXPECT_EQ(d.moves[1].to, 0u);
}

TEST(BalanceGhost, SwapThatDoesNotShortenTheStepIsTakenBack) {
    // p0 and p2 compute 1e9 on 0.5 GHz hosts (2 s each); p1 computed once
    // on h1 (2 GHz) and has stopped by superstep 7. The greedy swaps p0 into
    // h1, but p2 still takes 2 s and has nowhere to go: p0 at home would not
    // exceed the final 2 s, so the swap is undone and nothing is planned.
    Cluster c({host(0, 0.5e9), host(1, 2e9), host(0, 0.5e9)}, {0, 1, 2}, {1e9, 1e9, 1e9});
    auto policy = make_ghost();
    Decision d;
    for (int s = 1; s <= 7; ++s) {
        c.step();
        c.work[1] = 0.0;
        d = policy->at_barrier(c.obs);
        EXPECT_TRUE(d.moves.empty()) << s;
    }
    ASSERT_TRUE(d.rescheduled);
    EXPECT_DOUBLE_EQ(figure(d, "planned"), 0.0);
    EXPECT_DOUBLE_EQ(figure(d, "step after"), 2.0);
}

TEST(BalanceGhost, DefaultPaybackIsAThirdOfTheSuperstepsDone) {
    // The 1 GB image of RefusesABatchUntilTheHorizonPaysForIt (batch 10.5 s,
    // 1 s saved per superstep) with the default tuning: the saving counts
    // over a third of the supersteps done, s / 3 s, so the batch is refused
    // through superstep 31 (10.33 s) and carried out at 32 (10.67 s).
    Cluster c({host(0, 1e9), host(0, 1e9), host(0, 0.5e9), host(1, 2e9), host(1, 2e9)}, {0, 1, 2},
              {1e9, 1e9, 1e9}, 1'000'000'000);
    auto r = make_policy("ghost", {});
    ASSERT_TRUE(r.has_value());
    auto& policy = *r;
    for (int s = 1; s <= 31; ++s) {
        c.step();
        const Decision d = policy->at_barrier(c.obs);
        EXPECT_TRUE(d.moves.empty()) << s;
        if (d.rescheduled) {
            EXPECT_NEAR(figure(d, "saving"), s / 3.0, 1e-12) << s;
        }
    }
    c.step();
    const Decision d = policy->at_barrier(c.obs);
    ASSERT_TRUE(d.rescheduled);
    ASSERT_EQ(d.moves.size(), 1u);
    EXPECT_EQ(d.moves[0].proc, 2u);
    EXPECT_NEAR(figure(d, "horizon"), 32.0 / 3.0, 1e-12);
}

TEST(BalanceGhost, ProcessesReportOnlyChangedDemands) {
    // Four equal processes on four equal hosts (2 Sets): calls at 1, 3, 7.
    // At 1 everyone reports: 4 x 36 + 4 x 12 = 192 bytes. At 3 nothing
    // changed: no byte. p0 then computes 1.1e9 (10% more, above the 1%
    // tolerance) from superstep 4: at 7 its window's mean is 1.1e9 and it
    // alone reports, 36 bytes; h1's external load changed to 0.5: 12 bytes.
    Cluster c({host(0, 1e9), host(0, 1e9), host(1, 1e9), host(1, 1e9)}, {0, 1, 2, 3},
              {1e9, 1e9, 1e9, 1e9});
    auto policy = make_ghost();
    std::vector<std::uint64_t> bytes;
    std::vector<double> reports;
    for (int s = 1; s <= 7; ++s) {
        if (s == 4)
            c.work[0] = 1.1e9;
        if (s == 7)
            c.obs.hosts[1].external_load = 0.5;
        c.step();
        const Decision d = policy->at_barrier(c.obs);
        if (d.rescheduled) {
            bytes.push_back(d.cost.bytes);
            reports.push_back(figure(d, "reports"));
        }
    }
    EXPECT_EQ(bytes, (std::vector<std::uint64_t>{192, 0, 48}));
    EXPECT_EQ(reports, (std::vector<double>{4, 0, 1}));
}

TEST(BalanceGhost, DeciderPlansWithWhatItHeard) {
    // p0's demand grows by 0.5%, below the tolerance: it does not report and
    // the decider still predicts the 1 s it heard at superstep 1, not the
    // 1.005 s it would take (calls at 1 and 3; the change from superstep 2).
    Cluster c({host(0, 1e9), host(0, 1e9), host(1, 1e9), host(1, 1e9)}, {0, 1, 2, 3},
              {1e9, 1e9, 1e9, 1e9});
    auto policy = make_ghost();
    c.step();
    EXPECT_DOUBLE_EQ(figure(policy->at_barrier(c.obs), "step"), 1.0);
    c.work[0] = 1.005e9;
    c.step();
    EXPECT_FALSE(policy->at_barrier(c.obs).rescheduled);
    c.step();
    const Decision d = policy->at_barrier(c.obs);
    ASSERT_TRUE(d.rescheduled);
    EXPECT_DOUBLE_EQ(figure(d, "reports"), 0.0);
    EXPECT_DOUBLE_EQ(figure(d, "step"), 1.0);
}
