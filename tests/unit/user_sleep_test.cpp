// SPDX-License-Identifier: GPL-2.0
// A relative sleep interrupted by an export (user engine, natively): the
// image re-issues it for the time it had left, which the kernel wrote into
// its rem argument (common/ghost_policy.h, ghost_policy_sleep_left()), so a
// restored sleeper wakes when the original would have, not a whole sleep
// later. A sleep without rem has nothing to go by and restarts whole.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "ghost/engine.hpp"
#include "ghost/image.hpp"
#include "ghost/process.hpp"
#include "ghost/user_engine.hpp"

namespace {

enum class Call { Nanosleep, ClockNanosleep, NanosleepNoRem };

double monotonic() {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}

// Sleeps `seconds` with the raw call (glibc's nanosleep() is itself a
// clock_nanosleep()), then writes how long after its start it woke, in
// microseconds of CLOCK_MONOTONIC, to out and exits.
[[noreturn]] void sleeper(int out, Call call, long seconds) {
    const double start = monotonic();
    timespec req{seconds, 0}, rem{-1, -1};
    (void)::write(out, "R", 1);
    long r = 0;
    switch (call) {
    case Call::Nanosleep:
        r = ::syscall(SYS_nanosleep, &req, &rem);
        break;
    case Call::ClockNanosleep:
        r = ::syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &req, &rem);
        break;
    case Call::NanosleepNoRem:
        r = ::syscall(SYS_nanosleep, &req, nullptr);
        break;
    }
    const long us = r == 0 ? long((monotonic() - start) * 1e6) : -1;
    const std::string line = std::to_string(us) + "\n";
    (void)::write(out, line.data(), line.size());
    ::_exit(0);
}

struct Sleeper {
    pid_t pid = -1;
    int rd = -1, wr = -1;
    Sleeper(Call call, long seconds) {
        int p[2];
        EXPECT_EQ(::pipe(p), 0);
        rd = p[0];
        wr = p[1];
        pid = ::fork();
        if (pid == 0)
            sleeper(wr, call, seconds);
        char c = 0;
        EXPECT_EQ(::read(rd, &c, 1), 1);
    }
    ~Sleeper() {
        if (pid > 0 && ::kill(pid, SIGKILL) == 0)
            ::waitpid(pid, nullptr, 0);
        ::close(rd);
        ::close(wr);
    }
    // Microseconds after its start that the sleeper (or its copy) woke.
    long woke_after() const {
        char b[64] = {};
        std::size_t n = 0;
        while (n < sizeof(b) - 1 && ::read(rd, b + n, 1) == 1 && b[n] != '\n')
            n++;
        return std::strtol(b, nullptr, 10);
    }
};

// The 16 bytes at addr in the image's page data (a memory ghost's bytes).
timespec read_timespec(const ghost::image::Image& img, std::span<const std::byte> bytes,
                       std::uint64_t addr) {
    timespec t{-1, -1};
    for (const auto& v : img.vmas)
        for (const auto& run : v.runs)
            if (addr >= run.addr && addr + sizeof(t) <= run.addr + run.nr_pages * 4096 &&
                run.data_offset)
                std::memcpy(&t, bytes.data() + run.data_offset + (addr - run.addr), sizeof(t));
    return t;
}

// The image of a sleeper exported while it runs (the export interrupts its
// sleep and puts it back), once it has slept about 0.3 s of 30.
ghost::image::Image export_running(Sleeper& s, std::vector<std::byte>& bytes) {
    ::usleep(300000);
    ghost::UserEngine engine;
    auto g = engine.create_memory();
    EXPECT_TRUE(g);
    auto st = (*g)->export_process(s.pid, ghost::Fate::Run);
    EXPECT_TRUE(st) << st.error().what();
    auto view = (*g)->view();
    EXPECT_TRUE(view);
    bytes.assign(view->bytes().begin(), view->bytes().end());
    auto img = ghost::image::read(std::span<const std::byte>(bytes));
    EXPECT_TRUE(img) << img.error().what();
    return *img;
}

TEST(UserEngineSleep, AnInterruptedNanosleepIsReissuedForWhatItHadLeft) {
    Sleeper s(Call::Nanosleep, 30);
    std::vector<std::byte> bytes;
    const auto img = export_running(s, bytes);
    EXPECT_EQ(img.regs.ax, std::uint64_t(SYS_nanosleep)) << "re-issued, not restart_syscall";
    EXPECT_EQ(img.regs.di, img.regs.si) << "its request is now what it had left (rem)";
    const timespec left = read_timespec(img, bytes, img.regs.si);
    EXPECT_GE(left.tv_sec, 20);
    EXPECT_LT(left.tv_sec, 30) << "the kernel wrote what was left into rem";
}

TEST(UserEngineSleep, AnInterruptedRelativeClockNanosleepIsReissuedForWhatItHadLeft) {
    Sleeper s(Call::ClockNanosleep, 30);
    std::vector<std::byte> bytes;
    const auto img = export_running(s, bytes);
    EXPECT_EQ(img.regs.ax, std::uint64_t(SYS_clock_nanosleep));
    EXPECT_EQ(img.regs.si, 0u) << "still relative";
    EXPECT_EQ(img.regs.dx, img.regs.r10) << "its request is now what it had left (rem)";
    const timespec left = read_timespec(img, bytes, img.regs.r10);
    EXPECT_GE(left.tv_sec, 20);
    EXPECT_LT(left.tv_sec, 30);
}

TEST(UserEngineSleep, ASleepWithoutRemIsReissuedWhole) {
    Sleeper s(Call::NanosleepNoRem, 30);
    std::vector<std::byte> bytes;
    const auto img = export_running(s, bytes);
    EXPECT_EQ(img.regs.ax, std::uint64_t(SYS_nanosleep));
    EXPECT_EQ(img.regs.si, 0u);
    EXPECT_NE(img.regs.di, 0u);
    const timespec req = read_timespec(img, bytes, img.regs.di);
    EXPECT_EQ(req.tv_sec, 30);
    EXPECT_EQ(req.tv_nsec, 0);
}

// Checkpointed (and killed) 1.5 s into a 3 s sleep and restarted at once:
// the copy wakes about 3 s after the original began, where restarting the
// whole sleep would wake it 4.5 s after (the restart takes milliseconds).
TEST(UserEngineSleep, ARestoredSleeperWakesWhenTheOriginalWould) {
    Sleeper s(Call::Nanosleep, 3);
    ::usleep(1500000);
    ghost::UserEngine engine;
    char path[] = "/tmp/ghost-sleep-test.XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::unlink(path);
    ghost::CheckpointOptions o;
    o.fate = ghost::Fate::Kill;
    auto st = ghost::checkpoint(engine, s.pid, fd, o);
    ASSERT_TRUE(st) << st.error().what();
    ::waitpid(s.pid, nullptr, 0);
    s.pid = -1;
    ASSERT_EQ(::lseek(fd, 0, SEEK_SET), 0);
    ghost::RestartOptions ro;
    ro.inherit_fds = {{s.rd, s.rd}, {s.wr, s.wr}};
    auto copy = ghost::restart(engine, fd, ro);
    ::close(fd);
    ASSERT_TRUE(copy) << copy.error().what();
    const long us = s.woke_after();
    ::waitpid(*copy, nullptr, 0); // reaped by whoever its parent is; best effort
    EXPECT_GE(us, 3000000) << "never early";
    EXPECT_LT(us, 4000000) << "woke " << us / 1000 << " ms after the original began";
}

} // namespace
