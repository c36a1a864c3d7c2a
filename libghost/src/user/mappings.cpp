// SPDX-License-Identifier: LGPL-2.1-or-later
// The mappings of a held process for its image (mappings.hpp).
#include "user/mappings.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>

#include <chrono>
#include <optional>
#include <system_error>

#include "ghost_policy.h"
#include "user/page_runs.hpp"
#include "user/vma_attrs.hpp"

namespace ghost::user {

namespace {

constexpr std::uint64_t kPage = 4096;

// The same mapping, as far as maps tells (smaps's flags then hold).
bool same(const MapEntry& a, const MapEntry& b) {
    return a.start == b.start && a.end == b.end && std::string_view(a.perms) == b.perms &&
           a.offset == b.offset && a.inode == b.inode && a.name == b.name;
}

// The facts /proc/PID/smaps gives of a mapping, for ghost_policy_vma().
// Bracketed names are the kernel's special mappings, but for the heap, the
// stack and named anonymous memory; named shared anonymous memory (6.x's
// "[anon_shmem:NAME]") is the shmem file "/dev/zero (deleted)" it shows
// unnamed.
Result<std::uint32_t> classify(const MapEntry& m, const ghost_mm& mm) {
    const bool bracket = !m.name.empty() && m.name[0] == '[';
    const bool anon_shmem = m.name.starts_with("[anon_shmem:");
    const bool special = bracket && !anon_shmem && m.name != "[heap]" && m.name != "[stack]" &&
                         !m.name.starts_with("[anon:");
    const std::string path = anon_shmem ? "/dev/zero (deleted)" : m.name;
    ghost_vma_facts v{};
    v.start = m.start;
    v.end = m.end;
    v.special = special ? m.name.c_str() : nullptr;
    v.hugetlb = m.has_flag("ht");
    v.device = m.has_flag("io") || m.has_flag("pf") || m.has_flag("mm");
    // A file: a path, or a pseudo file with an inode ("anon_inode:[io_uring]").
    v.file = anon_shmem || (!bracket && (m.inode != 0 || (!path.empty() && path[0] == '/')));
    v.reachable = v.file && !path.empty() && path[0] == '/' && !m.deleted() && !anon_shmem;
    v.path = v.file && !v.reachable ? path.c_str() : nullptr;
    v.shared = m.shared();
    v.growsdown = m.has_flag("gd");
    v.uffd_missing = m.has_flag("um");
    const ghost_mm_facts f{mm.start_brk, mm.brk, mm.start_stack};
    char reason[GHOST_REASON_LEN] = {};
    const int r = ghost_policy_vma(&v, &f, reason, sizeof(reason));
    if (r < 0)
        return Error::from_errno(-r, reason);
    return static_cast<std::uint32_t>(r);
}

// A mapping record's flags: its class and, but for the kernel's vDSO and
// vvar, its attributes.
Result<std::uint32_t> record_flags(const MapEntry& m, const ghost_mm& mm) {
    auto f = classify(m, mm);
    if (!f)
        return f.error();
    return *f | ((*f & (GHOST_VMA_VDSO | GHOST_VMA_VVAR)) ? 0 : vma_attrs(m));
}

// The pages of each mapping, found from /proc/PID/maps while another
// thread reads smaps (capture_maps()): index i is maps' i-th entry, its
// runs if they were sought, or why they could not be.
struct EarlyRuns {
    bool sought = false;
    image::Vma v;
    Result<void> found;
};

// GHOST_VMA_FILE, if the mapping carries pages (ghost_policy_vma() from its
// name, inode and permissions: what decides which pages it carries).
std::optional<std::uint32_t> runs_flags(const MapEntry& m, const ghost_mm& mm) {
    auto f = classify(m, mm);
    if (!f || (*f & (GHOST_VMA_SHARED | GHOST_VMA_VDSO | GHOST_VMA_VVAR)))
        return std::nullopt;
    return *f & GHOST_VMA_FILE;
}

// The pages of every mapping maps lists, sought before smaps is read.
std::vector<EarlyRuns> early_runs(const Result<std::vector<MapEntry>>& plain, int pagemap,
                                  PagemapBuffer& pm, const ghost_mm& mm, const Parent* parent) {
    std::vector<EarlyRuns> early;
    if (!plain)
        return early;
    early.resize(plain->size());
    for (std::size_t i = 0; i < plain->size(); i++) {
        const auto& m = (*plain)[i];
        auto f = m.name == "[vsyscall]" ? std::nullopt : runs_flags(m, mm);
        if (!f)
            continue;
        auto& e = early[i];
        e.sought = true;
        e.v.rec.start = m.start;
        e.v.rec.end = m.end;
        e.v.rec.flags = *f;
        e.found = find_runs(pagemap, e.v, pm, parent);
    }
    return early;
}

} // namespace

EarlySmaps EarlySmaps::start(pid_t pid) {
    EarlySmaps s;
    s.pid_ = pid;
    try {
        s.f_ = std::async(std::launch::async, [pid] { return read_maps(pid, true); });
    } catch (const std::system_error&) {
        // No thread: get() reads it.
    }
    return s;
}

bool EarlySmaps::ready() const {
    return !f_.valid() || f_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

bool leaves_mappings_alone(long nr) {
    switch (nr) {
    case SYS_read:
    case SYS_write:
    case SYS_readv:
    case SYS_writev:
    case SYS_pread64:
    case SYS_pwrite64:
    case SYS_preadv:
    case SYS_pwritev:
    case SYS_preadv2:
    case SYS_pwritev2:
    case SYS_close:
    case SYS_lseek:
    case SYS_fstat:
    case SYS_newfstatat:
    case SYS_statx:
    case SYS_openat:
    case SYS_poll:
    case SYS_ppoll:
    case SYS_select:
    case SYS_pselect6:
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
    case SYS_epoll_pwait2:
    case SYS_nanosleep:
    case SYS_clock_nanosleep:
    case SYS_clock_gettime:
    case SYS_clock_getres:
    case SYS_gettimeofday:
    case SYS_time:
    case SYS_futex:
    case SYS_getpid:
    case SYS_gettid:
    case SYS_getppid:
    case SYS_sched_yield:
    case SYS_rt_sigprocmask:
    case SYS_rt_sigaction:
    case SYS_rt_sigreturn:
    case SYS_rt_sigtimedwait:
    case SYS_rt_sigsuspend:
    case SYS_pause:
    case SYS_restart_syscall:
    case SYS_kill:
    case SYS_tgkill:
    case SYS_tkill:
    case SYS_recvfrom:
    case SYS_sendto:
    case SYS_recvmsg:
    case SYS_sendmsg:
    case SYS_recvmmsg:
    case SYS_sendmmsg:
    case SYS_accept:
    case SYS_accept4:
    case SYS_connect:
    case SYS_wait4:
    case SYS_waitid:
    case SYS_getrusage:
    case SYS_getrandom:
    case SYS_dup:
    case SYS_dup2:
    case SYS_dup3:
        return true;
    default:
        return false; // mmap, madvise, mlock, prctl, ioctl, clone, execve...
    }
}

Result<std::optional<EarlySmaps>> smaps_while_watched(Tracee& t,
                                                      const std::function<bool()>& until) {
    auto e = EarlySmaps::start(t.pid());
    auto calm =
        t.run_watched([&] { return e.ready() && (!until || until()); }, leaves_mappings_alone);
    if (!calm)
        return calm.error();
    if (*calm)
        return std::optional<EarlySmaps>();
    return std::optional<EarlySmaps>(std::move(e));
}

EarlySmaps EarlySmaps::deferred(pid_t pid) {
    EarlySmaps s;
    s.pid_ = pid;
    s.deferred_ = true;
    return s;
}

Result<std::vector<MapEntry>> EarlySmaps::get(const Result<std::vector<MapEntry>>& plain) {
    auto got = [&]() -> Result<std::vector<MapEntry>> {
        if (deferred_)
            return plain;
        if (f_.valid() && plain) {
            auto early = f_.get();
            if (early &&
                std::equal(early->begin(), early->end(), plain->begin(), plain->end(), same))
                return early;
        }
        return read_maps(pid_, true);
    }();
    if (got)
        used_ = *got;
    return got;
}

Result<bool> refine_from_snapshot(const EarlySmaps& smaps, pid_t child, bool live,
                                  const ghost_mm& mm, std::vector<image::Vma>& vmas) {
    auto seen = read_maps(child, true);
    if (!seen)
        return seen.error();
    const auto& used = smaps.used();
    if (!std::equal(seen->begin(), seen->end(), used.begin(), used.end(), same))
        return false;
    constexpr std::uint32_t kKind =
        GHOST_VMA_FILE | GHOST_VMA_SHARED | GHOST_VMA_VDSO | GHOST_VMA_VVAR;
    std::vector<std::uint32_t> flags;
    for (const auto& m : *seen) {
        if (m.name == "[vsyscall]")
            continue;
        if (!live && m.has_flag("wf"))
            return false;
        auto f = record_flags(m, mm);
        if (!f)
            return f.error();
        if (flags.size() >= vmas.size() || (*f & kKind) != (vmas[flags.size()].rec.flags & kKind))
            return false;
        flags.push_back(*f);
    }
    if (flags.size() != vmas.size())
        return false;
    for (std::size_t i = 0; i < vmas.size(); i++)
        vmas[i].rec.flags = flags[i];
    return true;
}

// The mappings, their flags and the pages each carries: the pages found
// from maps while smaps is read (EarlySmaps), then each mapping classified
// from smaps. Pages sought for a mapping that smaps shows otherwise (it
// cannot, the process held, but nothing is assumed) are sought again.
Result<std::vector<image::Vma>> capture_maps(pid_t pid, const ghost_mm& mm, const Parent* parent,
                                             EarlySmaps& smaps) {
    auto pagemap = open_pagemap(pid);
    if (!pagemap)
        return pagemap.error();
    PagemapBuffer pm;
    auto plain = read_maps(pid);
    auto early = early_runs(plain, pagemap->get(), pm, mm, parent);
    auto maps = smaps.get(plain);
    if (!maps)
        return maps.error();
    if (early.size() != maps->size())
        early.clear();
    std::vector<image::Vma> out;
    for (std::size_t i = 0; i < maps->size(); i++) {
        const auto& m = (*maps)[i];
        if (m.name == "[vsyscall]") // not a mapping of the process: the kernel's
            continue;
        auto flags = record_flags(m, mm);
        if (!flags)
            return flags.error();
        image::Vma v;
        auto& r = v.rec;
        r.start = m.start;
        r.end = m.end;
        r.flags = *flags;
        r.pgoff = (r.flags & GHOST_VMA_FILE) ? m.offset / kPage : m.start / kPage;
        r.prot = (m.perms[0] == 'r' ? PROT_READ : 0) | (m.perms[1] == 'w' ? PROT_WRITE : 0) |
                 (m.perms[2] == 'x' ? PROT_EXEC : 0);
        if (r.flags & GHOST_VMA_FILE) {
            v.path = m.name;
            r.path_len = static_cast<std::uint32_t>(m.name.size());
        }
        if (!(r.flags & (GHOST_VMA_SHARED | GHOST_VMA_VDSO | GHOST_VMA_VVAR))) {
            EarlyRuns* e = i < early.size() ? &early[i] : nullptr;
            if (e && e->sought && e->v.rec.start == m.start && e->v.rec.end == m.end &&
                e->v.rec.flags == (r.flags & GHOST_VMA_FILE)) {
                if (!e->found)
                    return e->found.error();
                v.runs = std::move(e->v.runs);
                r.nr_pages = e->v.rec.nr_pages;
            } else if (auto f = find_runs(pagemap->get(), v, pm, parent); !f) {
                return f.error();
            }
        }
        out.push_back(std::move(v));
    }
    return out;
}

} // namespace ghost::user
