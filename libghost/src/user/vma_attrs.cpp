// SPDX-License-Identifier: LGPL-2.1-or-later
// Mapping attributes for the user engine (Documentation/user-engine.md).
#include "user/vma_attrs.hpp"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <iterator>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "ghost_vma_attrs.h"

namespace ghost::user {

namespace {

constexpr std::uint64_t kPmGuard = 1ULL << 58;
constexpr int kCapIpcLock = 14;
constexpr unsigned kMlockOnfault = 1;

// smaps VmFlags mnemonics (fs/proc/task_mmu.c) and the flags they stand for.
constexpr std::pair<std::string_view, std::uint32_t> kMnemonics[] = {
    {"mw", GHOST_VMA_MAYWRITE},  {"lo", GHOST_VMA_LOCKED},     {"nr", GHOST_VMA_NORESERVE},
    {"dd", GHOST_VMA_DONTDUMP},  {"wf", GHOST_VMA_WIPEONFORK}, {"dc", GHOST_VMA_DONTFORK},
    {"mg", GHOST_VMA_MERGEABLE}, {"hg", GHOST_VMA_HUGEPAGE},   {"nh", GHOST_VMA_NOHUGEPAGE},
    {"sr", GHOST_VMA_SEQ_READ},  {"rr", GHOST_VMA_RAND_READ},
};

// madvise() advice for each flag, given in this order.
constexpr std::pair<std::uint32_t, int> kAdvice[] = {
    {GHOST_VMA_DONTDUMP, MADV_DONTDUMP},   {GHOST_VMA_WIPEONFORK, MADV_WIPEONFORK},
    {GHOST_VMA_DONTFORK, MADV_DONTFORK},   {GHOST_VMA_MERGEABLE, MADV_MERGEABLE},
    {GHOST_VMA_HUGEPAGE, MADV_HUGEPAGE},   {GHOST_VMA_NOHUGEPAGE, MADV_NOHUGEPAGE},
    {GHOST_VMA_SEQ_READ, MADV_SEQUENTIAL}, {GHOST_VMA_RAND_READ, MADV_RANDOM},
};

const char* advice_name(int advice) {
    switch (advice) {
    case MADV_DONTDUMP:
        return "MADV_DONTDUMP";
    case MADV_WIPEONFORK:
        return "MADV_WIPEONFORK";
    case MADV_DONTFORK:
        return "MADV_DONTFORK";
    case MADV_MERGEABLE:
        return "MADV_MERGEABLE (KSM)";
    case MADV_HUGEPAGE:
        return "MADV_HUGEPAGE (transparent huge pages)";
    case MADV_NOHUGEPAGE:
        return "MADV_NOHUGEPAGE";
    case MADV_SEQUENTIAL:
        return "MADV_SEQUENTIAL";
    default:
        return "MADV_RANDOM";
    }
}

bool has_cap(int cap) {
    auto status = read_text("/proc/self/status");
    return status && ((parse_u64(status_field(*status, "CapEff"), 16) >> cap) & 1);
}

} // namespace

// Lock-on-fault: "lf" where the kernel shows it (6.18 does, 6.1 does not);
// else a locked mapping not wholly resident, which mlock() would have
// populated. A lock-on-fault mapping whose every page is resident reads as
// locked, which keeps it so (a file mapping beyond its file's end, whose
// tail cannot be resident, reads as lock-on-fault).
std::uint32_t vma_attrs(const MapEntry& m) {
    std::uint32_t out = 0;
    for (const auto& [mn, bit] : kMnemonics)
        if (m.has_flag(mn))
            out |= bit;
    if ((out & GHOST_VMA_LOCKED) && (m.has_flag("lf") || m.rss_kb * 1024 < m.end - m.start))
        out |= GHOST_VMA_LOCKONFAULT;
    return out;
}

bool pagemap_guard(std::uint64_t entry) {
    return entry & kPmGuard;
}

Result<void> check_memlock(const image::Image& img) {
    unsigned long long locked = 0;
    for (const auto& v : img.vmas)
        if (v.rec.flags & GHOST_VMA_LOCKED)
            locked += v.rec.end - v.rec.start;
    rlimit rl{};
    ::getrlimit(RLIMIT_MEMLOCK, &rl);
    if (!locked || rl.rlim_cur == RLIM_INFINITY || locked <= rl.rlim_cur || has_cap(kCapIpcLock))
        return {};
    char why[256];
    std::snprintf(why, sizeof(why), GHOST_MEMLOCK_REASON, locked >> 10,
                  static_cast<unsigned long long>(rl.rlim_cur >> 10));
    return Error::from_errno(EPERM, why);
}

// Each advice is tried on a page of the caller's own first: one this kernel
// lacks (MADV_MERGEABLE without KSM, MADV_HUGEPAGE without THP) would
// otherwise fail only after the point of no return.
Result<void> check_advice(const image::Image& img) {
    std::uint32_t wanted = 0;
    for (const auto& v : img.vmas)
        wanted |= v.rec.flags;
    const long page = ::sysconf(_SC_PAGESIZE);
    for (const auto& [bit, advice] : kAdvice) {
        if (!(wanted & bit))
            continue;
        void* probe = ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (probe == MAP_FAILED)
            return Error::from_errno(errno, "mmap of a probe page failed");
        const int rc = ::madvise(probe, static_cast<std::size_t>(page), advice);
        const int err = errno;
        ::munmap(probe, static_cast<std::size_t>(page));
        if (rc == 0)
            continue;
        for (const auto& v : img.vmas)
            if (v.rec.flags & bit) {
                char why[256];
                std::snprintf(why, sizeof(why), GHOST_ADVICE_REASON, advice_name(advice),
                              static_cast<unsigned long long>(v.rec.start), err);
                return Error::from_errno(err, why);
            }
    }
    return {};
}

Result<void> apply_vma_attrs(const SysCall& call, const ghost_vma& v) {
    const std::uint64_t len = v.end - v.start;
    for (const auto& [bit, advice] : kAdvice)
        if (v.flags & bit)
            if (auto r = call(fmt::format("madvise({:#x}, {})", v.start, advice).c_str(),
                              SYS_madvise, v.start, len, static_cast<std::uint64_t>(advice));
                !r)
                return r.error();
    if (v.flags & GHOST_VMA_LOCKED) {
        const unsigned how = (v.flags & GHOST_VMA_LOCKONFAULT) ? kMlockOnfault : 0;
        if (auto r =
                call(fmt::format("mlock2({:#x})", v.start).c_str(), SYS_mlock2, v.start, len, how);
            !r)
            return r.error();
    }
    return {};
}

} // namespace ghost::user
