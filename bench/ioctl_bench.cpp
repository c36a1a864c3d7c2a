// SPDX-License-Identifier: GPL-2.0
// Cost of a round trip into ghost.ko (the version ioctl), beside the cheapest
// system call (getppid) measured in the same run. Every later ioctl pays at
// least this much, so it is the floor of per-call overhead. Run in the VM:
//   tests/vm/run -- ghost_bench_ioctl
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <map>
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <linux/ghost.h>

#include "ghost/fd.hpp"

namespace {

void BM_getppid_syscall(benchmark::State& state) {
    for (auto _ : state)
        benchmark::DoNotOptimize(::syscall(SYS_getppid));
}
BENCHMARK(BM_getppid_syscall);

void BM_ghost_version_ioctl(benchmark::State& state) {
    ghost::UniqueFd fd(::open("/dev/ghost", O_RDWR | O_CLOEXEC));
    if (!fd) {
        state.SkipWithError("cannot open /dev/ghost (is ghost.ko loaded?)");
        return;
    }
    ghost_version v{};
    for (auto _ : state) {
        v = {};
        v.size = sizeof(v);
        if (::ioctl(fd.get(), GHOST_IOC_VERSION, &v) != 0) {
            state.SkipWithError("GHOST_IOC_VERSION failed");
            return;
        }
        benchmark::DoNotOptimize(v);
    }
}
BENCHMARK(BM_ghost_version_ioctl);

// Prints as usual and keeps each benchmark's time per iteration for the ratio.
class RatioReporter : public benchmark::ConsoleReporter {
  public:
    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        for (const auto& r : runs)
            if (!r.error_occurred && r.run_type == Run::RT_Iteration)
                ns[r.benchmark_name()] = r.GetAdjustedRealTime();
    }
    std::map<std::string, double> ns;
};

} // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    RatioReporter rep;
    benchmark::RunSpecifiedBenchmarks(&rep);
    benchmark::Shutdown();
    const auto base = rep.ns.find("BM_getppid_syscall");
    const auto ioctl = rep.ns.find("BM_ghost_version_ioctl");
    if (base == rep.ns.end() || ioctl == rep.ns.end() || base->second <= 0) {
        fmt::print(stderr, "ghost_bench_ioctl: no ratio: a benchmark did not run\n");
        return 1;
    }
    fmt::print("ratio version-ioctl / getppid: {:.2f}x ({:.0f} ns vs {:.0f} ns)\n",
               ioctl->second / base->second, ioctl->second, base->second);
    return 0;
}
