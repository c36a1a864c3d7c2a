// SPDX-License-Identifier: LGPL-2.1-or-later
// The memory of a pre-copy's newest image, built while the images arrive
// (user engine): one anonymous buffer per private anonymous mapping, laid
// out as that mapping, holding exactly the pages the newest image gives it.
// Restoring then moves each buffer into place with mremap() (page tables
// move, no byte is copied), so the restore after the last image no longer
// copies the process's memory: only the last image's pages were copied
// since it arrived. Mappings of other kinds (files, stacks that grow down,
// shared memory) are restored from the images as usual.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "ghost/image.hpp"
#include "ghost/result.hpp"

namespace ghost::user {

class Shadow {
  public:
    Shadow() = default;
    Shadow(const Shadow&) = delete;
    Shadow& operator=(const Shadow&) = delete;
    ~Shadow(); // unmaps the buffers that were not moved into place

    // Whether a mapping is built here: private, anonymous, not a stack
    // that grows down (mremap() cannot make one).
    static bool eligible(const image::Vma& v);

    // Brings the buffers to img, whose bytes (page data included) are
    // bytes: a buffer per eligible mapping with pages, holding its written
    // pages from img and its inherited ones from the buffers as they were;
    // no other page. Buffers of mappings img does not have are unmapped. A
    // mapping with no buffer (none could be made, or its inherited pages
    // were not in one) is restored from the images as usual, unless one of
    // its inherited pages was placed (read into a buffer only: the image's
    // kept copy has a hole there), which fails (ENOMEM) rather than
    // restore zeros.
    Result<void> apply(const image::Image& img, std::span<const std::byte> bytes);

    // Where a part of a whole image's page run goes as it is read
    // (chain::Place): into a new buffer of its mapping, made at the
    // mapping's first run, so those pages are never copied again; empty
    // (read into the image as usual) for an incremental image, a mapping
    // apply() would not build, or when no buffer can be made. apply() of
    // that image then takes the buffers as they are.
    std::span<std::byte> place(const image::Image& so_far, const image::Vma& v,
                               const image::PageRun& part);

    // The buffer of mapping [start, end), 0 if none.
    std::uint64_t buffer(std::uint64_t start, std::uint64_t end) const;

    // Moves the buffers that lie where img has a mapping, or where taken
    // ranges are, to free places (in this process: before the rebuild).
    Result<void> clear_of(const image::Image& img);

    // Where the buffers are now, sorted: the rebuild keeps them.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges() const;

  private:
    struct Buffer {
        std::uint64_t addr = 0, len = 0;
        bool noreserve = false;
    };
    // Maps a new buffer for mapping v (MADV_DONTFORK), or false.
    static bool make(const image::Vma& v, Buffer& b);
    // Whether an inherited page of v lies in placed_ranges_.
    bool inherits_placed(const image::Vma& v) const;

    std::map<std::pair<std::uint64_t, std::uint64_t>, Buffer> bufs_; // by mapping range
    // Filled by place() for the image being read; apply() takes them.
    std::map<std::pair<std::uint64_t, std::uint64_t>, Buffer> placed_;
    // Mappings of that image whose first part could not be placed.
    std::set<std::pair<std::uint64_t, std::uint64_t>> unplaced_;
    // Every page range place() gave out (a whole image's, read into a
    // buffer and not into the image): only a buffer holds those pages.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> placed_ranges_;
};

} // namespace ghost::user
