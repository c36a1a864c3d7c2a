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
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "ghost/engine.hpp"
#include "ghost/fd.hpp"
#include "ghost/image.hpp"
#include "ghost/process.hpp"

namespace {

constexpr size_t page = 4096;

// Never zero (the low bit is set), different for every word: as
// ghost-ckpt-workload.
std::uint64_t pattern(std::uint64_t i) {
    std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    return x | 1;
}

std::string errno_text() {
    return std::strerror(errno);
}

bool write_all(int fd, const void* p, size_t n) {
    return write(fd, p, n) == static_cast<ssize_t>(n);
}

bool read_all(int fd, void* p, size_t n) {
    auto* c = static_cast<char*>(p);
    while (n) {
        const ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        c += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

void kill_and_reap(pid_t pid) {
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR)
        ;
}

// The workload's two pipes. This program keeps all four ends open at the
// same numbers as the workload has them, so that a copy restarted by
// ghost::restart() (a fork of this program) finds the ends the image marks
// as inherited. Only one process may listen at a time.
struct Pipes {
    ghost::UniqueFd ctl_r, ctl_w, rep_r, rep_w;
    static std::optional<Pipes> make() {
        int a[2], b[2];
        if (pipe2(a, O_CLOEXEC) != 0)
            return std::nullopt;
        if (pipe2(b, O_CLOEXEC) != 0) {
            close(a[0]);
            close(a[1]);
            return std::nullopt;
        }
        Pipes p;
        p.ctl_r.reset(a[0]);
        p.ctl_w.reset(a[1]);
        p.rep_r.reset(b[0]);
        p.rep_w.reset(b[1]);
        return p;
    }
};

// This program runs as the workload when its first argument is this, then
// BYTES READY-FD CTL-FD REP-FD.
constexpr const char* workload_flag = "--as-workload";

// The workload, in the forked child: memory, then "ready" (the mapping's
// address) on @ready, which it closes, then commands on ctl: 'p' answers its pid, 'v' the
// number of wrong words in its memory.
[[noreturn]] void workload(size_t bytes, int ready, int ctl, int rep) {
    auto* mem = static_cast<std::uint64_t*>(
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (mem == MAP_FAILED)
        _exit(2);
    const size_t words = bytes / 8;
    for (size_t i = 0; i < words; i++)
        mem[i] = pattern(i);
    // Nothing but stdio on /dev/null and the two pipe ends the image carries
    // (and @ready, until the parent has read it to its end).
    const int null = open("/dev/null", O_RDWR);
    if (null < 0)
        _exit(3);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    for (int fd = 3; fd < 1024; fd++)
        if (fd != ctl && fd != rep && fd != ready)
            close(fd);
    const std::uint64_t addr = reinterpret_cast<std::uintptr_t>(mem);
    if (!write_all(ready, &addr, sizeof(addr)))
        _exit(4);
    close(ready);
    for (;;) {
        char c;
        if (read(ctl, &c, 1) != 1)
            _exit(5);
        std::int64_t answer = 0;
        if (c == 'p') {
            answer = getpid();
        } else if (c == 'v') {
            for (size_t i = 0; i < words; i++)
                answer += mem[i] != pattern(i);
        } else {
            _exit(6);
        }
        if (!write_all(rep, &answer, sizeof(answer)))
            _exit(7);
    }
}

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
    std::int64_t ask(char cmd) const {
        std::int64_t a = 0;
        if (!write_all(pipes.ctl_w.get(), &cmd, 1) || !read_all(pipes.rep_r.get(), &a, sizeof(a)))
            return -1;
        return a;
    }
};

std::optional<Workload> start_workload(size_t bytes, std::string& why) {
    auto pipes = Pipes::make();
    int ready[2];
    if (!pipes || pipe2(ready, O_CLOEXEC) != 0) {
        why = fmt::format("pipe: {}", errno_text());
        return std::nullopt;
    }
    const pid_t pid = fork();
    if (pid < 0) {
        why = fmt::format("fork: {}", errno_text());
        return std::nullopt;
    }
    if (pid == 0) {
        // A fresh program, so that the image holds the workload and not
        // the heap this benchmark has built up (engine buffers, baselines).
        prctl(PR_SET_PDEATHSIG, SIGKILL); // the original only: no orphan if we die
        const int keep[] = {ready[1], pipes->ctl_r.get(), pipes->rep_w.get()};
        for (int fd : keep)
            fcntl(fd, F_SETFD, 0);
        const std::string args[] = {std::to_string(bytes), std::to_string(keep[0]),
                                    std::to_string(keep[1]), std::to_string(keep[2])};
        execl("/proc/self/exe", "ghost_bench_user", workload_flag, args[0].c_str(), args[1].c_str(),
              args[2].c_str(), args[3].c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    close(ready[1]);
    Workload w;
    w.pid = pid;
    w.bytes = bytes;
    w.pipes = std::move(*pipes);
    // Read to the end: then the workload has closed its end too, and has no
    // descriptor but those of its image.
    char end;
    const bool ok = read_all(ready[0], &w.addr, sizeof(w.addr)) && read(ready[0], &end, 1) == 0;
    close(ready[0]);
    if (!ok) {
        why = "the workload died before it was ready";
        return std::nullopt;
    }
    return w;
}

// Reads an image and checks that every page of the workload's mapping is in
// it with the pattern; empty on success, else what is wrong.
std::string verify_image(ghost::image::Source& src, const Workload& w) {
    std::uint64_t pages = 0, bad = 0;
    ghost::image::ReadOptions o;
    o.on_pages = [&](const ghost::image::Vma&, const ghost::image::PageRun& run,
                     std::span<const std::byte> data) -> ghost::Result<void> {
        if (run.addr < w.addr || run.addr >= w.addr + w.bytes)
            return {};
        const size_t n = std::min<size_t>(data.size(), w.addr + w.bytes - run.addr);
        const std::uint64_t first = (run.addr - w.addr) / 8;
        for (size_t i = 0; i < n / 8; i++) {
            std::uint64_t v;
            std::memcpy(&v, data.data() + i * 8, 8);
            bad += v != pattern(first + i);
        }
        pages += n / page;
        return {};
    };
    auto img = ghost::image::read(src, o);
    if (!img)
        return fmt::format("the image does not read back: {}", img.error().what());
    if (pages != w.bytes / page || bad)
        return fmt::format("the image holds {} of the workload's {} pages, {} wrong words", pages,
                           w.bytes / page, bad);
    return {};
}

std::string verify_image_fd(int fd, const Workload& w) {
    if (lseek(fd, 0, SEEK_SET) != 0)
        return fmt::format("lseek: {}", errno_text());
    ghost::image::FdSource src(fd);
    return verify_image(src, w);
}

// A file in @dir, already unlinked.
ghost::UniqueFd temp_file(const std::string& dir) {
    std::string path = dir + "/ghost-bench-user-XXXXXX";
    ghost::UniqueFd fd(mkostemp(path.data(), O_CLOEXEC));
    if (fd)
        unlink(path.c_str());
    return fd;
}

struct Config {
    std::vector<size_t> sizes{16, 64, 256};
    std::vector<std::string> engines{"user"};
    std::string dir = "/tmp";
    int iterations = 5;
};

Config cfg;
std::map<std::string, std::unique_ptr<ghost::Engine>> engines;
std::vector<std::string> failures; // every verification failure, for the exit status

void fail(benchmark::State& state, std::string what) {
    failures.push_back(what);
    state.SkipWithError(failures.back().c_str());
}

double ms_since(const timespec& t0) {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec - t0.tv_sec) * 1e3 +
           static_cast<double>(t.tv_nsec - t0.tv_nsec) / 1e6;
}

// --- the engine's operations --------------------------------------------

void bm_export(benchmark::State& state, const std::string& engine_name, size_t mib, bool to_file) {
    ghost::Engine& engine = *engines.at(engine_name);
    std::string why;
    auto w = start_workload(mib << 20, why);
    if (!w)
        return fail(state, why);
    ghost::UniqueFd file;
    if (to_file && !(file = temp_file(cfg.dir)))
        return fail(state, fmt::format("cannot create a file in {}: {}", cfg.dir, errno_text()));
    std::uint64_t image_bytes = 0, frozen_ns = 0;
    std::int64_t done = 0;
    std::string verdict;
    for (auto _ : state) {
        state.PauseTiming();
        if (to_file && (ftruncate(file.get(), 0) != 0 || lseek(file.get(), 0, SEEK_SET) != 0)) {
            fail(state, fmt::format("truncating the image file: {}", errno_text()));
            break;
        }
        // A file ghost, or a memory ghost (whose image is viewed below).
        std::unique_ptr<ghost::Ghost> g;
        ghost::MemoryGhost* mem = nullptr;
        if (to_file) {
            auto c = engine.create(ghost::Backend::file(file.get()));
            if (!c) {
                fail(state, fmt::format("create: {}", c.error().what()));
                break;
            }
            g = std::move(*c);
        } else {
            auto c = engine.create_memory();
            if (!c) {
                fail(state, fmt::format("create: {}", c.error().what()));
                break;
            }
            mem = c->get();
            g = std::move(*c);
        }
        state.ResumeTiming();
        auto st = g->export_process(w->pid, ghost::Fate::Run);
        state.PauseTiming();
        if (!st) {
            fail(state, fmt::format("export: {}", st.error().what()));
            break;
        }
        image_bytes = st->bytes;
        frozen_ns += st->frozen_ns;
        // The workload runs on after each export.
        if (w->ask('p') != w->pid) {
            fail(state, "the workload does not answer after its export");
            break;
        }
        // The last image is read back and checked.
        if (++done == state.max_iterations) {
            if (to_file) {
                verdict = verify_image_fd(file.get(), *w);
            } else if (auto v = mem->view(); !v) {
                verdict = fmt::format("view: {}", v.error().what());
            } else {
                ghost::image::SpanSource src(v->bytes());
                verdict = verify_image(src, *w);
            }
        }
        g.reset(); // drops the ghost (and a memory ghost's image)
        state.ResumeTiming();
    }
    if (state.error_occurred())
        return;
    if (!verdict.empty())
        return fail(state, verdict);
    if (w->ask('v') != 0)
        return fail(state, "the workload's memory changed under the exports");
    state.SetBytesProcessed(static_cast<std::int64_t>(image_bytes) * state.iterations());
    state.counters["image_MiB"] = static_cast<double>(image_bytes) / (1 << 20);
    state.counters["frozen_ms"] =
        static_cast<double>(frozen_ns) / 1e6 / static_cast<double>(state.iterations());
}

// Restarts from the file, or (pipe) from a pipe a thread splices the file
// into while the restart reads it: a stream, as migd's restore stub gets.
void bm_restart(benchmark::State& state, const std::string& engine_name, size_t mib, bool pipe) {
    ghost::Engine& engine = *engines.at(engine_name);
    std::string why;
    auto w = start_workload(mib << 20, why);
    if (!w)
        return fail(state, why);
    ghost::UniqueFd file = temp_file(cfg.dir);
    if (!file)
        return fail(state, fmt::format("cannot create a file in {}: {}", cfg.dir, errno_text()));
    // The restore stub is exec'd: the pipe ends the image marks as
    // inherited (close-on-exec here) are handed over at their numbers.
    ghost::RestartOptions ro;
    ro.inherit_fds = {{w->pipes.ctl_r.get(), w->pipes.ctl_r.get()},
                      {w->pipes.rep_w.get(), w->pipes.rep_w.get()}};
    // The checkpoint, off the clock: the workload is killed once its image is
    // complete, as `ghostctl checkpoint` does.
    ghost::CheckpointOptions co;
    co.fate = ghost::Fate::Kill;
    auto st = ghost::checkpoint(engine, w->pid, file.get(), co);
    if (!st)
        return fail(state, fmt::format("checkpoint: {}", st.error().what()));
    kill_and_reap(std::exchange(w->pid, -1));
    if (auto v = verify_image_fd(file.get(), *w); !v.empty())
        return fail(state, v);

    double restored_ms = 0;
    for (auto _ : state) {
        state.PauseTiming();
        if (lseek(file.get(), 0, SEEK_SET) != 0) {
            fail(state, fmt::format("lseek: {}", errno_text()));
            break;
        }
        timespec t0{};
        clock_gettime(CLOCK_MONOTONIC, &t0);
        state.ResumeTiming();
        ghost::UniqueFd rd;
        std::thread feeder;
        if (pipe) {
            int p[2];
            if (pipe2(p, O_CLOEXEC) != 0) {
                fail(state, fmt::format("pipe: {}", errno_text()));
                break;
            }
            rd = ghost::UniqueFd(p[0]);
            fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
            feeder = std::thread([in = file.get(), wr = p[1]] {
                loff_t off = 0;
                while (splice(in, &off, wr, nullptr, 1 << 20, SPLICE_F_MOVE) > 0) {
                }
                close(wr);
            });
        }
        auto pid = ghost::restart(engine, pipe ? rd.get() : file.get(), ro);
        if (feeder.joinable()) {
            rd.reset(); // a restart that stopped reading: the feeder gets EPIPE
            feeder.join();
        }
        const double r_ms = ms_since(t0);
        const std::int64_t answer = pid ? w->ask('p') : -1;
        state.PauseTiming();
        if (!pid) {
            fail(state, fmt::format("restart: {}", pid.error().what()));
            break;
        }
        restored_ms += r_ms;
        if (answer != *pid) {
            int status = 0;
            const pid_t gone = waitpid(*pid, &status, WNOHANG);
            fail(state,
                 fmt::format("the restored process {} does not answer ({}; {})", *pid,
                             answer >= 0 ? fmt::format("answer {}", answer) : "no answer",
                             gone == *pid ? fmt::format("it ended, wait status {:#x}", status)
                                          : "it still exists"));
            kill_and_reap(*pid);
            break;
        }
        const auto bad = w->ask('v');
        kill_and_reap(*pid);
        if (bad != 0) {
            fail(state, fmt::format("the restored memory is wrong: {}",
                                    bad > 0 ? fmt::format("{} wrong words", bad) : "no answer"));
            break;
        }
        state.ResumeTiming();
    }
    if (state.error_occurred())
        return;
    state.SetBytesProcessed(static_cast<std::int64_t>(st->bytes) * state.iterations());
    state.counters["image_MiB"] = static_cast<double>(st->bytes) / (1 << 20);
    // restart() itself, without the first answer of the restored process.
    state.counters["restart_call_ms"] = restored_ms / static_cast<double>(state.iterations());
}

// --- baselines over the same bytes ----------------------------------------

// A buffer of @bytes, every page touched.
std::unique_ptr<std::uint64_t[]> filled(size_t bytes) {
    std::unique_ptr<std::uint64_t[]> p(new std::uint64_t[bytes / 8]);
    for (size_t i = 0; i < bytes / 8; i++)
        p[i] = pattern(i);
    return p;
}

void bm_memcpy(benchmark::State& state, size_t mib) {
    const size_t bytes = mib << 20;
    auto a = filled(bytes), b = filled(bytes);
    for (auto _ : state) {
        std::memcpy(b.get(), a.get(), bytes);
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}

void bm_memcpy_fresh(benchmark::State& state, size_t mib) {
    const size_t bytes = mib << 20;
    auto a = filled(bytes);
    for (auto _ : state) {
        void* b = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b == MAP_FAILED) {
            fail(state, fmt::format("mmap: {}", errno_text()));
            break;
        }
        std::memcpy(b, a.get(), bytes);
        benchmark::ClobberMemory();
        munmap(b, bytes);
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}

// Issue 15's floor when fresh: process_vm_readv of the workload's bytes into
// pages mapped for each iteration (what any export or restart must at least
// do: copy each byte once into memory that was not there before).
void bm_process_vm(benchmark::State& state, size_t mib, bool write_it, bool fresh = false) {
    std::string why;
    auto w = start_workload(mib << 20, why);
    if (!w)
        return fail(state, why);
    auto buf = filled(w->bytes); // the same pattern: writing it back changes nothing
    iovec local{buf.get(), w->bytes};
    iovec remote{reinterpret_cast<void*>(w->addr), w->bytes};
    for (auto _ : state) {
        void* dst = nullptr;
        if (fresh) {
            dst =
                mmap(nullptr, w->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (dst == MAP_FAILED) {
                fail(state, fmt::format("mmap: {}", errno_text()));
                break;
            }
            local.iov_base = dst;
        }
        const ssize_t n = write_it ? process_vm_writev(w->pid, &local, 1, &remote, 1, 0)
                                   : process_vm_readv(w->pid, &local, 1, &remote, 1, 0);
        if (n != static_cast<ssize_t>(w->bytes)) {
            fail(state, fmt::format("process_vm_{}: {}", write_it ? "writev" : "readv",
                                    n < 0 ? errno_text() : "short"));
            if (dst)
                munmap(dst, w->bytes);
            break;
        }
        benchmark::ClobberMemory();
        if (dst) { // checked and unmapped off the clock: an export keeps its pages
            state.PauseTiming();
            const bool same = std::memcmp(dst, buf.get(), w->bytes) == 0;
            munmap(dst, w->bytes);
            state.ResumeTiming();
            if (!same) {
                fail(state, "process_vm_readv into fresh pages read other bytes than the pattern");
                break;
            }
        }
    }
    if (!state.error_occurred() && w->ask('v') != 0)
        fail(state, "the workload's memory is not the pattern");
    state.SetBytesProcessed(static_cast<std::int64_t>(w->bytes) * state.iterations());
}

void bm_pagemap(benchmark::State& state, size_t mib) {
    std::string why;
    auto w = start_workload(mib << 20, why);
    if (!w)
        return fail(state, why);
    ghost::UniqueFd pm(open(fmt::format("/proc/{}/pagemap", w->pid).c_str(), O_RDONLY | O_CLOEXEC));
    if (!pm)
        return fail(state, fmt::format("pagemap: {}", errno_text()));
    std::vector<std::uint64_t> e(w->bytes / page);
    const size_t len = e.size() * 8;
    for (auto _ : state) {
        if (pread(pm.get(), e.data(), len, static_cast<off_t>(w->addr / page * 8)) !=
            static_cast<ssize_t>(len)) {
            fail(state, fmt::format("pagemap read: {}", errno_text()));
            break;
        }
    }
    if (!state.error_occurred() &&
        std::any_of(e.begin(), e.end(), [](std::uint64_t v) { return !(v >> 63); }))
        fail(state, "a page of the workload is not present");
    // Per byte of memory described, to compare with the rest.
    state.SetBytesProcessed(static_cast<std::int64_t>(w->bytes) * state.iterations());
}

void bm_crc32c(benchmark::State& state, size_t mib) {
    const size_t bytes = mib << 20;
    auto a = filled(bytes);
    const std::span<const std::byte> s(reinterpret_cast<const std::byte*>(a.get()), bytes);
    for (auto _ : state)
        benchmark::DoNotOptimize(ghost::image::crc32c(0, s));
    state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}

// XXH64, the END checksum both engines write since GHOST_IMAGE_FEAT_XXH64.
void bm_xxh64(benchmark::State& state, size_t mib) {
    const size_t bytes = mib << 20;
    auto a = filled(bytes);
    const std::span<const std::byte> s(reinterpret_cast<const std::byte*>(a.get()), bytes);
    for (auto _ : state)
        benchmark::DoNotOptimize(ghost::image::xxh64(s));
    state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}

// write(2) of the bytes in 4 MiB calls, as the user engine writes page data:
// into a file in --dir, or into a memfd (what its memory ghosts are).
void bm_write(benchmark::State& state, size_t mib, bool memfd) {
    const size_t bytes = mib << 20, chunk = 4 << 20;
    auto a = filled(chunk);
    ghost::UniqueFd fd =
        memfd ? ghost::UniqueFd(memfd_create("ghost-bench", MFD_CLOEXEC)) : temp_file(cfg.dir);
    if (!fd)
        return fail(state, fmt::format("cannot create a {}: {}",
                                       memfd ? "memfd" : "file in " + cfg.dir, errno_text()));
    for (auto _ : state) {
        state.PauseTiming();
        if (ftruncate(fd.get(), 0) != 0) {
            fail(state, fmt::format("ftruncate: {}", errno_text()));
            break;
        }
        state.ResumeTiming();
        for (size_t off = 0; off < bytes; off += chunk) {
            const size_t n = std::min(chunk, bytes - off);
            if (pwrite(fd.get(), a.get(), n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) {
                fail(state, fmt::format("write: {}", errno_text()));
                break;
            }
        }
        if (state.error_occurred())
            break;
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}

// Issue 15's one-copy floor: the "/floor" column divides by its bandwidth.
constexpr const char* floor_name = "process_vm_readv-fresh-pages";

// The baselines after memcpy, in the order of the table.
struct Baseline {
    const char* name;
    void (*fn)(benchmark::State&, size_t);
};
constexpr Baseline baselines[] = {
    {"memcpy-fresh-pages", bm_memcpy_fresh},
    {"process_vm_readv", [](benchmark::State& s, size_t mib) { bm_process_vm(s, mib, false); }},
    {"process_vm_writev", [](benchmark::State& s, size_t mib) { bm_process_vm(s, mib, true); }},
    {floor_name, [](benchmark::State& s, size_t mib) { bm_process_vm(s, mib, false, true); }},
    {"pagemap", bm_pagemap},
    {"crc32c", bm_crc32c},
    {"xxh64", bm_xxh64},
    {"write-memfd", [](benchmark::State& s, size_t mib) { bm_write(s, mib, true); }},
    {"write-file", [](benchmark::State& s, size_t mib) { bm_write(s, mib, false); }},
};

// Keeps each benchmark's time per iteration and bytes per second.
class TableReporter : public benchmark::ConsoleReporter {
  public:
    TableReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular) {}
    struct Row {
        double ms = 0, bytes_per_s = 0;
        std::map<std::string, double> counters;
    };
    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        for (const auto& r : runs) {
            if (r.error_occurred || r.run_type != Run::RT_Iteration)
                continue;
            Row row;
            row.ms = r.GetAdjustedRealTime(); // in the benchmark's unit: ms
            for (const auto& [k, c] : r.counters)
                row.counters[k] = c.value;
            row.bytes_per_s =
                row.counters.count("bytes_per_second") ? row.counters["bytes_per_second"] : 0;
            rows[r.run_name.function_name] = row; // as registered, without /iterations:N
        }
    }
    std::map<std::string, Row> rows;
};

std::string name_of(const std::string& what, size_t mib) {
    return fmt::format("{}/{}MiB", what, mib);
}

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
            reg(name_of(e + "/export-memory", mib), [e, mib](benchmark::State& s) {
                bm_export(s, e, mib, false);
            })->Iterations(cfg.iterations);
            reg(name_of(e + "/export-file", mib), [e, mib](benchmark::State& s) {
                bm_export(s, e, mib, true);
            })->Iterations(cfg.iterations);
            reg(name_of(e + "/restart-file", mib), [e, mib](benchmark::State& s) {
                bm_restart(s, e, mib, false);
            })->Iterations(cfg.iterations);
            reg(name_of(e + "/restart-pipe", mib), [e, mib](benchmark::State& s) {
                bm_restart(s, e, mib, true);
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

    utsname u{};
    uname(&u);
    fmt::print("\nghost_bench_user: kernel {}, {} CPUs, files in {}; ms per operation, MiB/s, "
               "and bandwidth as a fraction of memcpy's (memcpy time / time) and of the one-copy "
               "floor's ({})\n\n",
               u.release, sysconf(_SC_NPROCESSORS_ONLN), cfg.dir, floor_name);
    fmt::print("| MiB | operation | ms | MiB/s | /memcpy | /floor | frozen ms |\n"
               "|---|---|---|---|---|---|---|\n");
    for (size_t mib : cfg.sizes) {
        const auto base = rep.rows.find(name_of("memcpy", mib));
        const auto floor = rep.rows.find(name_of(floor_name, mib));
        const auto ratio = [](const auto& it, const auto& end, double bps) {
            return it != end && it->second.bytes_per_s > 0
                       ? fmt::format("{:.3f}x", bps / it->second.bytes_per_s)
                       : std::string("-");
        };
        std::vector<std::string> ops;
        for (const auto& e : cfg.engines)
            for (const char* op :
                 {"/export-memory", "/export-file", "/restart-file", "/restart-pipe"})
                ops.push_back(e + op);
        ops.push_back("memcpy");
        for (const auto& b : baselines)
            ops.push_back(b.name);
        for (const auto& op : ops) {
            const auto it = rep.rows.find(name_of(op, mib));
            if (it == rep.rows.end()) {
                fmt::print("| {} | {} | failed or not run | | | |\n", mib, op);
                continue;
            }
            const auto& r = it->second;
            const auto frozen = r.counters.find("frozen_ms");
            fmt::print("| {} | {} | {:.1f} | {:.0f} | {} | {} | {} |\n", mib, op, r.ms,
                       r.bytes_per_s / (1 << 20), ratio(base, rep.rows.end(), r.bytes_per_s),
                       ratio(floor, rep.rows.end(), r.bytes_per_s),
                       frozen != r.counters.end() ? fmt::format("{:.1f}", frozen->second) : "-");
        }
    }
    if (!failures.empty()) {
        fmt::print(stderr, "\nghost_bench_user: {} failure(s):\n", failures.size());
        for (const auto& f : failures)
            fmt::print(stderr, "  {}\n", f);
        return 1;
    }
    return 0;
}
