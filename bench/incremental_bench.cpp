// SPDX-License-Identifier: GPL-2.0
// Incremental checkpoints (checkpoint --parent) against full ones, user
// engine, natively, in the same run:
//   build/bin/ghost_bench_incremental [--mib 256] [--percent 1,10] [--iterations 3] [--dir /tmp]
//
// A workload child holds MIB MiB of private anonymous memory (every page
// present, distinct contents) and waits in read(2) on a pipe. Per
// iteration and percentage P: a full leave-running checkpoint (timed: the
// baseline, and the parent), then the workload rewrites P% of its pages
// (spread evenly; off the clock), then an incremental leave-running
// checkpoint with --parent (timed). Sizes are the image files'. Off the
// clock, each incremental image is checked: read back (checksum), its
// written and inherited page counts must cover the region, and at least the
// rewritten pages must be written. The last iteration also restarts from
// the child (chain flattened) and from a full image, timed until the
// restored process answers; the restored copy checks its own memory.
// Prints a table of means; exit 1 on any failure.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ghost/engine.hpp"
#include "ghost/image.hpp"
#include "ghost/process.hpp"
#include "ghost/user_engine.hpp"

namespace {

constexpr std::size_t kPage = 4096;

std::uint64_t word(std::size_t page, std::size_t i, std::uint64_t gen) {
    return (page << 32) ^ (i * 0x9e3779b97f4a7c15ULL) ^ (gen << 20) ^ 1;
}

// Commands on cmd: 'd' + 4-byte per-mille: rewrite that share of the pages
// (generation += 1); 'c': check every page against what it should hold;
// 'p': ping. Replies one byte: 'k' or 'x' (a page is wrong).
[[noreturn]] void workload(std::size_t pages, int cmd, int out) {
    auto* m = static_cast<std::uint64_t*>(
        ::mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    std::vector<std::uint64_t> gen(pages, 0);
    const std::size_t words = kPage / 8;
    for (std::size_t p = 0; p < pages; p++)
        for (std::size_t i = 0; i < words; i++)
            m[p * words + i] = word(p, i, 0);
    for (;;) {
        char c;
        if (::read(cmd, &c, 1) != 1)
            ::_exit(0);
        char reply = 'k';
        if (c == 'd') {
            std::uint32_t permille = 0;
            if (::read(cmd, &permille, 4) != 4)
                ::_exit(2);
            const std::size_t every = permille ? 1000 / permille : pages + 1;
            for (std::size_t p = 0; p < pages; p += every) {
                gen[p]++;
                for (std::size_t i = 0; i < words; i++)
                    m[p * words + i] = word(p, i, gen[p]);
            }
        } else if (c == 'c') {
            for (std::size_t p = 0; p < pages && reply == 'k'; p++)
                for (std::size_t i = 0; i < words; i++)
                    if (m[p * words + i] != word(p, i, gen[p])) {
                        reply = 'x';
                        break;
                    }
        }
        if (::write(out, &reply, 1) != 1)
            ::_exit(3);
    }
}

struct Pipes {
    int cmd[2]{-1, -1}, out[2]{-1, -1};
    Pipes() {
        if (::pipe(cmd) != 0 || ::pipe(out) != 0)
            std::abort();
    }
    char ask(const std::string& m) const {
        if (::write(cmd[1], m.data(), m.size()) != static_cast<ssize_t>(m.size()))
            return 0;
        pollfd p{out[0], POLLIN, 0};
        char c = 0;
        if (::poll(&p, 1, 60000) <= 0 || ::read(out[0], &c, 1) != 1)
            return 0;
        return c;
    }
};

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::uint64_t file_size(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

[[noreturn]] void die(const std::string& m) {
    fmt::print(stderr, "ghost_bench_incremental: {}\n", m);
    std::exit(1);
}

double checkpoint(ghost::Engine& e, pid_t pid, const std::string& path, const std::string& parent,
                  ghost::Fate fate = ghost::Fate::Run) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        die("cannot create " + path);
    ghost::CheckpointOptions o;
    o.fate = fate;
    o.parent = parent;
    const auto t0 = std::chrono::steady_clock::now();
    auto s = ghost::checkpoint(e, pid, fd, o);
    const double ms = ms_since(t0);
    ::close(fd);
    if (!s)
        die(fmt::format("checkpoint of {} to {}: {}", pid, path, s.error().what()));
    return ms;
}

// Restarts path as the workload (its pipes given), until it answers; then
// checks its memory and kills it.
double restart(ghost::Engine& e, const Pipes& p, const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ghost::RestartOptions ro;
    for (int f : {p.cmd[0], p.cmd[1], p.out[0], p.out[1]})
        ro.inherit_fds.emplace_back(f, f);
    const auto t0 = std::chrono::steady_clock::now();
    auto child = ghost::restart(e, fd, ro);
    if (!child)
        die(fmt::format("restart of {}: {}", path, child.error().what()));
    if (p.ask("p") != 'k')
        die("the restored workload does not answer");
    const double ms = ms_since(t0);
    ::close(fd);
    if (p.ask("c") != 'k')
        die("the restored workload's memory is wrong (" + path + ")");
    ::kill(*child, SIGKILL);
    ::waitpid(*child, nullptr, 0);
    return ms;
}

} // namespace

int main(int argc, char** argv) {
    std::size_t mib = 256;
    std::vector<unsigned> percents{1, 10};
    int iterations = 3;
    std::string dir = "/tmp";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--mib")
            mib = std::stoul(v);
        else if (a == "--iterations")
            iterations = std::stoi(v);
        else if (a == "--dir")
            dir = v;
        else if (a == "--percent") {
            percents.clear();
            for (std::size_t at = 0; at < v.size();) {
                const auto comma = v.find(',', at);
                percents.push_back(static_cast<unsigned>(std::stoul(v.substr(at, comma - at))));
                at = comma == std::string::npos ? v.size() : comma + 1;
            }
        } else
            die("usage: ghost_bench_incremental [--mib N] [--percent 1,10] [--iterations N] "
                "[--dir DIR]");
    }
    const std::string state = fmt::format("{}/ghost-incr-bench-state-{}", dir, ::getpid());
    ::setenv("GHOST_STATE_DIR", state.c_str(), 1);
    const std::size_t pages = mib * 1024 * 1024 / kPage;
    ghost::UserEngine engine;
    const std::string full = fmt::format("{}/ghost-incr-bench-{}-full.img", dir, ::getpid());
    const std::string incr = fmt::format("{}/ghost-incr-bench-{}-incr.img", dir, ::getpid());

    fmt::print("{} MiB, {} iterations, images in {}; soft-dirty bits: {}\n", mib, iterations, dir,
               std::getenv("GHOST_DIRTY_TRACKING") ? "forced off (GHOST_DIRTY_TRACKING)"
                                                   : "as the kernel has them");
    fmt::print("{:>6} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>12} {:>12}\n", "dirty",
               "full ms", "full MiB", "incr ms", "incr MiB", "time", "size", "written",
               "restart full", "restart incr");
    for (const unsigned pct : percents) {
        Pipes p;
        const pid_t pid = ::fork();
        if (pid == 0)
            workload(pages, p.cmd[0], p.out[1]);
        if (p.ask("p") != 'k')
            die("the workload does not start");
        double full_ms = 0, incr_ms = 0;
        std::uint64_t full_b = 0, incr_b = 0, written = 0;
        for (int it = 0; it < iterations; it++) {
            full_ms += checkpoint(engine, pid, full, {});
            full_b += file_size(full);
            std::string d = "d";
            const std::uint32_t permille = pct * 10;
            d.append(reinterpret_cast<const char*>(&permille), 4);
            if (p.ask(d) != 'k')
                die("the workload does not dirty its pages");
            incr_ms += checkpoint(engine, pid, incr, full);
            incr_b += file_size(incr);
            const int fd = ::open(incr.c_str(), O_RDONLY | O_CLOEXEC);
            ghost::image::FdSource src(fd);
            auto img = ghost::image::read(src);
            ::close(fd);
            if (!img)
                die("the incremental image does not read back: " + img.error().what());
            const std::size_t rewritten = (pages + 1000 / (pct * 10) - 1) / (1000 / (pct * 10));
            if (img->pages() < rewritten || img->pages() + img->inherited_pages() < pages)
                die(fmt::format("the incremental image holds {} pages and inherits {}: not the "
                                "{} rewritten of {}",
                                img->pages(), img->inherited_pages(), rewritten, pages));
            written += img->pages();
        }
        // Restart from the last chain and from a whole image of the same
        // state (the workload is killed by its last, whole checkpoint).
        const std::string whole = full + ".whole";
        checkpoint(engine, pid, whole, {}, ghost::Fate::Kill);
        ::waitpid(pid, nullptr, 0);
        const double r_full = restart(engine, p, whole);
        const double r_incr = restart(engine, p, incr);
        const double n = iterations;
        fmt::print("{:>5}% {:>10.1f} {:>10.1f} {:>10.1f} {:>10.2f} {:>7.3f}x {:>7.4f}x {:>8.0f} "
                   "{:>12.1f} {:>12.1f}\n",
                   pct, full_ms / n, static_cast<double>(full_b) / n / 1048576.0, incr_ms / n,
                   static_cast<double>(incr_b) / n / 1048576.0, incr_ms / full_ms,
                   static_cast<double>(incr_b) / static_cast<double>(full_b),
                   static_cast<double>(written) / n, r_full, r_incr);
        for (const auto& f : {full, incr, whole})
            ::unlink(f.c_str());
    }
    std::string rm = "rm -rf '" + state + "'";
    if (std::system(rm.c_str()) != 0)
        return 1;
    return 0;
}
