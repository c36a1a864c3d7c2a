// SPDX-License-Identifier: GPL-2.0
// ghost_bench_user's baselines over the same bytes: memcpy (the ratio's
// baseline), memcpy into fresh pages, process_vm_readv / process_vm_writev of
// the workload's mapping (into fresh pages: the one-copy floor), its pagemap
// entries, crc32c, xxh64, and write(2) into a memfd and into a file.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "user_bench.hpp"

namespace bench::user {

namespace {

// A buffer of @bytes, every page touched.
std::unique_ptr<std::uint64_t[]> filled(size_t bytes) {
    std::unique_ptr<std::uint64_t[]> p(new std::uint64_t[bytes / 8]);
    for (size_t i = 0; i < bytes / 8; i++)
        p[i] = pattern(i);
    return p;
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

constexpr Baseline table[] = {
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

} // namespace

void bm_memcpy(benchmark::State& state, size_t mib) {
    const size_t bytes = mib << 20;
    auto a = filled(bytes), b = filled(bytes);
    for (auto _ : state) {
        std::memcpy(b.get(), a.get(), bytes);
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}

const std::span<const Baseline> baselines(table);

} // namespace bench::user
