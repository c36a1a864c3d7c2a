// SPDX-License-Identifier: GPL-2.0
// ghost_bench_vs_criu's baselines, measured in the same run: what starting
// each program costs by itself, and the same bytes through user space
// (memcpy, crc32c, xxh64, write(2)/read(2) of tmpfs in page-sized and 1 MiB
// calls), which is where the ghost figures are explained.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

// XXH64 compiled in, as libghost and ghost.ko compute it (no link needed).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "vs_criu.hpp"

namespace bench::vs_criu {

namespace {

// Median time to start a command that does nothing (--version, --help).
double startup_ms(const std::vector<std::string>& argv, int status, const fs::path& dir) {
    std::vector<double> v;
    for (int i = 0; i < 5; i++) {
        const double t = now_ms();
        const int st = run(argv, dir / "startup.out", dir / "startup.err");
        if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != status)
            return -1;
        v.push_back(now_ms() - t);
    }
    return stat_of(v).median;
}

// The same number of bytes through the operations ghost's path is made of,
// from user space, best of @repeat, in ms.
struct Baselines {
    double memcpy_ms = 1e18, crc_ms = 1e18, xxh_ms = 1e18, write4k_ms = 1e18, write1m_ms = 1e18,
           read4k_ms = 1e18, read1m_ms = 1e18;
};

// crc32c with the SSE4.2 instruction, as the kernel's crc32c-intel uses it.
__attribute__((target("sse4.2"))) std::uint32_t crc32c(const std::uint64_t* p, size_t words) {
    std::uint64_t c = ~0U;
    for (size_t i = 0; i < words; i++)
        c = __builtin_ia32_crc32di(c, p[i]);
    return static_cast<std::uint32_t>(~c);
}

// Writes or reads @bytes of @fd from offset 0 in @chunk calls; ms or -1.
double file_pass(int fd, bool write_it, std::vector<char>& buf, size_t bytes, size_t chunk) {
    const double t = now_ms();
    for (size_t off = 0; off < bytes; off += chunk) {
        const size_t n = std::min(chunk, bytes - off);
        const ssize_t r =
            write_it ? pwrite(fd, buf.data() + off % buf.size(), n, static_cast<off_t>(off))
                     : pread(fd, buf.data() + off % buf.size(), n, static_cast<off_t>(off));
        if (r != static_cast<ssize_t>(n))
            return -1;
    }
    return now_ms() - t;
}

Baselines measure_baselines(size_t bytes, int repeat, const fs::path& dir) {
    Baselines b;
    std::vector<std::uint64_t> a(bytes / 8), c(bytes / 8);
    for (size_t i = 0; i < a.size(); i++)
        a[i] = i * 0x9E3779B97F4A7C15ull | 1;
    std::vector<char> buf(1 << 20, 7);
    const fs::path path = dir / "baseline";
    for (int r = 0; r < repeat; r++) {
        double t = now_ms();
        memcpy(c.data(), a.data(), bytes);
        asm volatile("" : : "r"(c.data()) : "memory");
        b.memcpy_ms = std::min(b.memcpy_ms, now_ms() - t);
        if (__builtin_cpu_supports("sse4.2")) {
            t = now_ms();
            volatile std::uint32_t sink = crc32c(a.data(), a.size());
            (void)sink;
            b.crc_ms = std::min(b.crc_ms, now_ms() - t);
        }
        t = now_ms();
        volatile std::uint64_t xsink = XXH64(a.data(), bytes, 0);
        (void)xsink;
        b.xxh_ms = std::min(b.xxh_ms, now_ms() - t);
        // A new file each time, as for an image: written, then read back.
        for (size_t chunk : {size_t{4096}, size_t{1} << 20}) {
            ghost::UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
            const double w = fd ? file_pass(fd.get(), true, buf, bytes, chunk) : -1;
            const double rd = fd ? file_pass(fd.get(), false, buf, bytes, chunk) : -1;
            unlink(path.c_str());
            double& bw = chunk == 4096 ? b.write4k_ms : b.write1m_ms;
            double& br = chunk == 4096 ? b.read4k_ms : b.read1m_ms;
            if (w >= 0)
                bw = std::min(bw, w);
            if (rd >= 0)
                br = std::min(br, rd);
        }
    }
    return b;
}

} // namespace

void print_startup_costs(const Programs& pr, const fs::path& base) {
    // What starting each program costs by itself: part of every command above.
    fmt::print("\nStarting a program that does nothing (median of 5, ms)\n\n");
    fmt::print("| command | ms |\n|---|---|\n");
    // ghostctl runs a real command that fails at once, with status 1 (it
    // builds the command's options and parses them); its --version returns
    // before that.
    struct Idle {
        std::vector<std::string> argv;
        int status;
    };
    const std::vector<Idle> idle{{{pr.ghostctl, "inspect", "/nonexistent"}, 1},
                                 {{pr.ghost_export, "--help"}, 0},
                                 {{pr.ghost_restore, "--help"}, 0},
                                 {{pr.criu, "--version"}, 0},
                                 {{"true"}, 0}};
    for (const auto& [argv, status] : idle) {
        const double ms = startup_ms(argv, status, base);
        std::string cmd = fs::path(argv[0]).filename().string();
        for (size_t i = 1; i < argv.size(); i++)
            cmd += " " + argv[i];
        fmt::print("| {} | {} |\n", cmd, ms >= 0 ? fmt::format("{:.1f}", ms) : "failed");
    }
}

void print_same_bytes(const std::vector<size_t>& sizes, int repeat, const fs::path& base) {
    fmt::print(
        "\nThe same bytes from user space (best of {}, ms): what ghost's path is made of\n\n",
        repeat);
    fmt::print("| MiB | memcpy | crc32c (SSE4.2) | xxh64 | write 4 KiB calls | write 1 MiB calls | "
               "read 4 KiB calls | read 1 MiB calls |\n");
    fmt::print("|---|---|---|---|---|---|---|---|\n");
    auto cell = [](double ms) { return ms < 1e17 ? fmt::format("{:.0f}", ms) : "-"; };
    for (size_t mib : sizes) {
        const Baselines b = measure_baselines(mib << 20, repeat, base);
        fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} |\n", mib, cell(b.memcpy_ms),
                   cell(b.crc_ms), cell(b.xxh_ms), cell(b.write4k_ms), cell(b.write1m_ms),
                   cell(b.read4k_ms), cell(b.read1m_ms));
    }
}

} // namespace bench::vs_criu
