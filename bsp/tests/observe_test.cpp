// SPDX-License-Identifier: GPL-2.0
// bsprun --policy without a cluster: the Observation built from the hub's
// statistics (BspObserve.*), and a policy's decision becoming a planned move
// to the host it chose (BspPolicyHook.*), with a fake Placer.
#include <gtest/gtest.h>

#include <cerrno>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "observe.hpp"
#include "policy_hook.hpp"

using namespace ghost;
using namespace ghost::bsp;

namespace {

VpStats stat(int vp, double wall, double cpu, std::vector<std::uint64_t> from = {},
             std::uint64_t mem = 0) {
    VpStats s;
    s.vp = vp;
    s.comp_wall = wall;
    s.comp_cpu = cpu;
    s.bytes_from = std::move(from);
    s.memory_bytes = mem;
    return s;
}

TEST(BspObserve, SharesGivePowerAndExternalLoad) {
    Observer o({"h1", "h2", "h3"});
    // h1: shares 1.0, 0.9, 0.5 (median 0.9); h2: 0.25; h3: no VP.
    std::vector<VpStats> st = {stat(0, 1, 1), stat(1, 1, 0.25), stat(2, 2, 1.8), stat(3, 1, 0.5)};
    std::vector<std::size_t> where = {0, 1, 0, 0};
    auto obs = o.observe(4, 10, st, where);
    EXPECT_EQ(obs.superstep, 5u);
    ASSERT_EQ(obs.hosts.size(), 3u);
    EXPECT_EQ(obs.sets, 3u);
    for (std::size_t h = 0; h < 3; ++h)
        EXPECT_DOUBLE_EQ(obs.hosts[h].cpu_power, 1e9); // nominal: the share is external load
    EXPECT_NEAR(obs.hosts[0].external_load, 0.1, 1e-12);
    EXPECT_NEAR(obs.hosts[1].external_load, 0.75, 1e-12);
    EXPECT_DOUBLE_EQ(obs.hosts[2].external_load, 0.0);
    EXPECT_EQ(obs.hosts[0].managed, 3u);
    EXPECT_EQ(obs.hosts[2].managed, 0u);
    for (std::size_t h = 0; h < 3; ++h) {
        EXPECT_EQ(obs.hosts[h].set, h);
        EXPECT_EQ(obs.hosts[h].processors, 1u);
    }
}

TEST(BspObserve, HostWithoutVpKeepsItsLastEstimate) {
    Observer o({"a", "b"});
    std::vector<VpStats> st = {stat(0, 1, 0.2)};
    std::vector<std::size_t> on_b = {1}, on_a = {0};
    auto first = o.observe(0, 1, st, on_b);
    EXPECT_NEAR(first.hosts[1].external_load, 0.8, 1e-12);
    st[0] = stat(0, 1, 1.0);
    auto second = o.observe(1, 2, st, on_a); // the VP left b
    EXPECT_DOUBLE_EQ(second.hosts[0].external_load, 0.0);
    EXPECT_NEAR(second.hosts[1].external_load, 0.8, 1e-12);
    EXPECT_DOUBLE_EQ(o.share(1), 0.2);
}

TEST(BspObserve, InstructionsFromCpuTimeAndMemory) {
    Observer o({"a"});
    std::vector<VpStats> st = {stat(0, 2.0, 0.5, {}, 12345), stat(1, 0.0, 0.0)};
    std::vector<std::size_t> where = {0, 0};
    auto obs = o.observe(0, 0, st, where);
    EXPECT_DOUBLE_EQ(obs.procs[0].instructions, 0.5e9);
    EXPECT_DOUBLE_EQ(obs.procs[0].comp_time, 2.0);
    EXPECT_EQ(obs.procs[0].memory_bytes, 12345u);
    EXPECT_EQ(obs.procs[1].memory_bytes, 64ULL << 20); // none sent: the default
    EXPECT_DOUBLE_EQ(cpu_share(st[1]), 1.0);
}

// perf_event_open's counts where a VP has them: the VP's instructions, and
// its host's power as the median count per CPU second; a VP without them
// (the reason sent along) is its CPU seconds times its host's power.
TEST(BspObserve, CountedInstructionsGiveInstructionsAndPower) {
    Observer o({"a", "b"});
    auto with = [](VpStats s, std::uint64_t n) {
        s.instructions = n;
        s.instructions_errno = 0;
        return s;
    };
    auto without = [](VpStats s) {
        s.instructions_errno = ENOENT;
        return s;
    };
    // a: rates 3e9, 2e9 and 4e9 per CPU second (median 3e9), and one VP
    // not counted; b: nothing counted.
    std::vector<VpStats> st = {
        with(stat(0, 1, 0.5), 1'500'000'000), with(stat(1, 1, 1.0), 2'000'000'000),
        with(stat(2, 2, 0.25), 1'000'000'000), without(stat(3, 1, 0.5)), without(stat(4, 1, 0.5))};
    std::vector<std::size_t> where = {0, 0, 0, 0, 1};
    auto obs = o.observe(0, 0, st, where);
    EXPECT_DOUBLE_EQ(obs.hosts[0].cpu_power, 3e9);
    EXPECT_DOUBLE_EQ(obs.hosts[1].cpu_power, 1e9); // nominal
    EXPECT_DOUBLE_EQ(o.power(0), 3e9);
    EXPECT_DOUBLE_EQ(obs.procs[0].instructions, 1.5e9);
    EXPECT_DOUBLE_EQ(obs.procs[2].instructions, 1e9);
    EXPECT_DOUBLE_EQ(obs.procs[3].instructions, 0.5 * 3e9); // its host's power
    EXPECT_DOUBLE_EQ(obs.procs[4].instructions, 0.5e9);
    EXPECT_TRUE(counted(st[0]));
    EXPECT_FALSE(counted(st[3]));
    // Next barrier nothing is counted on a: it keeps its measured power.
    std::vector<VpStats> later = {without(stat(0, 1, 1.0))};
    std::vector<std::size_t> on_a = {0};
    auto next = o.observe(1, 1, later, on_a);
    EXPECT_DOUBLE_EQ(next.hosts[0].cpu_power, 3e9);
    EXPECT_DOUBLE_EQ(next.procs[0].instructions, 3e9);
}

TEST(BspObserve, BytesPerSourceSet) {
    Observer o({"a", "b"});
    // vp 0 on a receives 10 from itself, 20 from vp 1 (a), 300 from vp 2 (b).
    std::vector<VpStats> st = {stat(0, 1, 1, {10, 20, 300}), stat(1, 1, 1, {0, 0, 0}),
                               stat(2, 1, 1, {7, 0, 0})};
    std::vector<std::size_t> where = {0, 0, 1};
    auto obs = o.observe(0, 0, st, where);
    ASSERT_EQ(obs.procs[0].bytes_from_set.size(), 2u);
    EXPECT_DOUBLE_EQ(obs.procs[0].bytes_from_set[0], 30);
    EXPECT_DOUBLE_EQ(obs.procs[0].bytes_from_set[1], 300);
    EXPECT_DOUBLE_EQ(obs.procs[0].recv_time_from_set[0], 0);
    EXPECT_DOUBLE_EQ(obs.procs[0].recv_time_from_set[1], 300 / 100e6);
    EXPECT_DOUBLE_EQ(obs.procs[2].bytes_from_set[0], 7);
    EXPECT_DOUBLE_EQ(obs.net.transfer(0, 1, 2), 1 / 100e6);
    EXPECT_DOUBLE_EQ(obs.net.transfer(1, 1, 2), 0);
    EXPECT_DOUBLE_EQ(obs.net.migration_cost, 0.2);
}

// bsprun observes into the same Observation at every barrier: what is left
// from a larger earlier one (more VPs, more hosts, other figures) must not
// show through, and the result must equal a fresh observation's.
TEST(BspObserve, ReusedObservationEqualsAFreshOne) {
    std::vector<VpStats> big = {stat(0, 1, 0.5, {1, 2, 3}, 99), stat(1, 2, 2, {4, 5, 6}),
                                stat(2, 1, 1, {7, 8, 9})};
    std::vector<std::size_t> big_where = {0, 1, 2};
    std::vector<VpStats> small = {stat(0, 1, 1, {10, 300, 5}), stat(1, 1, 0.25, {0, 0, 0})};
    std::vector<std::size_t> small_where = {1, 1};
    Observer reused({"a", "b", "c"}), fresh({"a", "b", "c"});
    balance::Observation o;
    reused.observe(0, 1, big, big_where, o);
    fresh.observe(0, 1, big, big_where);
    reused.observe(1, 2, small, small_where, o);
    const auto want = fresh.observe(1, 2, small, small_where);
    EXPECT_EQ(o.superstep, want.superstep);
    EXPECT_DOUBLE_EQ(o.now, want.now);
    ASSERT_EQ(o.hosts.size(), want.hosts.size());
    for (std::size_t h = 0; h < want.hosts.size(); ++h) {
        EXPECT_EQ(o.hosts[h].managed, want.hosts[h].managed) << h;
        EXPECT_DOUBLE_EQ(o.hosts[h].external_load, want.hosts[h].external_load) << h;
        EXPECT_DOUBLE_EQ(o.hosts[h].load_average, want.hosts[h].load_average) << h;
        EXPECT_DOUBLE_EQ(o.hosts[h].cpu_power, want.hosts[h].cpu_power) << h;
    }
    ASSERT_EQ(o.procs.size(), 2u);
    for (std::size_t v = 0; v < 2; ++v) {
        EXPECT_EQ(o.procs[v].host, want.procs[v].host);
        EXPECT_EQ(o.procs[v].memory_bytes, want.procs[v].memory_bytes);
        EXPECT_EQ(o.procs[v].bytes_from_set, want.procs[v].bytes_from_set) << v;
        EXPECT_EQ(o.procs[v].recv_time_from_set, want.procs[v].recv_time_from_set) << v;
    }
    // vp 0 on b: 10 + 300 from its own host b (vps 0, 1), 5 from a (vp 2,
    // beyond the job's two: counted on host 0).
    EXPECT_DOUBLE_EQ(o.procs[0].bytes_from_set[1], 310);
    EXPECT_DOUBLE_EQ(o.procs[0].bytes_from_set[0], 5);
    EXPECT_DOUBLE_EQ(o.procs[0].recv_time_from_set[0], 5 / 100e6);
    EXPECT_EQ(o.net.byte_time, want.net.byte_time);
}

// A host's median share with an even number of VPs is the mean of the
// middle two, whatever order the VPs come in.
TEST(BspObserve, MedianOfAnEvenCount) {
    Observer o({"a"});
    std::vector<VpStats> st = {stat(0, 1, 0.9), stat(1, 1, 0.1), stat(2, 1, 0.5), stat(3, 1, 0.3)};
    std::vector<std::size_t> where = {0, 0, 0, 0};
    auto obs = o.observe(0, 0, st, where);
    EXPECT_NEAR(o.share(0), 0.4, 1e-12);
    EXPECT_NEAR(obs.hosts[0].external_load, 0.6, 1e-12);
}

TEST(BspObserve, ReceivedBytesFromSyncs) {
    std::vector<std::byte> buf(100);
    std::vector<SyncRequest> s(3);
    s[0].puts.push_back({2, 0, 0, std::span<const std::byte>(buf.data(), 40)});
    s[1].msgs.push_back(
        {2, std::span<const std::byte>(buf.data(), 4), std::span<const std::byte>(buf.data(), 6)});
    s[2].gets.push_back({0, 0, 0, 16}); // vp 2 reads 16 bytes of vp 0
    auto r = received_bytes(s);
    EXPECT_EQ(r[2][0], 40u + 16u);
    EXPECT_EQ(r[2][1], 10u);
    EXPECT_EQ(r[0][2], 0u);
    EXPECT_EQ(r[1][0], 0u);
}

class FakePlacer final : public Placer {
  public:
    explicit FakePlacer(std::vector<std::string> at) : at_(std::move(at)) {}
    const std::string& host_of(int vp) const override {
        return at_.at(static_cast<std::size_t>(vp));
    }
    void plan(int vp, std::string to, std::string why) override {
        planned.push_back({vp, to, why});
        at_.at(static_cast<std::size_t>(vp)) = std::move(to); // as if moved
    }
    struct Plan {
        int vp;
        std::string to, why;
    };
    std::vector<Plan> planned;

  private:
    std::vector<std::string> at_;
};

// Moves the VPs of the slowest host ((1 - external_load) * cpu_power) to
// the fastest, every call.
class ToFastest final : public balance::Policy {
  public:
    std::string_view name() const override { return "fake"; }
    balance::Decision at_barrier(const balance::Observation& obs) override {
        seen.push_back(obs);
        balance::Decision d;
        balance::HostId fast = 0, slow = 0;
        const auto speed = [&](balance::HostId h) {
            return (1.0 - obs.hosts[h].external_load) * obs.hosts[h].cpu_power;
        };
        for (balance::HostId h = 0; h < obs.hosts.size(); ++h) {
            if (speed(h) > speed(fast))
                fast = h;
            if (obs.hosts[h].managed && speed(h) < speed(slow))
                slow = h;
        }
        for (balance::ProcId p = 0; p < obs.procs.size(); ++p)
            if (obs.procs[p].host == slow && slow != fast)
                d.moves.push_back({p, slow, fast, "slow host", {{"power", 1}}});
        return d;
    }
    std::vector<balance::Observation> seen;
};

TEST(BspPolicyHook, PlacementThenThePolicysMoveToItsHost) {
    FakePlacer placer({"h1", "h1"});
    auto pol = std::make_unique<ToFastest>();
    ToFastest* fake = pol.get();
    PolicyHook hook(placer, {"h1", "h2", "h3"}, std::move(pol), 0, 2);
    std::vector<VpStats> st = {stat(0, 1, 1), stat(1, 1, 1)};
    auto m0 = hook.barrier(0, st); // placement: vp 1 -> h2
    ASSERT_EQ(m0, std::vector<int>({1}));
    ASSERT_EQ(placer.planned.size(), 1u);
    EXPECT_EQ(placer.planned[0].to, "h2");
    EXPECT_EQ(placer.planned[0].why, "placement: --hosts");
    EXPECT_TRUE(fake->seen.empty()); // placement only at the first barrier
    // h2 runs at a 20% share: h3 (never measured) keeps nominal power and
    // the fake policy moves vp 1 there; h1 measured 1.0 too, h3 is first.
    st = {stat(0, 1, 1), stat(1, 1, 0.2)};
    auto m1 = hook.barrier(1, st);
    ASSERT_EQ(fake->seen.size(), 1u);
    EXPECT_NEAR(fake->seen[0].hosts[1].external_load, 0.8, 1e-12);
    EXPECT_EQ(fake->seen[0].procs[1].host, 1u);
    ASSERT_EQ(m1, std::vector<int>({1}));
    ASSERT_EQ(placer.planned.size(), 2u);
    EXPECT_EQ(placer.planned[1].vp, 1);
    EXPECT_EQ(placer.planned[1].to, "h1"); // host 0 ties h3 at nominal; the first wins
    EXPECT_EQ(placer.planned[1].why, "fake: slow host");
}

// --dry-run: the policy is called and decides as before, but only the
// placement is planned; its move is not.
TEST(BspPolicyHook, DryRunCallsThePolicyButPlansNoMove) {
    FakePlacer placer({"h1", "h1"});
    auto pol = std::make_unique<ToFastest>();
    ToFastest* fake = pol.get();
    PolicyHook hook(placer, {"h1", "h2", "h3"}, std::move(pol), 0, 2);
    hook.set_dry_run(true);
    std::vector<VpStats> st = {stat(0, 1, 1), stat(1, 1, 1)};
    ASSERT_EQ(hook.barrier(0, st), std::vector<int>({1})); // placement still happens
    st = {stat(0, 1, 1), stat(1, 1, 0.2)};
    for (std::uint64_t s = 1; s <= 3; ++s)
        EXPECT_TRUE(hook.barrier(s, st).empty()) << "superstep " << s;
    EXPECT_EQ(fake->seen.size(), 3u); // it decided each time
    EXPECT_EQ(placer.planned.size(), 1u);
    EXPECT_EQ(placer.host_of(1), "h2");
}

class BspPolicyMoves : public ::testing::TestWithParam<const char*> {};
TEST_P(BspPolicyMoves, OffTheSlowHost) {
    FakePlacer placer({"h1", "h1"});
    auto pol = balance::make_policy(GetParam(), balance::Params{});
    ASSERT_TRUE(pol);
    PolicyHook hook(placer, {"h1", "h2", "h3"}, std::move(*pol), 0, 2);
    std::vector<VpStats> even = {stat(0, 1, 1), stat(1, 1, 1)};
    hook.barrier(0, even);
    ASSERT_EQ(placer.host_of(1), "h2");
    std::vector<VpStats> st = {stat(0, 1, 1), stat(1, 5, 1)}; // vp 1 at a 20% share
    for (std::uint64_t s = 1; s < 40 && placer.host_of(1) == "h2"; ++s)
        hook.barrier(s, st);
    ASSERT_NE(placer.host_of(1), "h2") << GetParam() << " never moved vp 1 off the 20% host";
    EXPECT_EQ(placer.planned.back().vp, 1);
    EXPECT_EQ(placer.planned.back().why.rfind(std::string(GetParam()) + ": ", 0), 0u)
        << placer.planned.back().why;
}

INSTANTIATE_TEST_SUITE_P(Policies, BspPolicyMoves,
                         ::testing::Values("ghost", "migbsp", "pub-simple", "pub-global",
                                           "pub-conservative", "pub-prediction"));

TEST(BspPolicyHook, NoPolicyMovesNothingButMigrateEveryStillForces) {
    FakePlacer placer({"h1", "h1"});
    PolicyHook hook(placer, {"h1", "h2"}, nullptr, 2, 2);
    std::vector<VpStats> st = {stat(0, 1, 1), stat(1, 5, 1)};
    hook.barrier(0, st); // placement
    EXPECT_EQ(placer.planned.size(), 1u);
    EXPECT_TRUE(hook.barrier(2, st).empty()); // (2+1) % 2 != 0, no policy
    auto m = hook.barrier(3, st);             // forced: vp (3 mod 2) = 1 to the next host
    ASSERT_EQ(m, std::vector<int>({1}));
    EXPECT_EQ(placer.planned.back().to, "h1");
    EXPECT_EQ(placer.planned.back().why, "forced: --migrate-every 2");
}

// The policy's cost: every barrier but the first is a decision; the CPU
// clock (a system call) is read at the first 16 and then one in 16, and
// the CPU time reported is all decisions' wall time times the sampled
// ones' CPU per wall second.
TEST(BspPolicyHook, CostCountsDecisionsAndSamplesTheCpuClock) {
    FakePlacer placer({"h1", "h1"});
    auto pol = balance::make_policy("migbsp", balance::Params{});
    ASSERT_TRUE(pol);
    PolicyHook hook(placer, {"h1", "h2", "h3"}, std::move(*pol), 0, 2);
    std::vector<VpStats> st = {stat(0, 1, 1, {8, 8}), stat(1, 1, 1, {8, 8})};
    for (std::uint64_t s = 0; s < 40; ++s)
        hook.barrier(s, st);
    const PolicyCost& c = hook.cost();
    EXPECT_EQ(c.decisions, 39u);
    EXPECT_EQ(c.sampled, 16u + 2u); // 0..15, then 16 and 32
    EXPECT_GT(c.wall, 0.0);
    EXPECT_GE(c.sampled_cpu, 0.0);
    EXPECT_GT(c.sampled_wall, 0.0);
    EXPECT_LE(c.sampled_wall, c.wall);
    EXPECT_DOUBLE_EQ(c.cpu(), c.wall * c.sampled_cpu / c.sampled_wall);
    EXPECT_TRUE(samples_cpu(0) && samples_cpu(15) && samples_cpu(16) && samples_cpu(48));
    EXPECT_FALSE(samples_cpu(17) || samples_cpu(47));
    EXPECT_EQ(PolicyCost{}.cpu(), 0.0);
    // 4 decisions, 0.5 s; 2 sampled: 0.2 s wall, 0.1 s CPU -> CPU 0.25 s.
    EXPECT_EQ(cost_summary("migbsp", PolicyCost{4, 0.5, 2, 0.2, 0.1}, 100.0),
              "bsprun: policy migbsp: 4 decisions took 0.500000 s (CPU 0.250000 s), 0.5000% of "
              "the job's 100.000 s");
}

// --policy none: no decision and no observation at any barrier.
TEST(BspPolicyHook, NoPolicyObservesNothing) {
    FakePlacer placer({"h1", "h1"});
    PolicyHook hook(placer, {"h1", "h2"}, nullptr, 0, 2);
    std::vector<VpStats> st = {stat(0, 1, 1), stat(1, 1, 1)};
    for (std::uint64_t s = 0; s < 5; ++s)
        hook.barrier(s, st);
    EXPECT_EQ(hook.cost().decisions, 0u);
    EXPECT_TRUE(hook.last().procs.empty());
    EXPECT_EQ(placer.planned.size(), 1u); // the placement only
}

// --hosts naming a host twice: a VP already on that host is not "moved" to
// its second entry, and a VP on a host not listed is placed.
TEST(BspPolicyHook, HostListedTwiceOrNotAtAll) {
    FakePlacer placer({"h1", "h1", "elsewhere"});
    PolicyHook hook(placer, {"h1", "h1", "h2"}, nullptr, 0, 3);
    std::vector<VpStats> st = {stat(0, 1, 1), stat(1, 1, 1), stat(2, 1, 1)};
    EXPECT_EQ(hook.barrier(0, st), std::vector<int>({2}));
    ASSERT_EQ(placer.planned.size(), 1u);
    EXPECT_EQ(placer.planned[0].to, "h2");
}

// The placer's host names are followed between barriers: a VP that moved
// (by another hook's plan, a rollback) is forced on from where it is now.
TEST(BspPolicyHook, FollowsThePlacerBetweenBarriers) {
    FakePlacer placer({"h1", "h1"});
    PolicyHook hook(placer, {"h1", "h2", "h3"}, nullptr, 2, 2);
    std::vector<VpStats> st = {stat(0, 1, 1), stat(1, 1, 1)};
    hook.barrier(0, st);      // placement: vp 1 to h2
    placer.plan(1, "h3", ""); // moved elsewhere behind the hook's back
    auto m = hook.barrier(3, st);
    ASSERT_EQ(m, std::vector<int>({1}));
    EXPECT_EQ(placer.planned.back().to, "h1"); // the host after h3
}

} // namespace
