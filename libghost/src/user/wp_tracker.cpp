// SPDX-License-Identifier: LGPL-2.1-or-later
// Write tracking by asynchronous userfaultfd write-protection and
// PAGEMAP_SCAN (wp_tracker.hpp).
#include "user/wp_tracker.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include <fmt/format.h>

#include "sys.hpp"
#include "user/pagemap_scan.hpp"
#include "user/proc.hpp"

namespace ghost::user {

namespace {

// Linux 6.7 uapi, absent from this system's headers (linux-libc-dev 6.1).
constexpr std::uint64_t kFeatWpAsync = 1ULL << 15;
constexpr unsigned kUserModeOnly = 1; // UFFD_USER_MODE_ONLY
constexpr std::uint64_t kPage = 4096;

// UFFDIO_API with asynchronous write-protection; the error names what the
// kernel lacks. The kernel turns UFFD_FEATURE_WP_UNPOPULATED on with it
// whatever is asked: in a file mapping, a protected page that is zapped
// (MADV_DONTNEED, a truncation) leaves a marker that PAGEMAP_SCAN reports
// as swapped and not written, so only anonymous mappings are tracked
// (trackable()).
Result<void> enable_async_wp(int uffd) {
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = kFeatWpAsync;
    if (::ioctl(uffd, UFFDIO_API, &api) != 0)
        return Error::from_errno(errno == EINVAL ? EOPNOTSUPP : errno,
                                 fmt::format("this kernel has no asynchronous userfaultfd "
                                             "write-protection (UFFDIO_API: {}; Linux 6.7+ "
                                             "with CONFIG_PTE_MARKER_UFFD_WP)",
                                             errno_text(errno)));
    return {};
}

// The written pages of [start, end) of the process whose pagemap is fd,
// protected again as they are read (PM_SCAN_WP_MATCHING). Only pages that
// exist: a hole counts as written too, and protecting it would leave a
// marker that /proc/PID/pagemap shows as a swapped page. An unprotected
// hole is reported as written whenever it is filled, so nothing is lost.
Result<void> scan_range(int pagemap, std::uint64_t start, std::uint64_t end, Ranges& out) {
    ScanQuery q;
    q.flags = kScanWpMatching;
    q.category_mask = kPageIsWritten;
    q.category_anyof_mask = kPageIsPresent | kPageIsSwapped;
    q.return_mask = kPageIsWritten;
    return pagemap_scan(pagemap, start, end, q,
                        [&](std::uint64_t s, std::uint64_t e, std::uint64_t) -> Result<void> {
                            out.add(s, e);
                            return {};
                        });
}

// Mappings whose written pages are tracked: private anonymous ones (the
// heap and stack included), not the kernel's. A private file mapping's
// written pages (its own copies, usually few) are carried by every image:
// a zapped one would otherwise read as "not written, still there" and come
// back from an earlier image where the process now reads the file.
bool trackable(const MapEntry& m) {
    return !m.shared() && m.inode == 0 && m.name != "[vdso]" && m.name != "[vvar]" &&
           m.name != "[vvar_vclock]" && m.name != "[vsyscall]" &&
           (m.name.empty() || m.name.front() == '[');
}

} // namespace

void Ranges::add(std::uint64_t start, std::uint64_t end) {
    if (start >= end)
        return;
    if (!r_.empty() && start <= r_.back().second && start >= r_.back().first) {
        r_.back().second = std::max(r_.back().second, end);
        return;
    }
    if (r_.empty() || start > r_.back().second) {
        r_.emplace_back(start, end);
        return;
    }
    // Out of order (rare): insert and merge.
    r_.emplace_back(start, end);
    std::sort(r_.begin(), r_.end());
    std::vector<std::pair<std::uint64_t, std::uint64_t>> m;
    for (const auto& x : r_) {
        if (!m.empty() && x.first <= m.back().second)
            m.back().second = std::max(m.back().second, x.second);
        else
            m.push_back(x);
    }
    r_ = std::move(m);
}

std::uint64_t Ranges::next_change(std::uint64_t addr) const {
    auto it = std::upper_bound(r_.begin(), r_.end(), addr,
                               [](std::uint64_t a, const auto& r) { return a < r.first; });
    if (it != r_.begin() && addr < std::prev(it)->second)
        return std::prev(it)->second;
    return it == r_.end() ? UINT64_MAX : it->first;
}

bool Ranges::contains(std::uint64_t addr) const {
    // Pages are asked in ascending order: the range of the last answer, or
    // the next one, nearly always holds the answer.
    for (std::size_t i = hint_; i < r_.size() && i <= hint_ + 1; i++) {
        if (addr < r_[i].first)
            break;
        if (addr < r_[i].second) {
            hint_ = i;
            return true;
        }
    }
    auto it = std::upper_bound(r_.begin(), r_.end(), addr,
                               [](std::uint64_t a, const auto& r) { return a < r.first; });
    if (it == r_.begin())
        return false;
    --it;
    hint_ = static_cast<std::size_t>(it - r_.begin());
    return addr < it->second;
}

std::uint64_t Ranges::bytes() const {
    std::uint64_t n = 0;
    for (const auto& [s, e] : r_)
        n += e - s;
    return n;
}

Result<void> WpTracker::supported() {
    static const Result<void> probed = []() -> Result<void> {
        UniqueFd uffd(static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | kUserModeOnly)));
        if (!uffd)
            return Error::from_errno(errno, fmt::format("userfaultfd: {}", errno_text(errno)));
        if (auto a = enable_async_wp(uffd.get()); !a)
            return a;
        void* p =
            ::mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return Error::from_errno(errno, "mmap");
        const auto addr = reinterpret_cast<std::uintptr_t>(p);
        static_cast<volatile char*>(p)[0] = 1;
        Result<void> r;
        uffdio_register reg{};
        reg.range = {addr, kPage};
        reg.mode = UFFDIO_REGISTER_MODE_WP;
        UniqueFd pm(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
        Ranges first, second;
        if (::ioctl(uffd.get(), UFFDIO_REGISTER, &reg) != 0)
            r = Error::from_errno(
                errno, fmt::format("UFFDIO_REGISTER (write-protect): {}", errno_text(errno)));
        else if (!pm)
            r = Error::from_errno(errno, "cannot open /proc/self/pagemap");
        else if (auto s = scan_range(pm.get(), addr, addr + kPage, first); !s)
            r = Error::from_errno(
                s.error().code.value(),
                fmt::format("this kernel has no PAGEMAP_SCAN (Linux 6.7+): {}", s.error().what()));
        else if (static_cast<volatile char*>(p)[0] = 2;
                 !scan_range(pm.get(), addr, addr + kPage, second) || !first.contains(addr) ||
                 !second.contains(addr))
            r = Error::from_errno(EOPNOTSUPP, "PAGEMAP_SCAN does not report a written page");
        // The page, protected again by that scan, moved by mremap: the
        // scan must report it where it went (a tracker registers the new
        // mapping at its next scan and takes what is not reported for
        // unchanged). Kernels before 6.12.11 and 6.13 kept the protection
        // across mremap (CVE-2025-21696): the moved page would pass for
        // unwritten, and an earlier image's page at that address would
        // take its place.
        void* q =
            r ? ::mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
              : MAP_FAILED;
        if (q != MAP_FAILED) {
            void* to = ::mremap(p, kPage, kPage, MREMAP_MAYMOVE | MREMAP_FIXED, q);
            Ranges third;
            uffdio_register moved{};
            moved.range = {reinterpret_cast<std::uintptr_t>(q), kPage};
            moved.mode = UFFDIO_REGISTER_MODE_WP;
            if (to == MAP_FAILED) {
                r = Error::from_errno(errno, fmt::format("mremap: {}", errno_text(errno)));
                ::munmap(q, kPage);
            } else if (p = to;
                       ::ioctl(uffd.get(), UFFDIO_REGISTER, &moved) != 0 ||
                       !scan_range(pm.get(), moved.range.start, moved.range.start + kPage, third) ||
                       !third.contains(moved.range.start))
                r = Error::from_errno(EOPNOTSUPP,
                                      "this kernel keeps a page's write-protection across "
                                      "mremap (fixed in Linux 6.12.11 and 6.13: "
                                      "CVE-2025-21696): pre-copy would miss a moved page");
        }
        ::munmap(p, kPage);
        return r;
    }();
    return probed;
}

Result<WpTracker> WpTracker::attach(Tracee& t) {
    if (auto s = supported(); !s)
        return s.error();
    auto fd = t.call(SYS_userfaultfd, O_CLOEXEC | kUserModeOnly);
    if (!fd)
        return fd.error();
    if (is_err(*fd))
        return Error::from_errno(static_cast<int>(-*fd),
                                 fmt::format("userfaultfd() in process {}: {}", t.pid(),
                                             errno_text(static_cast<int>(-*fd))));
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, t.pid(), 0)));
    UniqueFd uffd(pidfd ? static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.get(), *fd, 0)) : -1);
    const int err = errno;
    (void)t.call(SYS_close, static_cast<std::uint64_t>(*fd));
    if (!uffd)
        return Error::from_errno(err, fmt::format("cannot take process {}'s userfaultfd "
                                                  "(pidfd_getfd): {}",
                                                  t.pid(), errno_text(err)));
    if (auto a = enable_async_wp(uffd.get()); !a)
        return a.error();
    return WpTracker(move_fd_high(std::move(uffd)));
}

Result<Ranges> WpTracker::scan(pid_t pid) {
    auto maps = read_maps(pid);
    if (!maps)
        return maps.error();
    auto pm = open_pagemap(pid);
    if (!pm)
        return pm.error();
    Ranges tracked, written;
    for (const auto& m : *maps) {
        if (!trackable(m))
            continue;
        // Registered at every scan: a mapping made since (even where an
        // old one was) is not, and a scan skips unregistered mappings
        // silently. Registering one already ours changes nothing; a new
        // one's pages have no protection yet, so the scan reports them all.
        uffdio_register reg{};
        reg.range = {m.start, m.end - m.start};
        reg.mode = UFFDIO_REGISTER_MODE_WP;
        if (::ioctl(uffd_.get(), UFFDIO_REGISTER, &reg) != 0)
            continue; // not tracked: every page of it counts as written
        if (auto s = scan_range(pm->get(), m.start, m.end, written); !s)
            return s.error();
        tracked.add(m.start, m.end);
    }
    tracked_ = std::move(tracked);
    return written;
}

} // namespace ghost::user
