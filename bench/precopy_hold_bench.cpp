// SPDX-License-Identifier: GPL-2.0
// ghost_bench_precopy_hold: how long the images of a pre-copy (the first,
// a later round, the last) hold a process that keeps writing, against how
// long a whole export holds it
// (stop-and-copy), same process, same run; user engine, natively, no
// daemon (migd's downtime adds the transfer, the restore and the commit:
// bench/precopy_bench). Documentation/performance.md.
//
//   ghost_bench_precopy_hold [--mib 256,1024] [--rounds 40]
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "ghost/precopy.hpp"
#include "ghost/process.hpp"
#include "ghost/user_engine.hpp"

namespace {

// A child holding mib MiB, every page written, then rewriting 1 MiB/s;
// returned once every page is written (at 2 GiB that takes a second or
// more, and an image taken before would carry the first writes' frontier).
pid_t start_writer(unsigned mib) {
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0)
        return -1;
    const pid_t pid = ::fork();
    if (pid != 0) {
        ::close(ready[1]);
        char c = 0;
        const bool ok = pid > 0 && ::read(ready[0], &c, 1) == 1;
        ::close(ready[0]);
        return ok ? pid : -1;
    }
    ::close(ready[0]);
    const std::size_t len = std::size_t{mib} << 20;
    auto* p = static_cast<unsigned char*>(
        ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED)
        ::_exit(1);
    std::memset(p, 1, len);
    if (::write(ready[1], "r", 1) != 1)
        ::_exit(1);
    ::close(ready[1]);
    std::size_t at = 0;
    const timespec tick{0, 10 * 1000 * 1000};
    for (unsigned char gen = 2;; gen++) {
        ::nanosleep(&tick, nullptr);
        for (int i = 0; i < 3; i++, at = (at + 4096) % len) // ~1.2 MiB/s
            std::memset(p + at, gen, 4096);
    }
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
    std::vector<unsigned> sizes{256, 1024};
    unsigned rounds = 40;
    CLI::App app{"Per size: a process of that many MiB rewriting about 1 MiB/s; the median time "
                 "a whole export (stop-and-copy, to /dev/null) holds it, over 5; the median time "
                 "the first image of a pre-copy (whole, the write tracking armed) holds it, over "
                 "3 pre-copies; after that, the median time a pre-copy round (an image that "
                 "leaves it running) and a last image hold it, over ROUNDS of each taken in turn "
                 "20 ms apart; and the ratio of the last image's to the whole export's."};
    app.add_option("--mib", sizes, "sizes in MiB, comma-separated")
        ->delimiter(',')
        ->check(CLI::Range(1U, 1U << 20));
    app.add_option("--rounds", rounds, "rounds and last images timed per size")
        ->check(CLI::Range(1U, 100000U));
    CLI11_PARSE(app, argc, argv);
    if (auto s = ghost::Precopy::supported(); !s) {
        fmt::print(stderr, "ghost_bench_precopy_hold: {}\n", s.error().what());
        return 1;
    }
    ghost::UserEngine engine;
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    fmt::print("| MiB | whole export held ms | first pre-copy image held ms | pre-copy round held "
               "ms | last pre-copy image held ms | ratio |\n"
               "|---|---|---|---|---|---|\n");
    for (const unsigned mib : sizes) {
        const pid_t pid = start_writer(mib);
        if (pid < 0) {
            fmt::print(stderr, "ghost_bench_precopy_hold: cannot start a {} MiB writer\n", mib);
            return 1;
        }
        const auto held = [&](ghost::Precopy* pc, ghost::Fate fate) -> double {
            ghost::CheckpointOptions o;
            o.fate = fate;
            o.precopy = pc;
            auto s = ghost::checkpoint(engine, pid, null, o);
            if (!s) {
                fmt::print(stderr, "ghost_bench_precopy_hold: {}\n", s.error().what());
                ::kill(pid, SIGKILL);
                std::exit(1);
            }
            if (fate == ghost::Fate::Stop)
                ::kill(pid, SIGCONT);
            return static_cast<double>(s->frozen_ns) / 1e6;
        };
        std::vector<double> whole, first, round, last;
        for (int i = 0; i < 5; i++)
            whole.push_back(held(nullptr, ghost::Fate::Stop));
        // Each a new pre-copy (the one before, ended, let go of its tracking).
        ghost::Precopy pc;
        for (int i = 0; i < 3; i++) {
            pc = ghost::Precopy();
            first.push_back(held(&pc, ghost::Fate::Run));
        }
        for (unsigned i = 0; i < rounds; i++) {
            ::usleep(20000);
            round.push_back(held(&pc, ghost::Fate::Run));
            ::usleep(20000);
            last.push_back(held(&pc, ghost::Fate::Stop));
        }
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        fmt::print("| {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.3f}x |\n", mib, median(whole),
                   median(first), median(round), median(last), median(last) / median(whole));
    }
    return 0;
}
