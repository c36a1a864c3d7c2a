// SPDX-License-Identifier: GPL-2.0
// What the parts of ghost_bench_user share (bench/user/): the workload and
// its checks, the configuration and the failures, the benchmarks the main
// program registers, and the reporter whose rows make the last table.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "ghost/engine.hpp"
#include "ghost/fd.hpp"
#include "ghost/image.hpp"

namespace bench::user {

inline constexpr size_t page = 4096;

// Never zero (the low bit is set), different for every word: as
// ghost-ckpt-workload.
inline std::uint64_t pattern(std::uint64_t i) {
    std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    return x | 1;
}

// --- workload.cpp: the workload, its image checked, temporary files

std::string errno_text();

void kill_and_reap(pid_t pid);

// The workload's two pipes. This program keeps all four ends open at the
// same numbers as the workload has them, so that a copy restarted by
// ghost::restart() (a fork of this program) finds the ends the image marks
// as inherited. Only one process may listen at a time.
struct Pipes {
    ghost::UniqueFd ctl_r, ctl_w, rep_r, rep_w;
    static std::optional<Pipes> make();
};

// This program runs as the workload when its first argument is this, then
// BYTES READY-FD CTL-FD REP-FD.
inline constexpr const char* workload_flag = "--as-workload";

// The workload, in the forked child: memory, then "ready" (the mapping's
// address) on @ready, which it closes, then commands on ctl: 'p' answers its pid, 'v' the
// number of wrong words in its memory.
[[noreturn]] void workload(size_t bytes, int ready, int ctl, int rep);

struct Workload {
    pid_t pid = -1;
    std::uint64_t addr = 0;
    size_t bytes = 0;
    Pipes pipes;

    Workload() = default;
    Workload(Workload&& o) noexcept
        : pid(std::exchange(o.pid, -1)), addr(o.addr), bytes(o.bytes), pipes(std::move(o.pipes)) {}
    Workload& operator=(Workload&&) = delete;
    ~Workload() { kill_and_reap(pid); }

    // Sends @cmd, returns the answer of whoever listens (never negative), or
    // -1 when nobody answers.
    std::int64_t ask(char cmd) const;
};

std::optional<Workload> start_workload(size_t bytes, std::string& why);

// Reads an image and checks that every page of the workload's mapping is in
// it with the pattern; empty on success, else what is wrong.
std::string verify_image(ghost::image::Source& src, const Workload& w);
std::string verify_image_fd(int fd, const Workload& w);

// A file in @dir, already unlinked.
ghost::UniqueFd temp_file(const std::string& dir);

// --- main.cpp: the configuration, the engines, the failures

struct Config {
    std::vector<size_t> sizes{16, 64, 256};
    std::vector<std::string> engines{"user"};
    std::string dir = "/tmp";
    int iterations = 5;
};

extern Config cfg;
extern std::map<std::string, std::unique_ptr<ghost::Engine>> engines;
extern std::vector<std::string> failures; // every verification failure, for the exit status

void fail(benchmark::State& state, std::string what);

// --- engine_ops.cpp: the engine's operations

void bm_export(benchmark::State& state, const std::string& engine_name, size_t mib, bool to_file);
void bm_restart(benchmark::State& state, const std::string& engine_name, size_t mib, bool pipe);

// Each engine's rows, "ENGINE/" + name, in the order of the table.
struct EngineOp {
    const char* name;
    void (*fn)(benchmark::State&, const std::string& engine, size_t mib);
};
extern const std::span<const EngineOp> engine_ops;

// --- baselines.cpp: baselines over the same bytes

void bm_memcpy(benchmark::State& state, size_t mib);

// Issue 15's one-copy floor: the "/floor" column divides by its bandwidth.
inline constexpr const char* floor_name = "process_vm_readv-fresh-pages";

// The baselines after memcpy, in the order of the table.
struct Baseline {
    const char* name;
    void (*fn)(benchmark::State&, size_t);
};
extern const std::span<const Baseline> baselines;

// --- report.cpp: the rows of Google Benchmark's report, the last table

// Keeps each benchmark's time per iteration and bytes per second.
class TableReporter : public benchmark::ConsoleReporter {
  public:
    TableReporter();
    struct Row {
        double ms = 0, bytes_per_s = 0;
        std::map<std::string, double> counters;
    };
    void ReportRuns(const std::vector<Run>& runs) override;
    std::map<std::string, Row> rows;
};

std::string name_of(const std::string& what, size_t mib);

// Bandwidths and ratios to memcpy and to the floor, on stdout.
void print_table(const TableReporter& rep);

} // namespace bench::user
