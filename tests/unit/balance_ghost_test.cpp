// SPDX-License-Identifier: GPL-2.0
// The "ghost" policy on small clusters worked by hand: which process moves
// where, when a batch pays for itself, free processors, stability over many
// barriers, what its protocol costs, the fit of visible.hpp, processes that
// have not computed yet or have stopped computing (Smith-Waterman's wavefront).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include <ghost/balance/policy.hpp>

#include "ghost/ghost.hpp"
#include "ghost/visible.hpp"
#include "ghost/window.hpp"

using namespace ghost::balance;

namespace {

Host host(SetId set, double cpu, unsigned processors = 1) {
    Host h;
    h.set = set;
    h.cpu_power = cpu;
    h.processors = processors;
    return h;
}

// Two Sets, 100 MB/s everywhere (T = 1e-8 s per byte), Mig = 0.5 s. Every
// process computes `instructions` and receives nothing; its times are those
// of the model (instructions over its host's speed).
struct Cluster {
    Observation obs;
    std::vector<double> work;

    Cluster(std::vector<Host> hosts, std::vector<HostId> where, std::vector<double> instructions,
            std::uint64_t memory = 10'000'000) {
        obs.sets = 2;
        obs.hosts = std::move(hosts);
        obs.net.byte_time = {1e-8, 1e-8, 1e-8, 1e-8};
        obs.net.migration_cost = 0.5;
        work = std::move(instructions);
        for (std::size_t i = 0; i < where.size(); ++i) {
            Process p;
            p.host = where[i];
            p.memory_bytes = memory;
            p.bytes_from_set = {0, 0};
            p.recv_time_from_set = {0, 0};
            obs.procs.push_back(p);
        }
    }

    // The next superstep as the model predicts it; returns its length.
    double step() {
        std::vector<unsigned> on(obs.hosts.size(), 0);
        for (const auto& p : obs.procs)
            ++on[p.host];
        double longest = 0.0;
        for (std::size_t i = 0; i < obs.procs.size(); ++i) {
            auto& p = obs.procs[i];
            const Host& h = obs.hosts[p.host];
            const double share = std::min(1.0, double(h.processors) / double(on[p.host]));
            p.instructions = work[i];
            p.comp_time = p.step_time = work[i] / (h.cpu_power * share);
            longest = std::max(longest, p.step_time);
        }
        ++obs.superstep;
        obs.now += longest;
        return longest;
    }

    void apply(const Decision& d) {
        for (const Move& m : d.moves)
            obs.procs[m.proc].host = m.to;
    }
};

// The clusters below were worked by hand with the saving counted over every
// superstep done so far (payback 1); the default, a third of them, has its
// own test (DefaultPaybackIsAThirdOfTheSuperstepsDone).
std::unique_ptr<Policy> make_ghost(bool migrate = true, double payback = 1.0) {
    Params p;
    p.migrate = migrate;
    ghost::balance::ghost_policy::Tuning t;
    t.payback = payback;
    auto r = ghost::balance::ghost_policy::make(p, t);
    EXPECT_TRUE(r.has_value());
    return std::move(*r);
}

double figure(const Decision& d, std::string_view name) {
    for (const auto& f : d.figures)
        if (f.name == name)
            return f.value;
    ADD_FAILURE() << "no figure " << name;
    return -1.0;
}

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
