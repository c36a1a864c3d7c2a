// SPDX-License-Identifier: GPL-2.0
// The user engine's batched system calls (libghost/src/user/call_batch.hpp)
// and its one-stop calls from placed code, run in a child held with ptrace:
// every queued call runs, in order, in the child; the first that fails
// stops the table and is named with its errno; a result other than the one
// expected fails; a queue longer than the table runs in several turns.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include "user/call_batch.hpp"
#include "user/tracee.hpp"

namespace {

using ghost::user::CallBatch;
using ghost::user::CallEntry;
using ghost::user::Regs;
using ghost::user::Tracee;

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kScratch = 0x6f0000000000ULL; // code page, then the table
constexpr std::uint64_t kArea = 0x6f1000000000ULL;    // where the tests map

// The mapping of pid that starts at addr, as /proc/PID/maps shows it
// ("rw-p"...), or "" when none starts there.
std::string perms_at(pid_t pid, std::uint64_t addr) {
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    std::string line;
    while (std::getline(maps, line)) {
        if (std::stoull(line.substr(0, line.find('-')), nullptr, 16) == addr)
            return line.substr(line.find(' ') + 1, 4);
    }
    return "";
}

class CallBatchTest : public ::testing::Test {
  protected:
    void SetUp() override {
        child_ = fork();
        ASSERT_GE(child_, 0);
        if (child_ == 0) {
            for (;;)
                pause();
        }
        auto t = Tracee::seize(child_);
        ASSERT_TRUE(t) << t.error().what();
        t_.emplace(std::move(*t));
        auto regs = t_->regs();
        ASSERT_TRUE(regs);
        base_ = *regs;
        auto insn = t_->find_syscall_insn(base_);
        ASSERT_TRUE(insn) << insn.error().what();
        t_->use_syscall_insn(*insn);
        auto at = t_->call(SYS_mmap, kScratch, 3 * kPage, PROT_READ | PROT_WRITE | PROT_EXEC,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                           static_cast<std::uint64_t>(-1), 0);
        ASSERT_TRUE(at);
        ASSERT_EQ(static_cast<std::uint64_t>(*at), kScratch);
        static constexpr std::byte kTrap[] = {std::byte{0x0f}, std::byte{0x05}, std::byte{0xcc}};
        ASSERT_TRUE(t_->write(kScratch, kTrap));
        ASSERT_TRUE(t_->write(kScratch + 64, ghost::user::call_loop_code()));
        t_->use_syscall_trap(kScratch);
    }
    void TearDown() override {
        t_.reset(); // detaches
        if (child_ > 0) {
            kill(child_, SIGKILL);
            waitpid(child_, nullptr, 0);
        }
    }
    CallBatch batch(std::size_t capacity) {
        return CallBatch(*t_, base_, kScratch + 64, kScratch + kPage, capacity);
    }
    std::uint64_t area(int i) const { return kArea + static_cast<std::uint64_t>(i) * 2 * kPage; }
    ghost::Result<void> map(CallBatch& b, int i, int prot = PROT_READ | PROT_WRITE) {
        return b.add("mapping area " + std::to_string(i), SYS_mmap, area(i), kPage,
                     static_cast<std::uint64_t>(prot),
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                     static_cast<std::uint64_t>(-1), 0, area(i));
    }

    pid_t child_ = -1;
    std::optional<Tracee> t_;
    Regs base_{};
};

TEST_F(CallBatchTest, OneStopCallFromPlacedCodeReturnsTheResult) {
    auto r = t_->call(SYS_getpid);
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_EQ(*r, child_);
    auto bad = t_->call(SYS_close, 100000);
    ASSERT_TRUE(bad);
    EXPECT_EQ(*bad, -EBADF);
}

TEST_F(CallBatchTest, RunsEveryCallInOrder) {
    auto b = batch(64);
    ASSERT_TRUE(map(b, 0));
    ASSERT_TRUE(map(b, 1));
    // Runs after the mapping it changes: order is kept.
    ASSERT_TRUE(b.add("mprotect", SYS_mprotect, area(1), kPage, PROT_READ));
    ASSERT_TRUE(b.add("getpid", SYS_getpid, 0, 0, 0, 0, 0, 0, static_cast<std::uint64_t>(child_)));
    EXPECT_EQ(perms_at(child_, area(0)), ""); // nothing runs before flush()
    auto f = b.flush();
    ASSERT_TRUE(f) << f.error().what();
    EXPECT_EQ(perms_at(child_, area(0)), "rw-p");
    EXPECT_EQ(perms_at(child_, area(1)), "r--p");
    EXPECT_TRUE(b.flush()); // an empty queue is nothing to do
}

TEST_F(CallBatchTest, StopsAtTheFirstFailureAndNamesIt) {
    auto b = batch(64);
    ASSERT_TRUE(map(b, 0));
    ASSERT_TRUE(b.add("closing fd 100000", SYS_close, 100000));
    ASSERT_TRUE(map(b, 1));
    auto f = b.flush();
    ASSERT_FALSE(f);
    EXPECT_EQ(f.error().code.value(), EBADF);
    EXPECT_NE(f.error().what().find("closing fd 100000"), std::string::npos) << f.error().what();
    EXPECT_EQ(perms_at(child_, area(0)), "rw-p");
    EXPECT_EQ(perms_at(child_, area(1)), ""); // after the failure: not run
    // The queue is empty again: a later batch runs on its own.
    ASSERT_TRUE(map(b, 2));
    ASSERT_TRUE(b.flush());
    EXPECT_EQ(perms_at(child_, area(2)), "rw-p");
}

TEST_F(CallBatchTest, AnUnexpectedResultFails) {
    auto b = batch(64);
    ASSERT_TRUE(b.add("getpid", SYS_getpid, 0, 0, 0, 0, 0, 0, 1));
    auto f = b.flush();
    ASSERT_FALSE(f);
    EXPECT_NE(f.error().what().find("getpid: the result was"), std::string::npos)
        << f.error().what();
}

TEST_F(CallBatchTest, ALongQueueRunsInTurns) {
    auto b = batch(3);
    for (int i = 0; i < 10; i++)
        ASSERT_TRUE(map(b, i, i % 2 ? PROT_READ : PROT_READ | PROT_WRITE));
    // Three turns ran while queueing; the tenth call waits for flush().
    EXPECT_EQ(perms_at(child_, area(7)), "r--p");
    EXPECT_EQ(perms_at(child_, area(8)), "rw-p");
    EXPECT_EQ(perms_at(child_, area(9)), "");
    ASSERT_TRUE(b.flush());
    for (int i = 0; i < 10; i++)
        EXPECT_EQ(perms_at(child_, area(i)), i % 2 ? "r--p" : "rw-p") << i;
}

} // namespace

namespace {

// run_each(): every entry runs, past one that fails, and each result comes
// back in its entry.
TEST_F(CallBatchTest, RunEachRunsPastAFailureAndGivesEveryResult) {
    CallEntry calls[4];
    calls[0].nr = SYS_getpid;
    calls[1].nr = SYS_close;
    calls[1].arg[0] = 100000;
    calls[2].nr = SYS_mmap;
    calls[2].arg[0] = area(3);
    calls[2].arg[1] = kPage;
    calls[2].arg[2] = PROT_READ;
    calls[2].arg[3] = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE;
    calls[2].arg[4] = static_cast<std::uint64_t>(-1);
    calls[3].nr = SYS_getppid;
    auto r = ghost::user::run_each(*t_, base_, kScratch + 2 * kPage, kScratch + kPage, calls);
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_EQ(static_cast<long>(calls[0].result), child_);
    EXPECT_EQ(static_cast<long>(calls[1].result), -EBADF);
    EXPECT_EQ(calls[2].result, area(3)); // after the failure: run all the same
    EXPECT_EQ(perms_at(child_, area(3)), "r--p");
    EXPECT_EQ(static_cast<long>(calls[3].result), getpid());
}

} // namespace
