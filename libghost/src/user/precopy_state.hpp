// SPDX-License-Identifier: LGPL-2.1-or-later
// What a Precopy (ghost/precopy.hpp) keeps between its images: the write
// tracker and the identity and pages of the last image.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "ghost/chain.hpp"
#include "user/wp_tracker.hpp"

namespace ghost::user {

struct PrecopyState {
    std::optional<WpTracker> tracker; // armed before the first capture
    pid_t pid = 0;
    std::uint64_t start_time = 0;
    std::uint32_t rounds = 0;
    chain::ImageId last;          // the last image
    std::uint32_t last_depth = 0; // its PARENT record's depth (0: whole)
    Ranges pages;                 // the pages it has
    std::uint64_t page_bytes = 0; // page data it carried
    // Pages a scan reported written (and protected again) for an image
    // that was not completed: still written for the next one.
    Ranges unsent;
    // For tests: run in a round that is not the last once it has let the
    // process go, before the mappings' flags are read (flags) and before its
    // pages are read (pages), so a test can change the process exactly there.
    std::function<void()> before_flags, before_pages;
    // For tests: run once the tracking is armed, before the first capture.
    std::function<void()> after_arm;
    // For tests: the last image's early smaps is taken as done only once
    // this says so too (a test changes the process while it is watched).
    std::function<bool()> watched_until;
    // Whether the last image took its mappings' flags from the smaps read
    // while the process still ran (false: read again while held).
    bool flags_early = false;
};

} // namespace ghost::user
