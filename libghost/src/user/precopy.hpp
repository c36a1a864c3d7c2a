// SPDX-License-Identifier: LGPL-2.1-or-later
// The user engine's side of a Precopy (ghost/precopy.hpp): what export
// calls at each image's capture point and once the image is complete.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

#include "ghost/precopy.hpp"
#include "user/dirty.hpp"
#include "user/precopy_state.hpp"

namespace ghost::user {

inline constexpr std::uint64_t kPrecopyPage = 4096;

// Before the first image is captured: arms the write tracking of pid (whose
// start time is start_time), which is held only for a moment and runs on
// while every page is protected. Later: checks that s is pid's.
Result<void> precopy_arm(PrecopyState& s, pid_t pid, std::uint64_t start_time);

// The process held, at an image's capture point: the pages written since the
// arming or the previous image are protected again; for later images, the
// parent the image inherits unwritten pages from: the previous image.
Result<std::optional<Parent>> precopy_capture(PrecopyState& s, pid_t pid, std::uint64_t start_time);

// The image id written, with its records (its runs): the next one's parent;
// lost: pages it could not read (a round read as the process ran), to be
// written again by the next.
void precopy_done(PrecopyState& s, const image::Image& img, const chain::ImageId& id, Ranges lost);

} // namespace ghost::user
