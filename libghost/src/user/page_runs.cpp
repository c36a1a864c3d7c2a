// SPDX-License-Identifier: LGPL-2.1-or-later
// The pages an export carries (page_runs.hpp).
#include "user/page_runs.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include <fmt/format.h>

#include "ghost_policy.h"
#include "sys.hpp"
#include "user/pagemap_scan.hpp"
#include "user/vma_attrs.hpp"

namespace ghost::user {

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kPmPresent = 1ULL << 63, kPmSwapped = 1ULL << 62, kPmFile = 1ULL << 61;
constexpr std::size_t kPagemapChunk = 64 * 1024; // entries per read

// Whether the kernel refused the query find_runs() makes of PAGEMAP_SCAN
// (before 6.15 it does not know PAGE_IS_GUARD, before 6.7 the ioctl): the
// pagemap is read from then on.
std::atomic<bool> g_scan_refused{false};

Error guard_refused(std::uint64_t addr) {
    char reason[GHOST_REASON_LEN] = {};
    const int err = ghost_policy_guard(addr, reason, sizeof(reason));
    return Error::from_errno(-err, reason);
}

// Adds n pages at addr to v, in the last run where they follow it.
void add_pages(image::Vma& v, std::uint64_t addr, std::uint64_t n, bool inherited) {
    if (!v.runs.empty() && v.runs.back().parent == inherited &&
        v.runs.back().addr + v.runs.back().nr_pages * kPage == addr)
        v.runs.back().nr_pages += n;
    else
        v.runs.push_back({addr, n, 0, inherited});
    v.rec.nr_pages += n;
}

// A region of pages of equal categories: the whole of it, or in stretches
// the parent does or does not hold (a pre-copy's previous image).
void add_region(image::Vma& v, std::uint64_t start, std::uint64_t end, const Parent* parent) {
    if (start >= end)
        return;
    if (!parent || parent->mode() != DirtyMode::Tracked) {
        add_pages(v, start, (end - start) / kPage, false);
        return;
    }
    for (std::uint64_t addr = start; addr < end;) {
        bool inherited = false;
        const std::uint64_t to = parent->stretch(addr, end, inherited);
        add_pages(v, addr, (to - addr) / kPage, inherited);
        addr = to;
    }
}

// The pages of an anonymous mapping: all but those that are not present
// and not swapped. The kernel is asked for the pages that are not present
// (holes, swapped and guard pages): it walks every page either way, but
// a page it reports costs about three times one it passes over, and a
// process's pages are mostly present (2 GiB: 1.7 ms, against 6.7 ms for
// asking for the present ones).
Result<void> scan_anon_runs(int pagemap, image::Vma& v, const Parent* parent) {
    ScanQuery q;
    q.category_inverted = kPageIsPresent;
    q.category_mask = kPageIsPresent;
    q.return_mask = kPageIsSwapped | kPageIsGuard;
    std::uint64_t from = v.rec.start; // present from here to the next region
    auto s = pagemap_scan(pagemap, v.rec.start, v.rec.end, q,
                          [&](std::uint64_t b, std::uint64_t e, std::uint64_t cat) -> Result<void> {
                              if (cat & kPageIsGuard)
                                  return guard_refused(b);
                              add_region(v, from, b, parent);
                              if (cat & kPageIsSwapped)
                                  add_region(v, b, e, parent);
                              from = e;
                              return {};
                          });
    if (s)
        add_region(v, from, v.rec.end, parent);
    return s;
}

// The private copies of a file mapping (present, not the file's page) and
// its swapped pages: asked for as they are, they are few.
Result<void> scan_file_runs(int pagemap, image::Vma& v, const Parent* parent) {
    ScanQuery q;
    q.category_anyof_mask = kPageIsPresent | kPageIsSwapped;
    q.return_mask = kPageIsPresent | kPageIsSwapped | kPageIsGuard | kPageIsFile;
    return pagemap_scan(pagemap, v.rec.start, v.rec.end, q,
                        [&](std::uint64_t s, std::uint64_t e, std::uint64_t cat) -> Result<void> {
                            if (cat & kPageIsGuard)
                                return guard_refused(s);
                            if ((cat & kPageIsSwapped) || !(cat & kPageIsFile))
                                add_region(v, s, e, parent);
                            return {};
                        });
}

Result<void> read_entries(int pagemap, image::Vma& v, PagemapBuffer& pm, const Parent* parent,
                          bool anon_only) {
    if (pm.size() < kPagemapChunk)
        pm.resize(kPagemapChunk);
    std::uint64_t addr = v.rec.start;
    while (addr < v.rec.end) {
        const std::size_t n = static_cast<std::size_t>(
            std::min<std::uint64_t>((v.rec.end - addr) / kPage, kPagemapChunk));
        const ssize_t got =
            ::pread(pagemap, pm.data(), n * 8, static_cast<off_t>(addr / kPage * 8));
        if (got != static_cast<ssize_t>(n * 8))
            return Error::from_errno(got < 0 ? errno : EIO,
                                     fmt::format("reading the page map at {:#x}: {}", addr,
                                                 errno_text(got < 0 ? errno : EIO)));
        for (std::size_t i = 0; i < n; i++, addr += kPage) {
            const std::uint64_t e = pm[i];
            if (pagemap_guard(e))
                return guard_refused(addr);
            const bool exists =
                (e & kPmSwapped) || ((e & kPmPresent) && !(anon_only && (e & kPmFile)));
            if (exists)
                add_pages(v, addr, 1, parent && parent->inherits(e, addr));
        }
    }
    return {};
}

} // namespace

Result<void> find_runs(int pagemap, image::Vma& v, PagemapBuffer& buf, const Parent* parent) {
    const bool anon_only = v.rec.flags & GHOST_VMA_FILE;
    // Soft-dirty bits are per page: only the pagemap has them.
    if (!g_scan_refused.load(std::memory_order_relaxed) &&
        !(parent && parent->mode() == DirtyMode::SoftDirty)) {
        auto s =
            anon_only ? scan_file_runs(pagemap, v, parent) : scan_anon_runs(pagemap, v, parent);
        // The kernel's refusal of the query itself (a guard page is
        // EOPNOTSUPP): read the pagemap from now on.
        const int err = s ? 0 : s.error().code.value();
        if (err != EINVAL && err != ENOTTY)
            return s;
        g_scan_refused.store(true, std::memory_order_relaxed);
        v.runs.clear();
        v.rec.nr_pages = 0;
    }
    return read_entries(pagemap, v, buf, parent, anon_only);
}

Result<void> read_runs(int pagemap, image::Vma& v, PagemapBuffer& buf, const Parent* parent) {
    return read_entries(pagemap, v, buf, parent, v.rec.flags & GHOST_VMA_FILE);
}

} // namespace ghost::user
