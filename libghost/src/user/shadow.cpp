// SPDX-License-Identifier: LGPL-2.1-or-later
// A pre-copy's memory built as its images arrive (shadow.hpp).
#include "user/shadow.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "sys.hpp"
#include "user/proc.hpp"

namespace ghost::user {

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kTaskSize = (1ULL << 47) - kPage;
constexpr int kMadvPopulateWrite = 23; // MADV_POPULATE_WRITE, Linux 5.14

bool overlaps(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
    return a < d && c < b;
}

// The first address from at that lies where start does within a 2 MiB
// page table. A buffer there moves into place by whole page tables
// (mremap of a GiB: 0.3 ms, against 3-4 ms entry by entry elsewhere).
constexpr std::uint64_t kPmd = 2ULL << 20;
std::uint64_t like(std::uint64_t at, std::uint64_t start) {
    const std::uint64_t want = start & (kPmd - 1);
    const std::uint64_t base = at & ~(kPmd - 1);
    return base + want >= at ? base + want : base + kPmd + want;
}

} // namespace

Shadow::~Shadow() {
    for (const auto* m : {&bufs_, &placed_})
        for (const auto& [range, b] : *m)
            ::munmap(reinterpret_cast<void*>(b.addr), b.len);
}

bool Shadow::make(const image::Vma& v, Buffer& b) {
    b.len = v.rec.end - v.rec.start;
    b.noreserve = v.rec.flags & GHOST_VMA_NORESERVE;
    void* p = ::mmap(nullptr, b.len + kPmd, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | (b.noreserve ? MAP_NORESERVE : 0), -1, 0);
    if (p == MAP_FAILED)
        return false;
    const auto raw = reinterpret_cast<std::uint64_t>(p);
    b.addr = like(raw, v.rec.start);
    if (b.addr > raw)
        ::munmap(p, b.addr - raw);
    if (raw + kPmd > b.addr)
        ::munmap(reinterpret_cast<void*>(b.addr + b.len), raw + kPmd - b.addr);
    // Not copied into the restorer's forks (page tables of the whole
    // buffer, in the downtime); the rebuild undoes it.
    ::madvise(reinterpret_cast<void*>(b.addr), b.len, MADV_DONTFORK);
    return true;
}

std::span<std::byte> Shadow::place(const image::Image& so_far, const image::Vma& v,
                                   const image::PageRun& part) {
    if (so_far.parent || !eligible(v))
        return {};
    const auto key = std::pair{v.rec.start, v.rec.end};
    auto it = placed_.find(key);
    if (it == placed_.end()) {
        // Only from the mapping's first part on: a mapping with a part read
        // into the image goes on that way (apply() copies them all).
        if (!v.runs.empty() || unplaced_.contains(key))
            return {};
        Buffer b;
        if (!make(v, b)) {
            unplaced_.insert(key);
            return {};
        }
        it = placed_.emplace(key, b).first;
    }
    std::byte* at = reinterpret_cast<std::byte*>(it->second.addr + (part.addr - v.rec.start));
    // The part's pages made present in one call before the read fills
    // them: a fault taken per page costs about as much as its copy. Best
    // effort (Linux 5.14+): the read faults in what this did not.
    ::madvise(at, part.nr_pages * kPage, kMadvPopulateWrite);
    placed_ranges_.emplace_back(part.addr, part.addr + part.nr_pages * kPage);
    return {at, part.nr_pages * kPage};
}

bool Shadow::inherits_placed(const image::Vma& v) const {
    for (const auto& r : v.runs)
        if (r.parent)
            for (const auto& [s, e] : placed_ranges_)
                if (overlaps(r.addr, r.addr + r.nr_pages * kPage, s, e))
                    return true;
    return false;
}

bool Shadow::eligible(const image::Vma& v) {
    return !(v.rec.flags & (GHOST_VMA_SHARED | GHOST_VMA_FILE | GHOST_VMA_GROWSDOWN |
                            GHOST_VMA_VDSO | GHOST_VMA_VVAR));
}

Result<void> Shadow::apply(const image::Image& img, std::span<const std::byte> bytes) {
    decltype(bufs_) next;
    struct Drop { // next's buffers, unless the images all apply
        decltype(bufs_)* m;
        ~Drop() {
            if (m)
                for (const auto& [range, b] : *m)
                    ::munmap(reinterpret_cast<void*>(b.addr), b.len);
        }
    } drop{&next};
    // A mapping left to the rebuild, which copies its pages from the
    // images: not one whose inherited pages only a buffer holds.
    const auto from_images = [&](const image::Vma& v, const char* why) -> Result<void> {
        if (!inherits_placed(v))
            return {};
        return Error::from_errno(
            ENOMEM, fmt::format("the pre-copy cannot rebuild mapping {:#x}-{:#x}: {}, and pages "
                                "it keeps from the first image were read into a buffer only",
                                v.rec.start, v.rec.end, why));
    };
    for (const auto& v : img.vmas) {
        // A mapping without pages (a reservation, often huge) is mapped by
        // the rebuild as usual: a buffer would only cost commit charge.
        if (!eligible(v) || v.runs.empty()) {
            if (auto r = from_images(v, "it is no longer one built in a buffer"); !r)
                return r;
            continue;
        }
        const auto key = std::pair{v.rec.start, v.rec.end};
        if (auto it = placed_.find(key); it != placed_.end()) {
            // Its pages were read straight into it (a whole image: no
            // inherited run, nothing else to bring).
            next.emplace(key, it->second);
            placed_.erase(it);
            continue;
        }
        const bool noreserve = v.rec.flags & GHOST_VMA_NORESERVE;
        Buffer b;
        bool fresh = true;
        if (auto it = bufs_.find(key); it != bufs_.end() && it->second.noreserve == noreserve) {
            b = it->second;
            bufs_.erase(it);
            fresh = false;
        } else if (!make(v, b)) {
            // No room ahead: the rebuild copies it from the images.
            if (auto r = from_images(v, "no buffer could be made for its new extent"); !r)
                return r;
            continue;
        }
        const auto at = [&](std::uint64_t addr) {
            return reinterpret_cast<std::byte*>(b.addr + (addr - v.rec.start));
        };
        std::uint64_t upto = v.rec.start; // pages below it are settled
        bool inherited_all = true;
        for (const auto& r : v.runs) {
            const std::uint64_t len = r.nr_pages * kPage;
            if (!fresh && r.addr > upto) // a page the image does not have
                ::madvise(at(upto), r.addr - upto, MADV_DONTNEED);
            if (!r.parent) {
                std::memcpy(at(r.addr), bytes.data() + r.data_offset, len);
            } else if (fresh) {
                // Inherited into a mapping that changed: from the old
                // buffers that held those addresses.
                std::uint64_t got = 0;
                for (const auto& [range, old] : bufs_) {
                    const std::uint64_t s = std::max(range.first, r.addr);
                    const std::uint64_t e = std::min(range.second, r.addr + len);
                    if (s < e) {
                        std::memcpy(
                            at(s), reinterpret_cast<const std::byte*>(old.addr + (s - range.first)),
                            e - s);
                        got += e - s;
                    }
                }
                inherited_all = inherited_all && got == len;
            }
            upto = r.addr + len;
        }
        if (!fresh && upto < v.rec.end)
            ::madvise(at(upto), v.rec.end - upto, MADV_DONTNEED);
        if (!inherited_all) {
            // Not built here: restored from the images as usual.
            ::munmap(reinterpret_cast<void*>(b.addr), b.len);
            if (auto r = from_images(v, "some of its inherited pages were in no buffer"); !r)
                return r;
            continue;
        }
        next.emplace(key, b);
    }
    for (const auto* m : {&bufs_, &placed_})
        for (const auto& [range, b] : *m)
            ::munmap(reinterpret_cast<void*>(b.addr), b.len);
    placed_.clear();
    unplaced_.clear();
    bufs_ = std::move(next);
    drop.m = nullptr;
    return {};
}

std::uint64_t Shadow::buffer(std::uint64_t start, std::uint64_t end) const {
    auto it = bufs_.find({start, end});
    return it == bufs_.end() ? 0 : it->second.addr;
}

Result<void> Shadow::clear_of(const image::Image& img) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> image;
    for (const auto& v : img.vmas)
        image.emplace_back(v.rec.start, v.rec.end);
    const auto in_image = [&](std::uint64_t s, std::uint64_t e) {
        return std::any_of(image.begin(), image.end(),
                           [&](const auto& r) { return overlaps(s, e, r.first, r.second); });
    };
    for (auto& [range, b] : bufs_) {
        if (!in_image(b.addr, b.addr + b.len))
            continue;
        // Somewhere free both here and in the image.
        auto maps = read_maps(::getpid());
        if (!maps)
            return maps.error();
        std::vector<std::pair<std::uint64_t, std::uint64_t>> taken = image;
        for (const auto& m : *maps)
            taken.emplace_back(m.start, m.end);
        std::sort(taken.begin(), taken.end());
        std::uint64_t to = like(1ULL << 32, range.first);
        for (const auto& [s, e] : taken) {
            if (overlaps(to, to + b.len, s, e))
                to = like(std::max(to, (e + kPage - 1) & ~(kPage - 1)), range.first);
        }
        if (to + b.len > kTaskSize)
            return Error::from_errno(ENOMEM, "no room to move the pre-copied memory aside");
        void* p = ::mremap(reinterpret_cast<void*>(b.addr), b.len, b.len,
                           MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(to));
        if (p == MAP_FAILED)
            return Error::from_errno(
                errno, fmt::format("moving the pre-copied memory aside: {}", errno_text(errno)));
        b.addr = to;
    }
    return {};
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> Shadow::ranges() const {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    for (const auto& [range, b] : bufs_)
        out.emplace_back(b.addr, b.addr + b.len);
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace ghost::user
