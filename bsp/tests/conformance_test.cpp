// SPDX-License-Identifier: GPL-2.0
// The bsp/ runtime's conformance: each C program checks the standard's rules
// itself (bsp_abort naming the line) and prints a fixed answer; here every
// program runs under bsprun -n 1, 2, 4, without bsprun (forked VPs), and
// with a VP moved at every barrier (bsprun --migrate-every 1), and the
// answers must be identical. Misuse must end the job with a message naming
// the call and the problem, and a non-zero status.
#include <gtest/gtest.h>

#include <linux/perf_event.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "counter.hpp"
#include "run.hpp"

using bsptest::run;

namespace {

struct Mode {
    const char* name;
    bool bsprun;
    int p;
    unsigned migrate; // --migrate-every
};

const Mode kModes[] = {
    {"bsprun_n1", true, 1, 0},  {"bsprun_n2", true, 2, 0},  {"bsprun_n4", true, 4, 0},
    {"fork_p1", false, 1, 0},   {"fork_p3", false, 3, 0},   {"migrate_n1", true, 1, 1},
    {"migrate_n2", true, 2, 1}, {"migrate_n3", true, 3, 1},
};

// gtest prints parameters with these (the test names stay readable).
[[maybe_unused]] void PrintTo(const Mode& m, std::ostream* os) {
    *os << m.name;
}

std::string prog(const std::string& name) {
    return std::string(BSP_TEST_DIR) + "/bsp_" + name;
}

std::vector<std::string> command(const Mode& m, const std::string& program,
                                 std::vector<std::string> args) {
    std::vector<std::string> c;
    if (m.bsprun) {
        c = {BSPRUN_PATH, "-n", std::to_string(m.p)};
        if (m.migrate)
            c.insert(c.end(), {"--migrate-every", std::to_string(m.migrate)});
    }
    c.push_back(program);
    c.insert(c.end(), args.begin(), args.end());
    return c;
}

// The answer each program must print with P processes.
std::string expected(const std::string& program, int p) {
    if (program == "bsmp") {
        std::string s;
        for (int i = 0; i < p; ++i)
            s += fmt::format("bsmp pid {} ok\n", i);
        return s;
    }
    if (program == "init")
        return fmt::format("init ok {}\nafter end\n", p);
    return fmt::format("{} ok {}\n", program, p);
}

std::string sorted_lines(const std::string& s) {
    std::vector<std::string> lines;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);)
        lines.push_back(l + "\n");
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const auto& l : lines)
        out += l;
    return out;
}

int count(const std::string& hay, const std::string& needle) {
    int n = 0;
    for (auto at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1))
        ++n;
    return n;
}

using Param = std::tuple<std::string, Mode>;

class BspConformance : public ::testing::TestWithParam<Param> {};

TEST_P(BspConformance, AnswerIsTheSameInEveryMode) {
    const auto& [program, mode] = GetParam();
    const auto r = run(command(mode, prog(program), {std::to_string(mode.p)}));
    EXPECT_EQ(r.code, 0) << r.err;
    // VPs write concurrently: compare the lines, not their interleaving.
    EXPECT_EQ(sorted_lines(r.out), sorted_lines(expected(program, mode.p))) << r.err;
    if (mode.bsprun) {
        for (int v = 0; v < mode.p; ++v)
            EXPECT_NE(r.err.find(fmt::format("bsprun: vp {} on ", v)), std::string::npos) << r.err;
    }
    if (mode.migrate) {
        EXPECT_GE(count(r.err, " moved, pid "), 2) << r.err; // every barrier moved one VP
    } else {
        EXPECT_EQ(count(r.err, " moved, pid "), 0) << r.err;
    }
}

INSTANTIATE_TEST_SUITE_P(Programs, BspConformance,
                         ::testing::Combine(::testing::Values("basic", "bsmp", "regs", "init",
                                                              "cxx"),
                                            ::testing::ValuesIn(kModes)),
                         [](const ::testing::TestParamInfo<Param>& i) {
                             return std::get<0>(i.param) + "_" + std::get<1>(i.param).name;
                         });

struct Misuse {
    const char* name;
    std::vector<std::string> says; // every one must be in stderr
    int bsprun_code;               // bsprun's exit status (0: any non-zero)
};

const Misuse kMisuses[] = {
    {"before-begin", {"bsp_sync: called before bsp_begin"}, 1},
    {"unregistered", {"bsp_put: address 0x", "is not registered"}, 1},
    {"get-unregistered", {"bsp_get: address 0x", "is not registered"}, 1},
    {"push-then-use", {"bsp_put: address 0x", "is not registered"}, 1},
    {"use-before-sync", {"bsp_put: address 0x", "registered only from the next bsp_sync"}, 1},
    {"pid-range", {"bsp_put: pid 2 is out of range (0..1)"}, 1},
    {"send-pid-range", {"bsp_send: pid -1 is out of range (0..1)"}, 1},
    {"negative-size", {"bsp_get: size -4 is negative"}, 1},
    {"past-end",
     {"bsp_put: offset 14 + 4 bytes is past the end of the area registered on pid 0 (16 bytes"},
     1},
    {"pop-unregistered", {"bsp_pop_reg: address 0x", "is not registered"}, 1},
    {"move-empty", {"bsp_move: the message queue is empty"}, 1},
    {"abort", {"user abort from pid 1 with code 42"}, 1},
    {"exit3", {"vp 1 (pid "}, 3},
    {"killed", {"vp 1 (pid "}, 137},
    {"reg-order",
     {"registration order differs between processes in superstep 1",
      "bsp_pop_reg (registration #0) on vp 0 but bsp_push_reg (registration #1) on vp 1"},
     1},
    {"reg-count", {"vp 0 did 0 bsp_push_reg/bsp_pop_reg calls and vp 1 did 1"}, 1},
    {"tagsize",
     {"bsp_set_tagsize is collective, but in superstep 1 vp 0 asked for 4 bytes and vp 1 "
      "asked for 5 bytes"},
     1},
    {"sync-after-end", {"bsp_end"}, 0},
};

[[maybe_unused]] void PrintTo(const Misuse& m, std::ostream* os) {
    *os << m.name;
}

using MisuseParam = std::tuple<Misuse, bool>; // bsprun?

class BspMisuse : public ::testing::TestWithParam<MisuseParam> {};

TEST_P(BspMisuse, EndsTheJobNamingTheCallAndTheProblem) {
    const auto& [m, bsprun] = GetParam();
    const Mode mode{"", bsprun, 2, 0};
    const auto r = run(command(mode, prog("misuse"), {m.name, "2"}));
    EXPECT_NE(r.code, 0) << r.err;
    if (bsprun && m.bsprun_code != 0) {
        EXPECT_EQ(r.code, m.bsprun_code) << r.err;
    }
    for (const auto& s : m.says)
        EXPECT_NE(r.err.find(s), std::string::npos) << "missing \"" << s << "\" in:\n" << r.err;
    EXPECT_EQ(r.out.find("not detected"), std::string::npos) << r.out;
    if (bsprun && std::string(m.name) != "before-begin") {
        EXPECT_NE(r.err.find("bsprun: job failed: "), std::string::npos) << r.err;
    }
}

TEST(BspMisuseSync, AfterAnotherEndedIsNamed) {
    const auto r = run({BSPRUN_PATH, "-n", "2", prog("misuse"), "sync-after-end", "2"});
    EXPECT_EQ(r.code, 1) << r.err;
    const bool named = r.err.find("already called bsp_end") != std::string::npos ||
                       r.err.find("waits in bsp_sync") != std::string::npos;
    EXPECT_TRUE(named) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Cases, BspMisuse,
                         ::testing::Combine(::testing::ValuesIn(kMisuses), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<MisuseParam>& i) {
                             std::string n = std::get<0>(i.param).name;
                             std::replace(n.begin(), n.end(), '-', '_');
                             return n + (std::get<1>(i.param) ? "_bsprun" : "_fork");
                         });

TEST(BspRun, HelpIsAManPage) {
    const auto r = run({BSPRUN_PATH, "--help"});
    EXPECT_EQ(r.code, 0);
    for (const char* s : {"SYNOPSIS", "DESCRIPTION", "MIGRATION", "EXIT STATUS", "--migrate-every",
                          "--nprocs", "SIGUSR2", "Documentation/bsp.md"})
        EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

TEST(BspRun, VerbosePrintsEveryBarriersStatistics) {
    const auto r = run({BSPRUN_PATH, "-n", "2", "--verbose", prog("bsmp"), "2"});
    EXPECT_EQ(r.code, 0) << r.err;
    // bsmp: 4 + 12 supersteps end in a sync; 16 barriers x 2 VPs.
    EXPECT_EQ(count(r.err, " computed "), 32) << r.err;
    // superstep 4 is the first of the numbered rounds: 3 messages of 32 bytes to each of 2.
    EXPECT_NE(r.err.find("bsprun: superstep 4: vp 1 pid "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("sent 192 bytes"), std::string::npos) << r.err;
    // Every barrier has each VP's resident size, though the VP reads it
    // only at every 16th superstep and sends the last value between.
    EXPECT_EQ(count(r.err, " bytes, resident "), 32) << r.err;
    EXPECT_EQ(count(r.err, "resident unknown"), 0) << r.err;
}

// Each VP counts its instructions with perf_event_open where this machine
// allows it, and --verbose says so, or why not (no PMU in most VMs).
TEST(BspRun, VerboseSaysHowInstructionsWereMeasured) {
    // Whether this machine lets a process count: the VPs' own counter.
    ghost::bsp::vp::InstructionCounter probe;
    probe.start();
    const int err = probe.stop().error;
    const auto r = run({BSPRUN_PATH, "-n", "2", "--verbose", prog("bsmp"), "2"});
    EXPECT_EQ(r.code, 0) << r.err;
    if (err) {
        const std::string why =
            std::string("instructions not counted: perf_event_open: ") + std::strerror(err);
        EXPECT_EQ(count(r.err, why), 32) << r.err;
    } else {
        EXPECT_EQ(count(r.err, " instructions), sent"), 32) << r.err;
        EXPECT_EQ(r.err.find("not counted"), std::string::npos) << r.err;
    }
}

// The counter's lifecycle where it does count, checked with a software
// event (task-clock: this machine may have no PMU): start() opens one
// descriptor, stop() reads a count and closes it, so a VP holds no perf
// descriptor across bsp_sync, and the next superstep counts afresh.
TEST(BspCounter, OpenOnlyBetweenStartAndStop) {
    namespace fs = std::filesystem;
    const auto fds = [] {
        return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{});
    };
    ghost::bsp::vp::InstructionCounter c(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
    EXPECT_EQ(c.stop().error, EBADF); // nothing started
    const auto before = fds();
    c.start();
    if (!c.open())
        GTEST_SKIP() << "perf_event_open refused a software event: "
                     << std::strerror(c.stop().error);
    EXPECT_EQ(fds(), before + 1);
    const auto work = [](int n) {
        volatile double x = 0;
        for (int i = 0; i < n; ++i)
            x = x + i;
    };
    work(2'000'000);
    const auto first = c.stop();
    EXPECT_EQ(first.error, 0);
    EXPECT_GT(first.instructions, 0u); // nanoseconds of task clock here
    EXPECT_FALSE(c.open());
    EXPECT_EQ(fds(), before);
    c.start(); // from zero again
    EXPECT_TRUE(c.open());
    work(2'000'000);
    const auto second = c.stop();
    EXPECT_EQ(second.error, 0);
    EXPECT_GT(second.instructions, 0u);
    EXPECT_LT(second.instructions, first.instructions * 20); // not added to the first
    EXPECT_EQ(fds(), before);
}

// An event the kernel refuses is refused once, with its errno, and every
// later superstep reports the same reason without a descriptor.
TEST(BspCounter, RefusedOnceThenReportedEachTime) {
    ghost::bsp::vp::InstructionCounter c(0xfffffu, 0);
    c.start();
    EXPECT_FALSE(c.open());
    const int err = c.stop().error;
    EXPECT_NE(err, 0);
    for (int i = 0; i < 3; ++i) {
        c.start();
        EXPECT_FALSE(c.open());
        const auto n = c.stop();
        EXPECT_EQ(n.error, err);
        EXPECT_EQ(n.instructions, 0u);
    }
}

// --cluster asks this host's migd for the hosts: without one, a clear error.
TEST(BspRun, ClusterNeedsAMigdAndHostOptionsNeedHosts) {
    auto r = run({BSPRUN_PATH, "-n", "2", "--cluster", "--migd-socket", "/nonexistent/migd.sock",
                  prog("basic")});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("bsprun: --cluster: this host's migd (/nonexistent/migd.sock) did not "
                         "list its hosts"),
              std::string::npos)
        << r.err;
    r = run({BSPRUN_PATH, "-n", "2", "--cluster", "--hosts", "h1", prog("basic")});
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--cluster and --hosts"), std::string::npos) << r.err;
    r = run({BSPRUN_PATH, "-n", "2", "--job-dir", "/tmp/x", prog("basic")});
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("go with --hosts"), std::string::npos) << r.err;
    r = run({BSPRUN_PATH, "-n", "2", "--dry-run", prog("basic")});
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--dry-run goes with --hosts or --cluster"), std::string::npos) << r.err;
}

// Without a migd, --hosts cannot move anything: every VP stays on this
// host, each failed move is said, and the job still gives its answer.
TEST(BspRun, HostsWithoutMigdKeepEveryVpHome) {
    const auto r = run({BSPRUN_PATH, "-n", "2", "--hosts", "elsewhere1,elsewhere2", "--home",
                        "here", "--migd-socket", "/nonexistent/migd.sock", prog("basic")});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "basic ok 2\n");
    for (const char* line : {"moving vp 0 from here:", "moving vp 1 from here:",
                             "cannot reach migd at "
                             "/nonexistent/migd.sock"})
        EXPECT_NE(r.err.find(line), std::string::npos) << line << " in " << r.err;
    EXPECT_NE(r.err.find("it continues on here"), std::string::npos) << r.err;
}

TEST(BspRun, UnknownPolicyIsRefused) {
    const auto r = run({BSPRUN_PATH, "-n", "2", "--policy", "bogus", prog("basic")});
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("unknown balancing policy 'bogus'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("pub-conservative"), std::string::npos) << r.err; // the known list
}

TEST(BspRun, KnownPolicyRunsOnOneHost) {
    const auto r = run({BSPRUN_PATH, "-n", "2", "--policy", "migbsp", prog("basic")});
    EXPECT_EQ(r.code, 0) << r.err;
}

TEST(BspRun, ProgramThatCannotRunFailsTheJob) {
    const auto r = run({BSPRUN_PATH, "-n", "2", "/nonexistent/bsp-program"});
    EXPECT_EQ(r.code, 127) << r.err;
    EXPECT_NE(r.err.find("cannot run /nonexistent/bsp-program"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("bsprun: job failed: vp "), std::string::npos) << r.err;
}

TEST(BspRun, BeginWithFewerProcessesThanStartedIsRefused) {
    const auto r = run({BSPRUN_PATH, "-n", "3", prog("basic"), "2"});
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("bsp_begin(2) asks for at most 2 processes, but bsprun started 3"),
              std::string::npos)
        << r.err;
}

TEST(BspPkgConfig, StandaloneProgramBuildsAndRuns) {
    const auto dir =
        std::filesystem::temp_directory_path() / fmt::format("bsp-standalone-{}", ::getpid());
    std::filesystem::create_directories(dir);
    const std::string exe = (dir / "standalone").string();
    const auto cc = run({"/bin/sh", "-c",
                         fmt::format("cc -std=c99 -Wall -Werror -o {} {} $(pkg-config --cflags "
                                     "--libs ghost-bsp)",
                                     exe, BSP_STANDALONE_SRC)},
                        {std::string("PKG_CONFIG_PATH=") + BSP_PKGCONFIG_DIR});
    ASSERT_EQ(cc.code, 0) << cc.err;
    const std::string want = "sum of squares below 1000: 332833500\n";
    const auto a = run({BSPRUN_PATH, "-n", "3", exe, "3"});
    EXPECT_EQ(a.code, 0) << a.err;
    EXPECT_EQ(a.out, want);
    const auto b = run({exe, "2"});
    EXPECT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(b.out, want);
    std::filesystem::remove_all(dir);
}

} // namespace
