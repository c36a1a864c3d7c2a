// SPDX-License-Identifier: LGPL-2.1-or-later
// Incremental export in the user engine (Documentation/user-engine.md,
// "Incremental checkpoints"): which pages a process wrote since its last
// leave-running checkpoint, and the record of that checkpoint.
//
// Two ways to tell a written page: the kernel's soft-dirty bits (pagemap
// bit 55, cleared by writing "4" to /proc/PID/clear_refs; needs
// CONFIG_MEM_SOFT_DIRTY), where clean pages are not even read; or, on
// kernels without them, comparing each present page with the parent
// chain's copy, where only the differing pages are written.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ghost/chain.hpp"
#include "ghost/image.hpp"
#include "ghost/result.hpp"
#include "user/tracee.hpp"
#include "user/wp_tracker.hpp"

namespace ghost::user {

// SoftDirty and Compare for a parent image file; Tracked for the previous
// image of a pre-copy, whose pages were told written by a WpTracker.
enum class DirtyMode { SoftDirty, Compare, Tracked };

// Whether this kernel keeps soft-dirty bits: a page this process has just
// written shows pagemap bit 55 (probed once, on a page of its own).
bool soft_dirty_supported();

// The process's start time, /proc/PID/stat field 22 (clock ticks after boot).
Result<std::uint64_t> start_time(pid_t pid);

// The parent of an incremental export, checked to be the process's last
// leave-running checkpoint.
class Parent {
  public:
    // Loads path (and, comparing, its whole chain) and checks it against
    // pid's record; EINVAL naming the image when it is not pid's last.
    static Result<Parent> open(pid_t pid, const std::string& path);
    // The previous image of a pre-copy: rec names it, pages are the pages
    // it has, and a page of tracked that is not in written is unchanged.
    static Parent of_round(const ghost_parent& rec, Ranges pages, Ranges tracked, Ranges written);

    DirtyMode mode() const { return mode_; }
    std::uint64_t start_time() const { return start_time_; }
    // The PARENT record and path hint of the child image.
    ghost_parent record() const;
    const std::string& path() const { return path_; }
    // With soft-dirty bits or tracking: whether the page at addr, pagemap
    // entry e, is the parent's (not written since, and the parent has it).
    bool inherits(std::uint64_t e, std::uint64_t addr) const;
    // Tracked: the end (at most end) of the stretch from addr whose pages
    // all are, or all are not, the parent's; inherited says which.
    std::uint64_t stretch(std::uint64_t addr, std::uint64_t end, bool& inherited) const;
    // The parent chain (a parent image file's only).
    const chain::Chain& chain() const { return *chain_; }

  private:
    Parent(std::optional<chain::Chain> c, std::string path, DirtyMode m, std::uint64_t st)
        : chain_(std::move(c)), path_(std::move(path)), mode_(m), start_time_(st) {}
    std::optional<chain::Chain> chain_;
    std::string path_;
    DirtyMode mode_;
    std::uint64_t start_time_;
    ghost_parent round_{};             // Tracked: the record
    Ranges pages_, tracked_, written_; // Tracked
};

// The record of a process's last leave-running checkpoint: which image its
// soft-dirty bits were cleared for. Kept in $GHOST_STATE_DIR, else
// /run/ghost/checkpoints (root) or $XDG_RUNTIME_DIR/ghost/checkpoints.
class Tracking {
  public:
    // At the capture point of a leave-running export, the process held:
    // forgets its last checkpoint and clears its soft-dirty bits.
    static Tracking reset(pid_t pid);
    // Once the image is complete: it is now the process's last checkpoint.
    void remember(const chain::ImageId& id) const;

  private:
    pid_t pid_ = 0;
    std::uint64_t start_time_ = 0;
    bool ok_ = false;      // the old record is gone and the bits cleared (or none kept)
    bool cleared_ = false; // the kernel cleared soft-dirty bits
};

// Where an export reads page data. Held (the process or its snapshot), a
// read that fails fails the export. A pre-copy round that is not the last
// reads the process as it runs (lost set): a page it has unmapped since the
// capture cannot be read, is written as zeros and added to lost, so that the
// next image carries it again (what the process wrote meanwhile the next
// scan reports anyway).
struct PageSource {
    Tracee& from;
    Ranges* lost = nullptr;
    Result<void> read(std::uint64_t addr, std::span<std::byte> chunk, bool readable) const;
};

// Writes the PAGES sections of v, inheriting what the parent has: runs
// flagged inherited as such; with DirtyMode::Compare each page is read and
// compared with the parent chain's copy, and only those that differ are
// written.
Result<void> write_pages_incremental(const PageSource& from, image::Writer& w, const image::Vma& v,
                                     std::span<std::byte> buf, const Parent& parent);

} // namespace ghost::user
