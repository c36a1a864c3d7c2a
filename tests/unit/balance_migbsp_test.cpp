// SPDX-License-Identifier: GPL-2.0
// MigBSP's formulas (Righi et al. 2010, §3) against values worked by hand
// from the paper's definitions. The policy's decisions on small clusters
// are in balance_migbsp_policy_test.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "migbsp/adaptation.hpp"
#include "migbsp/destination.hpp"
#include "migbsp/metrics.hpp"
#include "migbsp/patterns.hpp"
#include "migbsp/sets.hpp"

using namespace ghost::balance;
using namespace ghost::balance::migbsp;

namespace {

Process proc(HostId host, double instructions, double comp_time, std::vector<double> bytes,
             std::vector<double> recv_time, std::uint64_t memory = 10'000'000) {
    Process p;
    p.host = host;
    p.instructions = instructions;
    p.comp_time = comp_time;
    p.step_time = comp_time;
    p.memory_bytes = memory;
    p.bytes_from_set = std::move(bytes);
    p.recv_time_from_set = std::move(recv_time);
    return p;
}

Host host(SetId set, double cpu, double external = 0.0, unsigned processors = 1) {
    Host h;
    h.set = set;
    h.cpu_power = cpu;
    h.external_load = external;
    h.processors = processors;
    return h;
}

// Two Sets. Set 0: host 0 (1 GHz, idle) and host 1 (1 GHz, half taken by
// others): mean capacity 0.75e9. Set 1: hosts 2, 3, 4: host 2 (3e9) runs
// process 1; host 3 (2e9, half taken: 1e9) and host 4 (2e9) are free: mean
// (3 + 1 + 2)/3 = 2e9. T: 1e-8 s/byte except inside Set 1 (1e-9). Mig 0.5 s.
Observation two_sets() {
    Observation o;
    o.sets = 2;
    o.hosts = {host(0, 1e9), host(0, 1e9, 0.5), host(1, 3e9), host(1, 2e9, 0.5), host(1, 2e9)};
    o.procs = {proc(0, 1e9, 1.0, {0, 1e6}, {0, 0.2}), proc(2, 1e9, 1.0 / 3, {1e6, 0}, {0.1, 0})};
    o.net.byte_time = {1e-8, 1e-8, 1e-8, 1e-9};
    o.net.migration_cost = 0.5;
    return o;
}

} // namespace

TEST(MigBSP, InequalitiesOneAndTwoDecideBalance) {
    // Times 1, 1, 1.4: average 1.1333. D 0.5: 1.4 < 1.7 and 1 > 0.5667.
    EXPECT_TRUE(balanced(std::vector<double>{1, 1, 1.4}, 0.5));
    // D 0.2: 1.4 < 1.36 fails (Inequality 1).
    EXPECT_FALSE(balanced(std::vector<double>{1, 1, 1.4}, 0.2));
    // Times 0.6, 1, 1, 1, 1: average 0.92; D 0.2: 1 < 1.104 holds but
    // 0.6 > 0.736 fails (Inequality 2 alone). D 0.5: 0.6 > 0.46 holds.
    EXPECT_FALSE(balanced(std::vector<double>{0.6, 1, 1, 1, 1}, 0.2));
    EXPECT_TRUE(balanced(std::vector<double>{0.6, 1, 1, 1, 1}, 0.5));
}

TEST(MigBSP, AlphaGoesFrom10To20AfterTenStableSupersteps) {
    Interval a(10);
    for (int t = 0; t < 10; ++t)
        a.observe(true);
    EXPECT_EQ(a.alpha(), 10U); // alpha changes only at the call
    EXPECT_EQ(a.alpha_next(), 20U);
    a.call();
    EXPECT_EQ(a.alpha(), 20U);
}

TEST(MigBSP, AlphaPrimeShrinksBackButNeverBelowTheInitialAlpha) {
    Interval a(4);
    for (int t = 0; t < 3; ++t)
        a.observe(true);
    EXPECT_EQ(a.alpha_next(), 7U);
    const unsigned expected[] = {6, 5, 4, 4, 4};
    for (unsigned e : expected) {
        a.observe(false);
        EXPECT_EQ(a.alpha_next(), e);
    }
    a.call();
    EXPECT_EQ(a.alpha(), 4U);
}

TEST(MigBSP, DistanceGrowsByHalfAfterOmegaCallsWithoutMigrationAndStopsBelowOne) {
    Distance d(0.1, 3);
    d.call(false);
    d.call(false);
    EXPECT_DOUBLE_EQ(d.value(), 0.1); // gamma 2 < omega
    const double grown[] = {0.15, 0.225, 0.3375, 0.50625, 0.759375};
    for (double g : grown) {
        d.call(false);
        EXPECT_DOUBLE_EQ(d.value(), g);
    }
    d.call(false); // 0.759375 * 1.5 = 1.139 is not below 1: D stays
    EXPECT_DOUBLE_EQ(d.value(), 0.759375);
    EXPECT_EQ(d.gamma(), 8U);
}

TEST(MigBSP, DistanceShrinksBackToItsInitialValueWhenEveryCallMigrates) {
    Distance d(0.1, 3);
    for (int c = 0; c < 7; ++c)
        d.call(false);
    ASSERT_DOUBLE_EQ(d.value(), 0.759375);
    d.call(true);
    EXPECT_EQ(d.gamma(), 0U);
    EXPECT_DOUBLE_EQ(d.value(), 0.3796875);
    d.call(true);
    EXPECT_DOUBLE_EQ(d.value(), 0.18984375);
    d.call(true); // 0.0949 would be below the initial D: our reading stops at 0.1
    EXPECT_DOUBLE_EQ(d.value(), 0.1);
    d.call(true);
    EXPECT_DOUBLE_EQ(d.value(), 0.1);

    // The papers' settings: D 0.5 -> 0.75 after three calls, back to 0.5.
    Distance p(0.5, 3);
    for (int c = 0; c < 4; ++c)
        p.call(false);
    EXPECT_DOUBLE_EQ(p.value(), 0.75);
    p.call(false); // a call without migration once gamma < omega changes nothing...
    p.call(true);  // ...one that migrates halves D, down to its initial value
    EXPECT_DOUBLE_EQ(p.value(), 0.5);
    p.call(false); // gamma 1 < omega, and not 0: unchanged
    EXPECT_DOUBLE_EQ(p.value(), 0.5);
}

TEST(MigBSP, PcompStepsByOneOverAlphaAndStaysInZeroOne) {
    History h(1);
    const Tolerances tol{0.1, 0.1};
    // alpha 4, instructions 100, 200, 400, 800: PI = 100 (within), 150 (not
    // within [180, 220]), 275 (not in [360, 440]), 537.5 (not in [720, 880]).
    const double instructions[] = {100, 200, 400, 800};
    const double pcomp[] = {1.0, 0.75, 0.5, 0.25};
    const double pi[] = {100, 150, 275, 537.5};
    for (int t = 0; t < 4; ++t) {
        h.observe(proc(0, instructions[t], 1, {0}, {0}), t == 0, 4, tol);
        EXPECT_DOUBLE_EQ(h.pi(), pi[t]);
        EXPECT_DOUBLE_EQ(h.p_comp(), pcomp[t]);
    }
    // The next window (alpha 8) keeps P_comp but restarts PI at I_k: regular.
    h.observe(proc(0, 800, 1, {0}, {0}), true, 8, tol);
    EXPECT_DOUBLE_EQ(h.pi(), 800);
    EXPECT_DOUBLE_EQ(h.p_comp(), 0.375);
    h.observe(proc(0, 800, 1, {0}, {0}), false, 8, tol);
    EXPECT_DOUBLE_EQ(h.p_comp(), 0.5);

    // Down to 0, never below: alpha 2 after two irregular supersteps.
    History g(1);
    g.observe(proc(0, 100, 1, {0}, {0}), true, 2, tol);   // 1
    g.observe(proc(0, 300, 1, {0}, {0}), false, 2, tol);  // PI 200: 0.5
    g.observe(proc(0, 900, 1, {0}, {0}), false, 2, tol);  // PI 550: 0
    g.observe(proc(0, 2700, 1, {0}, {0}), false, 2, tol); // PI 1625: 0
    EXPECT_DOUBLE_EQ(g.p_comp(), 0.0);
    // delta widens what counts as regular: 50% accepts PI 150 for I 200.
    History w(1);
    w.observe(proc(0, 100, 1, {0}, {0}), true, 4, {0.5, 0.1});
    w.observe(proc(0, 200, 1, {0}, {0}), false, 4, {0.5, 0.1});
    EXPECT_DOUBLE_EQ(w.p_comp(), 1.0);
}

TEST(MigBSP, AgingPredictionsPbPiCtpBtpAndPcomm) {
    History h(2);
    const Tolerances tol{0.9, 0.1}; // beta 0.1 judges bytes; delta is not used for them
    // Bytes from Set 1: 100, 300, 0, 200 -> PB 100, 200, 100, 150; receive
    // times 4, 2, 2, 0 -> BTP 4, 3, 2.5, 1.25. P_comm(1): within, then
    // 200 not in [270, 330], 100 not in [0, 0], 150 not in [180, 220].
    const double bytes[] = {100, 300, 0, 200};
    const double recv[] = {4, 2, 2, 0};
    const double pb[] = {100, 200, 100, 150};
    const double btp[] = {4, 3, 2.5, 1.25};
    const double pcomm[] = {1.0, 0.75, 0.5, 0.25};
    const double ct[] = {8, 4, 4, 2};
    const double ctp[] = {8, 6, 5, 3.5};
    for (int t = 0; t < 4; ++t) {
        h.observe(proc(0, 1000, ct[t], {0, bytes[t]}, {0, recv[t]}), t == 0, 4, tol);
        EXPECT_DOUBLE_EQ(h.pb(1), pb[t]);
        EXPECT_DOUBLE_EQ(h.btp(1), btp[t]);
        EXPECT_DOUBLE_EQ(h.p_comm(1), pcomm[t]);
        EXPECT_DOUBLE_EQ(h.ctp(), ctp[t]);
        EXPECT_DOUBLE_EQ(h.p_comm(0), 1.0); // nothing from Set 0, predicted nothing
    }
    EXPECT_DOUBLE_EQ(h.last_bytes(1), 200);
    // A new window resets the predictions to the superstep's own values.
    h.observe(proc(0, 1000, 7, {0, 40}, {0, 0.5}), true, 4, tol);
    EXPECT_DOUBLE_EQ(h.pb(1), 40);
    EXPECT_DOUBLE_EQ(h.btp(1), 0.5);
    EXPECT_DOUBLE_EQ(h.ctp(), 7);
    EXPECT_DOUBLE_EQ(h.p_comm(1), 0.5);
}

TEST(MigBSP, ISetIsTheSetsMeanLoadAdjustedCapacityOverTheOwnSets) {
    const Observation o = two_sets();
    const auto sets = set_views(o);
    EXPECT_DOUBLE_EQ(sets[0].capacity, 0.75e9); // (1e9 + 0.5e9) / 2
    EXPECT_DOUBLE_EQ(sets[1].capacity, 2e9);    // (3e9 + 1e9 + 2e9) / 3
    EXPECT_DOUBLE_EQ(iset(sets, 0, 1), 2e9 / 0.75e9);
    EXPECT_DOUBLE_EQ(iset(sets, 0, 0), 1.0);
    EXPECT_DOUBLE_EQ(iset(sets, 1, 0), 0.375);
}

TEST(MigBSP, CompCommMemAndPmOnTwoSets) {
    Observation o = two_sets();
    const auto sets = set_views(o);
    // Process 0 over a window of alpha 2: comp times 2 then 4 (CTP 3),
    // 1e9 instructions twice (P_comp 1), from Set 1 1e6 bytes twice (P_comm
    // 1) in 0.4 then 0.2 s (BTP 0.3), 10 MB image.
    History h(2);
    h.observe(proc(0, 1e9, 2, {0, 1e6}, {0, 0.4}), true, 2, {});
    h.observe(proc(0, 1e9, 4, {0, 1e6}, {0, 0.2}), false, 2, {});
    // Comp(0,1) = 1 * 3 * (2e9/0.75e9) = 8; Comm(0,1) = 0.3;
    // Mem(0,1) = 1e7 * 1e-8 + 0.5 = 0.6; PM(0,1) = 7.7.
    // Comp(0,0) = 3, Comm(0,0) = 0, Mem(0,0) = 0.6: PM(0,0) = 2.4.
    EXPECT_DOUBLE_EQ(comp(h.p_comp(), h.ctp(), iset(sets, 0, 1)), 8.0);
    EXPECT_DOUBLE_EQ(mem(10'000'000, 1e-8, 0.5), 0.6);
    const Potential best = best_potential(o, sets, 0, h);
    EXPECT_EQ(best.set, 1U);
    EXPECT_DOUBLE_EQ(best.comp, 8.0);
    EXPECT_DOUBLE_EQ(best.comm, 0.3);
    EXPECT_DOUBLE_EQ(best.mem, 0.6);
    EXPECT_DOUBLE_EQ(best.pm, 7.7);

    // A 1 GB image: Mem = 10.5 to either Set, so PM(0,1) = 8.3 - 10.5 =
    // -2.2 and PM(0,0) = 3 - 10.5 = -7.5: the highest is negative, never a
    // candidate.
    o.procs[0].memory_bytes = 1'000'000'000;
    const Potential heavy = best_potential(o, sets, 0, h);
    EXPECT_EQ(heavy.set, 1U);
    EXPECT_DOUBLE_EQ(heavy.pm, -2.2);
    EXPECT_TRUE(candidates({heavy}, false, 0.8).empty());
}

TEST(MigBSP, HeuristicsTopOneAndAboveXOfTheHighestPm) {
    auto pot = [](ProcId i, double pm) {
        Potential p;
        p.proc = i;
        p.pm = pm;
        return p;
    };
    const std::vector<Potential> all = {pot(0, 10), pot(1, 8.5), pot(2, 7.9),
                                        pot(3, -1), pot(4, 9),   pot(5, 8.0)};
    // x = 0.8: above 8 are 10, 9 and 8.5 (8.0 is not above), best first.
    auto above = candidates(all, false, 0.8);
    ASSERT_EQ(above.size(), 3U);
    EXPECT_EQ(above[0].proc, 0U);
    EXPECT_EQ(above[1].proc, 4U);
    EXPECT_EQ(above[2].proc, 1U);
    auto top = candidates(all, true, 0.8);
    ASSERT_EQ(top.size(), 1U);
    EXPECT_EQ(top[0].proc, 0U);
    // x = 0.5: above 5 are all positive ones; -1 never.
    EXPECT_EQ(candidates(all, false, 0.5).size(), 5U);
    // Only negative PMs: no candidate at all (LBM with 10 processes, §5.1.2).
    EXPECT_TRUE(candidates({pot(0, -0.1), pot(1, -3)}, true, 0.8).empty());
    // Equal PMs keep process order.
    auto tie = candidates({pot(7, 2), pot(3, 2)}, true, 0.8);
    EXPECT_EQ(tie[0].proc, 7U);
}

TEST(MigBSP, DestinationByEquations7To9) {
    Observation o = two_sets();
    const auto sets = set_views(o);
    const Placement placement(o);
    Potential c;
    c.proc = 0;
    c.set = 1;
    c.mem = 0.6;
    // Free processors of Set 1: host 3 (time 1e9 / 1e9 = 1 s) and host 4
    // (1e9 / 2e9 = 0.5 s); host 2 runs process 1. p = host 4.
    // t1 = 0.5 + 1e6 * 1e-9 + 0.6 = 1.101; time(p') = 1e9 / 1e9 = 1,
    // t2 = 1 + 1e6 * 1e-8 = 1.01: t1 >= t2, refused.
    Verdict v = destination(o, sets, placement, c, 1e6, 1e9);
    ASSERT_TRUE(v.has_destination);
    EXPECT_EQ(v.to, 4U);
    EXPECT_DOUBLE_EQ(v.time_p, 0.5);
    EXPECT_DOUBLE_EQ(v.time_p0, 1.0);
    EXPECT_DOUBLE_EQ(v.t1, 1.101);
    EXPECT_DOUBLE_EQ(v.t2, 1.01);
    EXPECT_FALSE(v.migrate);
    // Twice the work on the current host (2e9 in the last superstep): time(p)
    // = 1 s, time(p') = 2 s. t1 = 1 + 0.001 + 0.6 = 1.601 < t2 = 2.01.
    o.procs[0].instructions = 2e9;
    const Placement busier(o);
    v = destination(o, sets, busier, c, 1e6, 2e9);
    EXPECT_EQ(v.to, 4U);
    EXPECT_DOUBLE_EQ(v.t1, 1.601);
    EXPECT_DOUBLE_EQ(v.t2, 2.01);
    EXPECT_TRUE(v.migrate);
}

TEST(MigBSP, NoMoreMovesIntoASetThanItHasFreeProcessors) {
    Observation o = two_sets();
    const auto sets = set_views(o);
    Placement placement(o);
    EXPECT_FALSE(placement.free(2)); // host 2 runs process 1
    EXPECT_TRUE(placement.free(3));
    EXPECT_TRUE(placement.free(4));
    Potential c;
    c.proc = 0;
    c.set = 1;
    o.procs[0].instructions = 4e9;
    placement = Placement(o);
    Verdict v = destination(o, sets, placement, c, 0, 4e9);
    ASSERT_TRUE(v.migrate);
    EXPECT_EQ(v.to, 4U);
    placement.move(0, 4, 4e9); // decided in this call: host 4 is taken now
    v = destination(o, sets, placement, c, 0, 4e9);
    ASSERT_TRUE(v.has_destination);
    EXPECT_EQ(v.to, 3U);
    placement.move(0, 3, 4e9);
    v = destination(o, sets, placement, c, 0, 4e9);
    EXPECT_FALSE(v.has_destination); // Set 1 has no free processor left
    EXPECT_FALSE(v.migrate);
    // An unavailable host is never a destination.
    o.hosts[4].available = false;
    const auto sets2 = set_views(o);
    const Placement fresh(o);
    EXPECT_EQ(destination(o, sets2, fresh, c, 0, 4e9).to, 3U);
}

TEST(MigBSP, TimeOfAHostSumsItsProcessesWithItsLoadAndPower) {
    Observation o = two_sets();
    o.procs.push_back(proc(3, 3e9, 1, {0, 0}, {0, 0}));
    o.hosts[3].processors = 2;
    const Placement placement(o);
    // Host 3: 3e9 instructions, (1 - 0.5) * 2e9 = 1e9 per processor; one
    // process uses one of its two processors: 3 s. With a second process of
    // 1e9: 4e9 over two processors, 2 s.
    EXPECT_DOUBLE_EQ(placement.time(3), 3.0);
    EXPECT_DOUBLE_EQ(placement.time(3, 1e9, 1), 2.0);
    EXPECT_TRUE(placement.free(3));
}
