// SPDX-License-Identifier: GPL-2.0
// ghostctl checkpoint --json on the host (the user engine): what scripts and
// benchmarks read, among them how long the process was held still.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "proc_state.hpp"
#include "subprocess.hpp"

namespace {

using namespace std::chrono_literals;

// A counter with no inherited pipes, killed and reaped at the end.
class Counter {
  public:
    Counter() {
        pid_ = ::fork();
        if (pid_ == 0) {
            const int null = ::open("/dev/null", O_RDWR);
            ::dup2(null, 0);
            ::dup2(null, 1);
            ::dup2(null, 2);
            ::execl(COUNTER_PATH, COUNTER_PATH, "20", nullptr);
            ::_exit(127);
        }
        std::this_thread::sleep_for(200ms);
    }
    ~Counter() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    pid_t pid() const { return pid_; }

  private:
    pid_t pid_;
};

std::string image_path(const char* tag) {
    return std::string(::testing::TempDir()) + "ghost-json-" + tag + "-" +
           std::to_string(::getpid()) + ".img";
}

TEST(UserEngineCli, CheckpointJsonReportsTheImageAndTheTimeHeld) {
    Counter c;
    const std::string img = image_path("run");
    auto ck = testing_util::run({GHOSTCTL_PATH, "--engine", "user", "checkpoint",
                                 std::to_string(c.pid()), "-o", img, "--leave-running", "--json"});
    ASSERT_EQ(ck.status, 0) << ck.err;
    const auto j = nlohmann::json::parse(ck.out);
    EXPECT_EQ(j.at("pid").get<pid_t>(), c.pid());
    EXPECT_EQ(j.at("image").get<std::string>(), img);
    EXPECT_EQ(j.at("process").get<std::string>(), "running");
    struct stat st {};
    ASSERT_EQ(::stat(img.c_str(), &st), 0);
    EXPECT_EQ(j.at("bytes").get<std::uint64_t>(), static_cast<std::uint64_t>(st.st_size));
    EXPECT_GT(j.at("frozen_ms").get<double>(), 0.0);
    // It was held, not left stopped or killed.
    const char state = testing_util::state_of(c.pid());
    EXPECT_TRUE(state == 'S' || state == 'R') << state;
    ::unlink(img.c_str());
}

TEST(UserEngineCli, CheckpointJsonSaysTheProcessWasKilled) {
    Counter c;
    const std::string img = image_path("kill");
    auto ck = testing_util::run({GHOSTCTL_PATH, "--engine", "user", "checkpoint",
                                 std::to_string(c.pid()), "-o", img, "--json"});
    ASSERT_EQ(ck.status, 0) << ck.err;
    EXPECT_EQ(nlohmann::json::parse(ck.out).at("process").get<std::string>(), "killed");
    int ws = 0;
    ASSERT_EQ(::waitpid(c.pid(), &ws, 0), c.pid());
    EXPECT_TRUE(WIFSIGNALED(ws));
    ::unlink(img.c_str());
}

// The END checksum is the writer's choice (the faster here, or
// GHOST_IMAGE_CHECKSUM): each kind is written, named by inspect, and
// restarts a counter that counts on.
TEST(UserEngineCli, EitherChecksumKindIsWrittenAndRestarts) {
    for (const char* kind : {"xxh64", "crc32c"}) {
        Counter c;
        const std::string img = image_path(kind);
        ::setenv("GHOST_IMAGE_CHECKSUM", kind, 1);
        auto ck = testing_util::run({GHOSTCTL_PATH, "--engine", "user", "checkpoint",
                                     std::to_string(c.pid()), "-o", img, "--leave-running"});
        ::unsetenv("GHOST_IMAGE_CHECKSUM");
        ASSERT_EQ(ck.status, 0) << kind << ": " << ck.err;
        auto in = testing_util::run({GHOSTCTL_PATH, "inspect", img, "--json"});
        ASSERT_EQ(in.status, 0) << in.err;
        EXPECT_EQ(nlohmann::json::parse(in.out).at("checksum").get<std::string>(), kind);
        auto rs =
            testing_util::run({GHOSTCTL_PATH, "--engine", "user", "restart", "--detach", img});
        ASSERT_EQ(rs.status, 0) << kind << ": " << rs.err;
        const pid_t restored = std::stoi(rs.out);
        std::this_thread::sleep_for(100ms);
        const char st = testing_util::state_of(restored);
        EXPECT_TRUE(st == 'S' || st == 'R') << kind << ": state " << st;
        ::kill(restored, SIGKILL);
        ::unlink(img.c_str());
    }
}

TEST(UserEngineCli, CheckpointJsonWithTheImageOnStdoutIsAUsageError) {
    Counter c;
    auto ck = testing_util::run({GHOSTCTL_PATH, "--engine", "user", "checkpoint",
                                 std::to_string(c.pid()), "-o", "-", "--json"});
    EXPECT_EQ(ck.status, 2);
    EXPECT_NE(ck.err.find("--json prints on standard output"), std::string::npos) << ck.err;
    EXPECT_NE(testing_util::state_of(c.pid()), 'Z'); // not touched
}

} // namespace
