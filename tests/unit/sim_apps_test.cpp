// SPDX-License-Identifier: GPL-2.0
// The application generators of sim/apps against the papers' formulas:
// totals of instructions per superstep, superstep counts, and every message
// sent is a message received.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "app.hpp"

namespace {

using ghost::sim::App;
using ghost::sim::Proc;

std::unique_ptr<App> app(const std::string& name, std::uint64_t size, Proc procs,
                         std::uint64_t seed = 1) {
    auto a = ghost::sim::make_app({name, size, procs, seed});
    EXPECT_TRUE(a.has_value()) << (a ? "" : a.error().what());
    return std::move(*a);
}

double step_instructions(const App& a, std::uint64_t s) {
    double total = 0.0;
    for (Proc i = 0; i < a.procs(); ++i)
        total += a.step(s, i).instructions;
    return total;
}

// Every superstep: messages sent to each process == messages it expects.
void expect_balanced_messages(const App& a) {
    for (std::uint64_t s = 1; s <= a.supersteps(); ++s) {
        std::vector<std::uint32_t> sent(a.procs(), 0), expected(a.procs(), 0);
        for (Proc i = 0; i < a.procs(); ++i) {
            const auto st = a.step(s, i);
            expected[i] = st.recv_count;
            for (const auto& m : st.sends) {
                ASSERT_EQ(m.from, i);
                ASSERT_LT(m.to, a.procs());
                ASSERT_NE(m.to, i) << a.name() << " superstep " << s;
                ++sent[m.to];
            }
        }
        ASSERT_EQ(sent, expected) << a.name() << " superstep " << s;
    }
}

TEST(SimApps, LatticeBoltzmannSplitsTenToTheTenInstructionsAndTenMegabytes) {
    for (Proc p : {10u, 25u, 50u, 100u, 200u}) {
        auto a = app("lbm", 7, p);
        EXPECT_EQ(a->supersteps(), 7u);
        for (std::uint64_t s = 1; s <= 7; ++s)
            EXPECT_NEAR(step_instructions(*a, s), 1e10, 1.0);
        expect_balanced_messages(*a);
        // 100 KB to the right neighbour; the last process sends nothing.
        EXPECT_EQ(a->step(3, 0).sends.at(0).bytes, 100'000u);
        EXPECT_TRUE(a->step(3, p - 1).sends.empty());
    }
    // The paper: 1.5 MB per process with 10, 900 KB with 25.
    EXPECT_EQ(app("lbm", 1, 10)->memory_bytes(0), 1'500'000u);
    EXPECT_EQ(app("lbm", 1, 25)->memory_bytes(3), 900'000u);
    EXPECT_DOUBLE_EQ(app("lbm", 1, 10)->step(1, 4).instructions, 1e9);
    EXPECT_DOUBLE_EQ(app("lbm", 1, 25)->step(1, 4).instructions, 4e8);
}

TEST(SimApps, SmithWatermanHasTwoNMinusOneWavefrontsRisingFromTenToTheSixToTheNine) {
    for (std::uint64_t n : {10u, 25u, 50u}) {
        auto a = app("sw", n, Proc(n));
        ASSERT_EQ(a->supersteps(), 2 * n - 1);
        double total = 0.0;
        for (std::uint64_t t = 1; t <= 2 * n - 1; ++t) {
            const double cell = 1e6 + double(t - 1) * (1e9 - 1e6) / double(2 * n - 2);
            const double cells = double(t <= n ? t : 2 * n - t); // cells on anti-diagonal t
            EXPECT_NEAR(step_instructions(*a, t), cell * cells, 1e-3 * cell)
                << "n " << n << " t " << t;
            total += cell * cells;
        }
        // Each process is busy in exactly n supersteps (one cell each).
        for (Proc i = 0; i < a->procs(); ++i) {
            unsigned busy = 0;
            for (std::uint64_t t = 1; t <= 2 * n - 1; ++t)
                busy += a->step(t, i).instructions > 0.0;
            EXPECT_EQ(busy, n);
        }
        expect_balanced_messages(*a);
        (void)total;
    }
    // The paper's numbers for n = 10: I_2(1) = 565 10^5 (process 1 is the
    // second column), 500 KB per cell, 1.2 MB images; n = 25: 200 KB, 900 KB.
    auto ten = app("sw", 10, 10);
    EXPECT_NEAR(ten->step(2, 1).instructions, 565e5, 1e3);
    EXPECT_NEAR(ten->step(19, 9).instructions, 1e9, 1.0);
    EXPECT_NEAR(ten->step(1, 0).instructions, 1e6, 1.0);
    EXPECT_EQ(ten->step(1, 0).sends.at(0).bytes, 500'000u);
    EXPECT_EQ(ten->memory_bytes(0), 1'200'000u);
    EXPECT_EQ(app("sw", 25, 25)->memory_bytes(0), 900'000u);
    // Fewer processes than columns: columns dealt cyclically, same totals.
    auto cyclic = app("sw", 10, 3);
    EXPECT_NEAR(step_instructions(*cyclic, 5), step_instructions(*ten, 5), 1.0);
    expect_balanced_messages(*cyclic);
}

TEST(SimApps, LuHasTwoNPlusOneSuperstepsAndTheSequentialOperationCount) {
    struct Case {
        std::uint64_t n;
        Proc p;
    };
    for (auto [n, p] : {Case{20, 25}, Case{30, 50}, Case{23, 6}, Case{40, 200}}) {
        auto a = app("lu", n, p);
        ASSERT_EQ(a->supersteps(), 2 * n + 1);
        double total = 0.0;
        for (std::uint64_t t = 1; t <= 2 * n + 1; ++t)
            total += step_instructions(*a, t);
        // n(n-1)/2 divisions and sum_k (n-k-1)^2 = (n-1)n(2n-1)/6 updates,
        // 1000 instructions each.
        const double ops = double(n * (n - 1) / 2 + (n - 1) * n * (2 * n - 1) / 6);
        EXPECT_NEAR(total, 1000.0 * ops, 1e-6 * total) << n << " " << p;
        // Superstep 1 only passes a(0,0); type-3 supersteps hold the updates.
        EXPECT_EQ(step_instructions(*a, 1), 0.0);
        EXPECT_NEAR(step_instructions(*a, 3), 1000.0 * double((n - 1) * (n - 1)), 1e-6);
        EXPECT_NEAR(step_instructions(*a, 2), 1000.0 * double(n - 1), 1e-6);
        expect_balanced_messages(*a);
        // The images hold the whole matrix once (8 bytes per element).
        std::uint64_t bytes = 0;
        for (Proc i = 0; i < a->procs(); ++i)
            bytes += a->memory_bytes(i) - 500'000;
        EXPECT_EQ(bytes, 8 * n * n);
    }
    // The paper's grids: 25 = 5 x 5, 50 = 10 x 5, 100 = 10 x 10, 200 = 20 x 10.
    // With 10 x 5, process 7 is P(1, 2): it owns rows 1, 11, ... and columns
    // 2, 7, ...; with n = 100, 10 x 20 elements.
    EXPECT_EQ(app("lu", 100, 50)->memory_bytes(7), 8u * 10 * 20 + 500'000);
    EXPECT_FALSE(ghost::sim::make_app({"lu", 3, 25, 1}).has_value());
}

TEST(SimApps, Sat3IsIrregularAndSeeded) {
    auto a = app("sat3", 20, 32, 7);
    auto b = app("sat3", 20, 32, 7);
    auto c = app("sat3", 20, 32, 8);
    EXPECT_EQ(a->supersteps(), 20u);
    expect_balanced_messages(*a);
    // Superstep 1: process 0 creates 4 p subproblems and deals them out.
    EXPECT_EQ(a->step(1, 0).sends.size(), 31u);
    EXPECT_GT(a->step(1, 0).instructions, 0.0);
    EXPECT_EQ(a->step(1, 5).instructions, 0.0);
    bool differ = false, uneven = false;
    for (Proc i = 0; i < 32; ++i) {
        EXPECT_EQ(a->step(10, i).instructions, b->step(10, i).instructions);
        differ |= a->step(10, i).instructions != c->step(10, i).instructions;
        uneven |= a->step(10, i).instructions != a->step(10, 0).instructions;
        EXPECT_LE(a->step(10, i).instructions, 1e8);
    }
    EXPECT_TRUE(differ);
    EXPECT_TRUE(uneven);
}

TEST(SimApps, AllToAllSendsToEveryOtherProcess) {
    auto a = app("alltoall", 3, 16);
    EXPECT_EQ(a->step(2, 5).sends.size(), 15u);
    expect_balanced_messages(*a);
    EXPECT_FALSE(ghost::sim::make_app({"nosuch", 3, 16, 1}).has_value());
    EXPECT_FALSE(ghost::sim::make_app({"lbm", 3, 0, 1}).has_value());
}

// Files as bsprun --record writes them, in a temporary directory that
// goes with the test.
class Recorded {
  public:
    Recorded() {
        char dir[] = "/tmp/ghost-replay-test.XXXXXX";
        EXPECT_NE(::mkdtemp(dir), nullptr);
        dir_ = dir;
    }
    ~Recorded() { std::filesystem::remove_all(dir_); }
    Recorded(const Recorded&) = delete;
    Recorded& operator=(const Recorded&) = delete;

    std::string operator()(const std::string& text) {
        const std::string path = dir_ + "/" + std::to_string(++files_) + "/job.jsonl";
        std::filesystem::create_directories(std::filesystem::path(path).parent_path());
        std::ofstream(path) << text;
        return path;
    }

  private:
    std::string dir_;
    int files_ = 0;
};

TEST(SimApps, ReplayComputesTheRecordedCpuTimeAndSendsWhatWasReceived) {
    Recorded recorded;
    const std::string path = recorded(
        R"({"superstep":0,"cpu":[0.5,0.25,0],"wall":[0.5,1.25,0],"memory":[1000,0,0],)"
        R"("from":[[0,0,0],[300,0,0],[7,0,0]]})"
        "\n"
        R"({"superstep":1,"cpu":[0.1,0.2,0.3],"wall":[0.1,0.2,0.3],"memory":[2000,5000,0],)"
        R"("from":[[0,40,0],[0,0,0],[0,0,9]]})"
        "\n");
    auto r = ghost::sim::make_app({"replay", 0, 0, 1, path});
    ASSERT_TRUE(r.has_value()) << r.error().what();
    const App& a = **r;
    EXPECT_EQ(a.procs(), 3u);
    EXPECT_EQ(a.supersteps(), 2u);
    // A recorded CPU second is kReplayPower instructions.
    EXPECT_DOUBLE_EQ(a.step(1, 0).instructions, 0.5 * ghost::sim::kReplayPower);
    EXPECT_DOUBLE_EQ(a.step(2, 2).instructions, 0.3 * ghost::sim::kReplayPower);
    // VP 0 sends each VP what that VP received from it.
    const auto s10 = a.step(1, 0).sends;
    ASSERT_EQ(s10.size(), 2u);
    EXPECT_EQ(s10[0].to, 1u);
    EXPECT_EQ(s10[0].bytes, 300u);
    EXPECT_EQ(s10[1].to, 2u);
    EXPECT_EQ(s10[1].bytes, 7u);
    EXPECT_EQ(a.step(1, 1).recv_count, 1u);
    EXPECT_EQ(a.step(1, 0).recv_count, 0u);
    EXPECT_EQ(a.step(2, 1).sends.size(), 1u);
    EXPECT_EQ(a.step(2, 0).recv_count, 1u);
    // What a VP sent itself stays in its memory.
    EXPECT_TRUE(a.step(2, 2).sends.empty());
    EXPECT_EQ(a.step(2, 2).recv_count, 0u);
    expect_balanced_messages(a);
    // The largest size recorded; never sampled: bsprun's default 64 MiB.
    EXPECT_EQ(a.memory_bytes(0), 2000u);
    EXPECT_EQ(a.memory_bytes(1), 5000u);
    EXPECT_EQ(a.memory_bytes(2), 64u << 20);

    auto wrong = ghost::sim::make_app({"replay", 0, 4, 1, path});
    ASSERT_FALSE(wrong.has_value());
    EXPECT_NE(wrong.error().what().find("recorded with 3 VPs, not 4"), std::string::npos);
    EXPECT_FALSE(ghost::sim::make_app({"replay", 0, 0, 1, ""}).has_value());
    EXPECT_FALSE(ghost::sim::make_app({"replay", 0, 0, 1, path + ".none"}).has_value());
    const std::string ragged =
        recorded(R"({"superstep":0,"cpu":[1,2],"wall":[1,2],"memory":[0,0],"from":[[0],[0,0]]})");
    auto bad = ghost::sim::make_app({"replay", 0, 0, 1, ragged});
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.error().what().find("job.jsonl:1: "), std::string::npos) << bad.error().what();
    EXPECT_FALSE(ghost::sim::make_app({"replay", 0, 0, 1, recorded("")}).has_value());
}

} // namespace
