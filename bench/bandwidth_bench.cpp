// SPDX-License-Identifier: GPL-2.0
// Export and import bandwidth of ghost.ko through the memory backend, beside
// memcpy of the same number of bytes, measured in the same run. Run in the VM:
//   tests/vm/run -- ghost_bench_bandwidth [--sizes 16,64,256] [--repeat N]
//
// A workload process touches SIZE MiB of anonymous memory and blocks in
// read(2) on a pipe.
//  - export: GHOST_IOC_EXPORT with GHOST_EXPORT_RUN, timed around the ioctl
//    (the workload keeps running, so it can be exported again);
//  - import: a fresh child takes a timestamp, then imports the image in place;
//    the restored workload's read(2) returns at once (the pipe already holds
//    a byte) and it reports the time it sees. The difference is the import.
// Bandwidth is image bytes over time; the best of --repeat runs is kept for
// each, as for the baselines: user-space memcpy, and "kcopy", the kernel's own
// copy routine (read(2) of a tmpfs file), which is what the module's copies
// run at. Prints a table and the ratios to both.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ghost/engine.hpp"
#include "ghost/fd.hpp"

namespace {

double now() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

struct Pipe {
    ghost::UniqueFd r, w;
    Pipe() {
        int p[2];
        if (pipe(p) == 0) {
            r.reset(p[0]);
            w.reset(p[1]);
        }
    }
};

bool write_all(int fd, const void* p, size_t n) {
    return write(fd, p, n) == static_cast<ssize_t>(n);
}
bool read_all(int fd, void* p, size_t n) {
    return read(fd, p, n) == static_cast<ssize_t>(n);
}

// The workload: SIZE bytes touched, then "ready", then read(ctl) and report
// the time it resumed on @rep; then exit.
[[noreturn]] void workload(size_t size, int ready, int ctl, int rep) {
    auto* p = static_cast<char*>(
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED)
        _exit(2);
    for (size_t i = 0; i < size; i += 4096)
        p[i] = static_cast<char>(i >> 12);
    char c = 'R';
    if (!write_all(ready, &c, 1))
        _exit(3);
    close(ready);
    for (;;) {
        if (read(ctl, &c, 1) != 1)
            _exit(4);
        const double t = now();
        if (!write_all(rep, &t, sizeof(t)))
            _exit(5);
    }
}

struct Result {
    size_t bytes = 0;
    double export_s = 1e9, import_s = 1e9, memcpy_s = 1e9, kcopy_s = 1e9, frozen_s = 1e9;
};

bool measure(size_t size, int repeat, Result& r) {
    Pipe ready, ctl, rep, t0pipe;
    const pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        workload(size, ready.w.get(), ctl.r.get(), rep.w.get());
    }
    ready.w.reset();
    char c;
    if (!read_all(ready.r.get(), &c, 1))
        return false;

    auto engine = ghost::Engine::open(ghost::EngineKind::Kernel);
    if (!engine) {
        fmt::print(stderr, "{}\n", engine.error().what());
        return false;
    }
    auto g = (*engine)->create_memory();
    if (!g) {
        fmt::print(stderr, "{}\n", g.error().what());
        return false;
    }
    for (int i = 0; i < repeat; i++) {
        const double t = now();
        auto e = (*g)->export_process(pid, ghost::Fate::Run);
        if (!e) {
            fmt::print(stderr, "export: {}\n", e.error().what());
            return false;
        }
        r.export_s = std::min(r.export_s, now() - t);
        r.frozen_s = std::min(r.frozen_s, static_cast<double>(e->frozen_ns) / 1e9);
        r.bytes = e->bytes;
    }

    // Only the restored copies may answer from now on.
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    for (int i = 0; i < repeat; i++) {
        const pid_t imp = fork();
        if (imp == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            const double t = now();
            write_all(t0pipe.w.get(), &t, sizeof(t));
            const ghost::Error err = (*g)->restore_self();
            fmt::print(stderr, "import: {}\n", err.what());
            _exit(100);
        }
        double t0 = 0, t1 = 0;
        if (!read_all(t0pipe.r.get(), &t0, sizeof(t0)) || !write_all(ctl.w.get(), "g", 1) ||
            !read_all(rep.r.get(), &t1, sizeof(t1)))
            return false;
        r.import_s = std::min(r.import_s, t1 - t0);
        kill(imp, SIGKILL);
        waitpid(imp, nullptr, 0);
    }

    std::vector<char> a(r.bytes, 1), b(r.bytes, 2);
    for (int i = 0; i < repeat; i++) {
        const double t = now();
        memcpy(b.data(), a.data(), r.bytes);
        asm volatile("" : : "r"(b.data()) : "memory");
        r.memcpy_s = std::min(r.memcpy_s, now() - t);
    }

    // The kernel's own copy of the same bytes: read(2) of a tmpfs file.
    char path[] = "/tmp/ghost-bench-XXXXXX";
    ghost::UniqueFd f(mkstemp(path));
    unlink(path);
    if (!f || write(f.get(), a.data(), r.bytes) != static_cast<ssize_t>(r.bytes))
        return false;
    for (int i = 0; i < repeat; i++) {
        const double t = now();
        if (pread(f.get(), b.data(), r.bytes, 0) != static_cast<ssize_t>(r.bytes))
            return false;
        r.kcopy_s = std::min(r.kcopy_s, now() - t);
    }
    return true;
}

} // namespace

int main(int argc, char** argv) {
    std::vector<size_t> sizes{16, 64, 256};
    int repeat = 5;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--repeat" && i + 1 < argc) {
            repeat = std::max(1, atoi(argv[++i]));
        } else if (a == "--sizes" && i + 1 < argc) {
            sizes.clear();
            for (char* s = strtok(argv[++i], ","); s; s = strtok(nullptr, ","))
                sizes.push_back(strtoul(s, nullptr, 10));
        } else {
            fmt::print(stderr, "usage: ghost_bench_bandwidth [--sizes 16,64,256] [--repeat N]\n");
            return 2;
        }
    }

    fmt::print("{:>5} {:>10} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9}\n", "MiB",
               "image B", "export", "import", "memcpy", "kcopy", "exp/memcpy", "imp/memcpy",
               "exp/kcopy", "imp/kcopy", "frozen ms");
    fmt::print("{:>5} {:>10} {:>8} {:>8} {:>8} {:>8}\n", "", "", "MB/s", "MB/s", "MB/s", "MB/s");
    for (size_t mib : sizes) {
        Result r;
        if (!measure(mib << 20, repeat, r)) {
            fmt::print(stderr, "ghost_bench_bandwidth: the {} MiB run failed\n", mib);
            return 1;
        }
        const double mb = static_cast<double>(r.bytes) / 1e6;
        fmt::print("{:>5} {:>10} {:>8.0f} {:>8.0f} {:>8.0f} {:>8.0f} {:>9.2f}x {:>9.2f}x {:>9.2f}x "
                   "{:>9.2f}x {:>9.1f}\n",
                   mib, r.bytes, mb / r.export_s, mb / r.import_s, mb / r.memcpy_s, mb / r.kcopy_s,
                   r.memcpy_s / r.export_s, r.memcpy_s / r.import_s, r.kcopy_s / r.export_s,
                   r.kcopy_s / r.import_s, r.frozen_s * 1e3);
    }
    return 0;
}
