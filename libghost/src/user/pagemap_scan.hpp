// SPDX-License-Identifier: LGPL-2.1-or-later
// The PAGEMAP_SCAN ioctl of /proc/PID/pagemap (Linux 6.7+): the pages of a
// range that match some categories, reported as regions of equal
// categories rather than one entry per page. Used to read and re-arm
// write-protection (wp_tracker.cpp) and to find which pages exist
// (page_runs.cpp). This system's headers (linux-libc-dev 6.1) lack it.
#pragma once

#include <cstdint>
#include <functional>

#include "ghost/result.hpp"

namespace ghost::user {

// PAGE_IS_* categories (include/uapi/linux/fs.h).
inline constexpr std::uint64_t kPageIsWritten = 1ULL << 1;
inline constexpr std::uint64_t kPageIsFile = 1ULL << 2;
inline constexpr std::uint64_t kPageIsPresent = 1ULL << 3;
inline constexpr std::uint64_t kPageIsSwapped = 1ULL << 4;
inline constexpr std::uint64_t kPageIsGuard = 1ULL << 8; // Linux 6.15+
// PM_SCAN_WP_MATCHING: write-protect the pages reported.
inline constexpr std::uint64_t kScanWpMatching = 1ULL << 0;

struct ScanQuery {
    std::uint64_t flags = 0;               // PM_SCAN_*
    std::uint64_t category_inverted = 0;   // categories tested for their absence
    std::uint64_t category_mask = 0;       // a page must have every one of these
    std::uint64_t category_anyof_mask = 0; // and at least one of these
    std::uint64_t return_mask = 0;         // the categories reported per region
};

// Calls fn(start, end, categories) for each region of [start, end) that
// matches q, in ascending order, until fn fails. The kernel's own errno is
// kept (EINVAL for a category it does not know, ENOTTY before 6.7) so that
// a caller can fall back to reading the pagemap.
using ScanFn = std::function<Result<void>(std::uint64_t, std::uint64_t, std::uint64_t)>;
Result<void> pagemap_scan(int pagemap, std::uint64_t start, std::uint64_t end, const ScanQuery& q,
                          const ScanFn& fn);

} // namespace ghost::user
