// SPDX-License-Identifier: GPL-2.0
// Checkpoint and restart with the user-space (ptrace) engine, natively (no
// module, no VM), beside memcpy of the same bytes measured in the same run:
//   build/bin/ghost_bench_user [--sizes 16,64,256] [--engines user] [--dir /tmp]
//                              [--iterations N] [Google Benchmark flags]
//
// A workload child (this program, executed anew) holds SIZE MiB of private anonymous memory, every
// 64-bit word a distinct non-zero value (all pages present and dirty), and waits in read(2) on a
// pipe. Per engine and size:
//  - export-memory: Ghost::export_process(pid, Fate::Run) into a memory
//    ghost, timed around the call (the ghost is created and dropped off the
//    clock, and the workload, which keeps running, answers a ping after each
//    export);
//  - export-file: the same into a file ghost on a file in --dir, truncated
//    off the clock before each export (no fsync: page cache, as a checkpoint
//    to tmpfs);
//  - restart: ghost::restart() of a checkpoint file (written off the clock,
//    the workload killed), timed until the restored process, a child of this
//    program, answers a ping through the pipe it inherited: a full restart of
//    a process that runs again. Each restored copy is then killed.
//    restart-pipe: the same image read from a pipe that a thread splices the
//    file into (a stream, as migd's restore stub reads one).
// Every image is checked off the clock: after the timed loop the image is
// read back with libghost's reader (checksum included) and every page of the
// workload's mapping must hold the pattern; each restored copy must answer
// with its own pid and find every word of its memory intact; the exported
// workload must still be intact. Any failure fails the benchmark (exit 1).
//
// Baselines over the same bytes, in the same run: memcpy (the ratio's
// baseline), memcpy into fresh pages (page faults and zeroing, what a restore
// pays for its new mappings), process_vm_readv / process_vm_writev of the
// workload's mapping, reading its /proc/PID/pagemap entries, crc32c
// (libghost's, as the image checksum), and write(2) of the bytes in 4 MiB
// calls into a memfd and into a file in --dir. After Google Benchmark's own report, a table gives
// each operation's time, bandwidth (image bytes, or the bytes copied, over
// time) and that bandwidth as a fraction of memcpy's and of issue 15's
// one-copy floor (/floor: process_vm_readv of the same bytes into fresh
// pages, mapped for each iteration; verified and unmapped off the clock).
//
// The parts, in bench/user/: user_bench.hpp (what they share), workload.cpp
// (the workload and the image check), engine_ops.cpp (export and restart),
// baselines.cpp (the same bytes), report.cpp (the last table), main.cpp
// (options, registration).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "user_bench.hpp"

namespace bench::user {

Config cfg;
std::map<std::string, std::unique_ptr<ghost::Engine>> engines;
std::vector<std::string> failures;

void fail(benchmark::State& state, std::string what) {
    failures.push_back(what);
    state.SkipWithError(failures.back().c_str());
}

} // namespace bench::user

using namespace bench::user;

namespace {

std::vector<std::string> split(const char* s) {
    std::vector<std::string> v;
    std::string cur;
    for (const char* p = s;; p++) {
        if (*p == ',' || !*p) {
            if (!cur.empty())
                v.push_back(cur);
            cur.clear();
            if (!*p)
                break;
        } else {
            cur += *p;
        }
    }
    return v;
}

void usage(FILE* out) {
    fmt::print(out, "Usage: ghost_bench_user [--sizes 16,64,256] [--engines user[,kernel]]\n"
                    "                        [--dir DIR] [--iterations N] [--benchmark_...]\n"
                    "\n"
                    "Checkpoint (export to a memory ghost and to a file in DIR, default /tmp)\n"
                    "and restart of a process with SIZE MiB of dirty anonymous memory, with each\n"
                    "engine, beside memcpy of the same bytes and the system calls a ptrace engine\n"
                    "is made of, all in the same run. Each engine operation runs N times\n"
                    "(default 5) and is verified off the clock; the last table gives bandwidths\n"
                    "and ratios to memcpy and to the one-copy floor (process_vm_readv of the\n"
                    "same bytes into fresh pages). '--engines none' runs the baselines only.\n"
                    "Exit status 1 when anything failed; 2 usage error. Google Benchmark's\n"
                    "flags (--benchmark_filter=REGEX, ...) work as usual.\n");
}

} // namespace

int main(int argc, char** argv) {
    if (argc == 6 && std::string(argv[1]) == workload_flag)
        workload(std::strtoull(argv[2], nullptr, 10), std::atoi(argv[3]), std::atoi(argv[4]),
                 std::atoi(argv[5]));
    for (int i = 1; i < argc; i++) {
        if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
            usage(stdout); // before Google Benchmark answers with only its own flags
            return 0;
        }
    }
    benchmark::Initialize(&argc, argv);
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--sizes" && has_value) {
            cfg.sizes.clear();
            for (const auto& s : split(argv[++i]))
                cfg.sizes.push_back(std::strtoul(s.c_str(), nullptr, 10));
        } else if (a == "--engines" && has_value) {
            cfg.engines = split(argv[++i]);
            if (cfg.engines == std::vector<std::string>{"none"})
                cfg.engines.clear();
        } else if (a == "--dir" && has_value) {
            cfg.dir = argv[++i];
        } else if (a == "--iterations" && has_value) {
            cfg.iterations = std::max(1, std::atoi(argv[++i]));
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (cfg.sizes.empty() || std::count(cfg.sizes.begin(), cfg.sizes.end(), 0u)) {
        usage(stderr);
        return 2;
    }
    for (const auto& e : cfg.engines) {
        auto kind = ghost::parse_engine_kind(e);
        auto engine = kind ? ghost::Engine::open(*kind)
                           : ghost::Result<std::unique_ptr<ghost::Engine>>(kind.error());
        if (!engine) {
            fmt::print(stderr, "ghost_bench_user: engine '{}': {}\n", e, engine.error().what());
            return 1;
        }
        engines[e] = std::move(*engine);
    }
    // Restored copies are children of this program; nothing else is.
    signal(SIGPIPE, SIG_IGN);

    // Engine operations run --iterations times (each one is long, and its
    // setup is a new workload); baselines as long as Google Benchmark likes.
    const auto reg = [](const std::string& name, auto fn) {
        return benchmark::RegisterBenchmark(name.c_str(), fn)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    };
    for (size_t mib : cfg.sizes) {
        reg(name_of("memcpy", mib), [mib](benchmark::State& s) {
            bm_memcpy(s, mib);
        })->MinTime(0.5);
        for (const auto& e : cfg.engines) {
            for (const auto& op : engine_ops)
                reg(name_of(e + op.name, mib), [&op, e, mib](benchmark::State& s) {
                    op.fn(s, e, mib);
                })->Iterations(cfg.iterations);
        }
        for (const auto& b : baselines)
            reg(name_of(b.name, mib), [&b, mib](benchmark::State& s) {
                b.fn(s, mib);
            })->MinTime(0.5);
    }

    TableReporter rep;
    benchmark::RunSpecifiedBenchmarks(&rep);
    benchmark::Shutdown();

    print_table(rep);
    if (!failures.empty()) {
        fmt::print(stderr, "\nghost_bench_user: {} failure(s):\n", failures.size());
        for (const auto& f : failures)
            fmt::print(stderr, "  {}\n", f);
        return 1;
    }
    return 0;
}
