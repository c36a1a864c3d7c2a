// SPDX-License-Identifier: GPL-2.0
// What the parts of ghost_bench_vs_criu share (bench/vs_criu/): the tools,
// one run's sample and failure, the run directory, the commands that start
// programs, the measurement of one run and the statistics over runs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ghost/fd.hpp"

namespace bench::vs_criu {

namespace fs = std::filesystem;

// --- process.cpp: programs, commands, the run directory, the workload

double now_ms();
std::string slurp(const fs::path& p);

struct Programs {
    std::string workload, ghostctl, ghost_export, ghost_restore, criu;
};

// PROG from the directory this benchmark lives in (bin/), else from PATH.
std::string find_program(const std::string& name);

// Runs argv with stdin on /dev/null and stdout/stderr into files; returns
// the wait status, or -1 when it could not be started.
int run(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err);

std::string status_text(int status);

// One run's failure: what went wrong, with the command's own words.
struct Failure {
    std::string what;
};

// The directory of one run, and the workload's markers in it.
class RunDir {
  public:
    explicit RunDir(fs::path dir);
    ~RunDir();
    const fs::path& path() const { return dir_; }
    fs::path operator/(const char* name) const { return dir_ / name; }

    // Waits until the workload renamed NAME into place (it writes a
    // temporary file and renames it, so the name appears complete).
    bool wait_for(const char* name, double timeout_ms) const;

  private:
    fs::path dir_;
    ghost::UniqueFd ifd_;
};

// Starts the daemon; returns its pid once its memory is filled.
std::optional<pid_t> start_workload(const Programs& pr, size_t mib, const RunDir& d, Failure& f);

// Waits until PID is the workload again and sleeps in its wait loop.
bool wait_restored(pid_t pid, const RunDir& d, Failure& f);

void kill_and_reap(pid_t pid);

// Whether this ghostctl has checkpoint and restart.
bool ghostctl_can_checkpoint(const Programs& pr, const fs::path& dir);

// Whether this ghostctl opens the user engine; if not, @why says what it said.
bool ghostctl_has_user_engine(const Programs& pr, const fs::path& dir, std::string& why);

// --- measure.cpp: one run of one tool

enum class Tool { Ghostctl, User, UserLazy, Stubs, Ioctl, IoctlMem, Criu };

const char* tool_name(Tool t);

struct Sample {
    double ckpt_ms = 0, restart_ms = 0, total_ms = 0;
    std::uint64_t image_bytes = 0;
    double frozen_ms = -1; // as the tool reports it; -1 when it does not say
    // A second checkpoint of a fresh workload that leaves it running
    // (ghostctl/user/criu only; -1 for the others): the command's time and
    // how long the process was held still.
    double lr_export_ms = -1, lr_frozen_ms = -1;
    // From the restart's start until the restored process has read back
    // all its memory and found it intact (its verify file): for a lazy
    // restart, the time until every page is in and touched.
    double memory_read_ms = -1;
};

// Checkpoint + restart of a fresh workload of MIB MiB with TOOL, verified.
std::optional<Sample> run_once(Tool tool, size_t mib, const Programs& pr, const fs::path& base,
                               Failure& f);

// A checkpoint that leaves a fresh workload running; adds to s.
bool leave_running_once(Tool tool, size_t mib, const Programs& pr, const fs::path& base, Sample& s,
                        Failure& f);

bool has_leave_running(Tool t);

// --- report.cpp: statistics, the tables, the --json file

struct Stat {
    double mean = 0, min = 0, median = 0;
};

Stat stat_of(std::vector<double> v);

struct Series {
    std::vector<Sample> samples;
    Stat get(double Sample::*m) const {
        std::vector<double> v;
        for (const auto& s : samples)
            v.push_back(s.*m);
        return stat_of(v);
    }
};

using Results = std::map<std::pair<size_t, Tool>, Series>;

// The tables of every size and tool, on stdout.
void print_tables(const std::vector<size_t>& sizes, const std::vector<Tool>& tools, int repeat,
                  int warmup, Results& res);

// One row per size and tool into FILE; false (said on stderr) when it fails.
bool write_json(const fs::path& file, const std::vector<size_t>& sizes,
                const std::vector<Tool>& tools, Results& res);

// --- baselines.cpp: what starting the programs and the same bytes cost

void print_startup_costs(const Programs& pr, const fs::path& base);

void print_same_bytes(const std::vector<size_t>& sizes, int repeat, const fs::path& base);

} // namespace bench::vs_criu
