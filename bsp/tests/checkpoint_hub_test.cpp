// SPDX-License-Identifier: GPL-2.0
// The hub's side of a coordinated checkpoint, natively (no migd): a job of
// real VPs (bsp-lu, bsp-alltoall) under a Hub with a Checkpointer that
// only looks. At every due barrier each VP must have applied its DELIVER
// and detached: its process holds no descriptor but 0, 1 and 2 (no socket
// to the hub, nothing in flight), and the hub's state names the next
// superstep. The job then finishes with the answer of a run without
// checkpoints.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hub.hpp"
#include "wire.hpp"

using namespace ghost;
using namespace ghost::bsp;
namespace fs = std::filesystem;

namespace {

// Descriptors the process holds (/proc/PID/fd).
std::vector<int> fds_of(pid_t pid) {
    std::vector<int> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fmt::format("/proc/{}/fd", pid), ec))
        out.push_back(std::stoi(e.path().filename().string()));
    std::sort(out.begin(), out.end());
    return out;
}

class LookingCheckpointer final : public Checkpointer {
  public:
    explicit LookingCheckpointer(unsigned every) : every_(every) {}
    bool due(std::uint64_t s) override { return s >= 1 && (s + 1) % every_ == 0; }
    void checkpoint(const HubState& st, std::span<const pid_t> pids) override {
        supersteps.push_back(st.superstep);
        for (pid_t p : pids)
            if (fds_of(p) != std::vector<int>{0, 1, 2})
                held_more = true;
    }
    std::vector<std::uint64_t> supersteps;
    bool held_more = false;

  private:
    unsigned every_;
};

struct Run {
    Outcome outcome;
    std::string out; // every VP's standard output
    std::vector<int> status;
};

// The program as P VPs under a Hub (checkpointer: may be null).
Run run_job(const std::vector<std::string>& cmd, int nprocs, Checkpointer* ck) {
    static int seq = 0;
    const std::string job = fmt::format("ckpt-test-{}-{}", ::getpid(), ++seq);
    const std::string outfile = fmt::format("/tmp/{}.out", job);
    auto listen = wire::listen_abstract(job);
    EXPECT_TRUE(listen) << (listen ? "" : listen.error().what());
    Hub hub(std::move(*listen), job, nprocs);
    hub.set_checkpointer(ck);
    std::vector<pid_t> pids;
    for (int v = 0; v < nprocs; ++v) {
        const pid_t c = ::fork();
        if (c == 0) {
            const int o = ::open(outfile.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            const int n = ::open("/dev/null", O_RDONLY);
            ::dup2(n, 0);
            ::dup2(o, 1);
            ::close_range(3, ~0U, 0);
            ::setenv("GHOST_BSP_JOB", job.c_str(), 1);
            ::setenv("GHOST_BSP_PID", std::to_string(v).c_str(), 1);
            ::setenv("GHOST_BSP_NPROCS", std::to_string(nprocs).c_str(), 1);
            std::vector<char*> av;
            for (const auto& a : cmd)
                av.push_back(const_cast<char*>(a.c_str()));
            av.push_back(nullptr);
            ::execv(av[0], av.data());
            ::_exit(127);
        }
        pids.push_back(c);
        hub.set_pid(v, c);
    }
    Run r;
    r.outcome = hub.run();
    for (pid_t p : pids) {
        int st = 0;
        ::waitpid(p, &st, 0);
        r.status.push_back(st);
    }
    std::ifstream in(outfile);
    std::stringstream ss;
    ss << in.rdbuf();
    r.out = std::regex_replace(ss.str(), std::regex(" seconds=[0-9.e+-]+"), "");
    ::unlink(outfile.c_str());
    return r;
}

// Barriers 2..S (S: the supersteps= of the result line) that are
// multiples of every each make a checkpoint.
void expect_same_answer(const std::vector<std::string>& cmd, int nprocs, unsigned every,
                        std::size_t checkpoints) {
    const Run ref = run_job(cmd, nprocs, nullptr);
    ASSERT_TRUE(ref.outcome.ok) << ref.outcome.why;
    ASSERT_NE(ref.out.find("value="), std::string::npos) << ref.out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(ref.out, m, std::regex("supersteps=([0-9]+)"))) << ref.out;
    const unsigned supersteps = static_cast<unsigned>(std::stoul(m[1]));
    EXPECT_EQ(checkpoints, supersteps / every - (every == 1 ? 1 : 0)) << ref.out;
    LookingCheckpointer ck(every);
    const Run r = run_job(cmd, nprocs, &ck);
    ASSERT_TRUE(r.outcome.ok) << r.outcome.why;
    for (int st : r.status)
        EXPECT_EQ(st, 0);
    EXPECT_EQ(r.out, ref.out);
    ASSERT_EQ(ck.supersteps.size(), checkpoints);
    // The hub's state names the superstep the VPs resume in: barrier b
    // (superstep b-1 ended) for b = every, 2 every, ...
    for (std::size_t i = 0; i < ck.supersteps.size(); ++i)
        EXPECT_EQ(ck.supersteps[i], (i + 1) * every + (every == 1 ? 1 : 0));
    EXPECT_FALSE(ck.held_more) << "a VP held more than fds 0, 1, 2 while checkpointed";
}

} // namespace

// bsp-lu 12: 2N+1 + 4 = 29 supersteps, barriers 1..29 but the last
// (bsp_end): checkpoints at barriers 3, 6, ..., 27.
TEST(BspCheckpointHub, LuAnswersTheSameWithACheckpointAtEveryThirdBarrier) {
    expect_same_answer({BSP_LU_PATH, "12"}, 3, 3, 9);
}

// Puts, sends and gets in every superstep: none lost or doubled across the
// checkpoints (the application checks every byte).
TEST(BspCheckpointHub, AllToAllAnswersTheSameWithACheckpointAtEveryBarrier) {
    // 9 supersteps: barriers 2..9 (the first never).
    expect_same_answer({BSP_ALLTOALL_PATH, "333", "5"}, 3, 1, 8);
}
