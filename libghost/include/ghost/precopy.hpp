// SPDX-License-Identifier: LGPL-2.1-or-later
// Pre-copy: a sequence of images of one running process, the first whole,
// each after it holding only the pages written since the one before (an
// incremental image whose PARENT names the previous one). For each image
// but the last the process is held only to capture it (its state, and the
// pages written since the previous image, protected again in the same
// pass); its pages are then read as it runs on, and what it writes
// meanwhile is in the next image. The last is taken like any checkpoint
// (but that the mappings' flags are read just before the process is held,
// its system calls watched, and again while held if it changed a mapping):
// so the last image, the only one taken while the process waits, is small
// when the process writes little. Only the whole sequence is one instant of
// the process; an image but the last, restored alone, need not be.
// migd's live migration sends the images as they are made and the
// destination restores the whole sequence (RestartOptions::chain).
//
// User engine only: the pages written are told by asynchronous userfaultfd
// write-protection and PAGEMAP_SCAN (Linux 6.7+), armed just before the
// first image, the process running, and dropped when the Precopy is destroyed
// (Documentation/user-engine.md, "Pre-copy").
#pragma once

#include <cstdint>
#include <memory>

#include "ghost/result.hpp"

namespace ghost {

namespace user {
struct PrecopyState;
}

class Precopy {
  public:
    Precopy();
    ~Precopy();
    Precopy(Precopy&&) noexcept;
    Precopy& operator=(Precopy&&) noexcept;

    // Whether this kernel can tell the pages a process writes as pre-copy
    // needs; the error names what it lacks.
    static Result<void> supported();

    // Images written so far (0 before the first).
    std::uint32_t rounds() const;
    // Bytes of page data the last image carried: every page for the first,
    // the pages written since the previous image for the others.
    std::uint64_t last_page_bytes() const;

    // For the engine (not part of the stable interface).
    user::PrecopyState& state() { return *s_; }

  private:
    std::unique_ptr<user::PrecopyState> s_;
};

} // namespace ghost
