// SPDX-License-Identifier: LGPL-2.1-or-later
// PAGEMAP_SCAN, region by region (pagemap_scan.hpp).
#include "user/pagemap_scan.hpp"

#include <sys/ioctl.h>

#include <array>
#include <cerrno>

#include <fmt/format.h>

#include "sys.hpp"

namespace ghost::user {

namespace {

struct PageRegion {
    std::uint64_t start, end, categories;
};

struct PmScanArg {
    std::uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    std::uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
static_assert(sizeof(PmScanArg) == 96);

constexpr unsigned long kPagemapScan = _IOWR('f', 16, PmScanArg);

} // namespace

Result<void> pagemap_scan(int pagemap, std::uint64_t start, std::uint64_t end, const ScanQuery& q,
                          const ScanFn& fn) {
    std::array<PageRegion, 512> vec{};
    while (start < end) {
        PmScanArg a{};
        a.size = sizeof(a);
        a.flags = q.flags;
        a.start = start;
        a.end = end;
        a.vec = reinterpret_cast<std::uintptr_t>(vec.data());
        a.vec_len = vec.size();
        a.category_inverted = q.category_inverted;
        a.category_mask = q.category_mask;
        a.category_anyof_mask = q.category_anyof_mask;
        a.return_mask = q.return_mask;
        const long n = ::ioctl(pagemap, kPagemapScan, &a);
        if (n < 0)
            return Error::from_errno(errno, fmt::format("PAGEMAP_SCAN of {:#x}-{:#x}: {}", start,
                                                        end, errno_text(errno)));
        for (long i = 0; i < n; i++) {
            const auto& r = vec[static_cast<std::size_t>(i)];
            if (auto s = fn(r.start, r.end, r.categories); !s)
                return s;
        }
        if (a.walk_end <= start)
            return Error::from_errno(EIO,
                                     fmt::format("PAGEMAP_SCAN made no progress at {:#x}", start));
        start = a.walk_end;
    }
    return {};
}

} // namespace ghost::user
