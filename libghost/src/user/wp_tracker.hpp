// SPDX-License-Identifier: LGPL-2.1-or-later
// Which pages a process writes, told by the kernel as it runs: userfaultfd
// write-protection in asynchronous mode (Linux 6.7+: a write to a protected
// page just clears the protection, nothing waits) read and re-armed in one
// pass by the PAGEMAP_SCAN ioctl. Unlike soft-dirty bits (clear_refs) it
// needs no kernel option this host lacks, and unlike comparing pages it
// reads nothing that was not written. Pre-copy migration uses it
// (ghost/precopy.hpp, Documentation/user-engine.md, "Pre-copy").
//
// The userfaultfd is made inside the process (a system call run there while
// it is held), taken into the tracker with pidfd_getfd() and closed there
// again: the process's descriptor table is as it was. The tracking lasts as
// long as the tracker holds the descriptor; closing it removes every
// protection.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "ghost/fd.hpp"
#include "ghost/result.hpp"
#include "user/tracee.hpp"

namespace ghost::user {

// Sorted, disjoint, half-open address ranges.
class Ranges {
  public:
    void add(std::uint64_t start, std::uint64_t end);
    bool contains(std::uint64_t addr) const;
    // The first address after addr where contains() changes (UINT64_MAX if
    // none).
    std::uint64_t next_change(std::uint64_t addr) const;
    bool empty() const { return r_.empty(); }
    std::uint64_t bytes() const;
    const std::vector<std::pair<std::uint64_t, std::uint64_t>>& list() const { return r_; }

  private:
    std::vector<std::pair<std::uint64_t, std::uint64_t>> r_;
    mutable std::size_t hint_ = 0; // where the last contains() looked
};

class WpTracker {
  public:
    // Whether this kernel has asynchronous userfaultfd write-protection and
    // PAGEMAP_SCAN (probed once, on a page of this process); the error says
    // which is missing.
    static Result<void> supported();

    // Makes the tracker for the process t holds (its syscall instruction
    // set up for Tracee::call). Nothing is protected yet: scan() does it.
    static Result<WpTracker> attach(Tracee& t);

    // At a capture point, the process held: registers every private
    // mapping not yet tracked (its pages count as written: nothing told
    // otherwise), and returns the pages written since the last scan, protecting them
    // again in the same pass. tracked() is then where "not in the result"
    // means "not written since the last scan".
    Result<Ranges> scan(pid_t pid);
    const Ranges& tracked() const { return tracked_; }

  private:
    explicit WpTracker(UniqueFd uffd) : uffd_(std::move(uffd)) {}
    UniqueFd uffd_;
    Ranges tracked_; // mappings registered and scanned at the last scan
};

} // namespace ghost::user
