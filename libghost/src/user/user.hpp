// SPDX-License-Identifier: LGPL-2.1-or-later
// The user engine's two halves (Documentation/user-engine.md). Not
// installed: UserEngine (ghost/user_engine.hpp) is the public face.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string_view>

#include "ghost/chain.hpp"
#include "ghost/engine.hpp"
#include "ghost/image.hpp"

namespace ghost::user {

// What is refused before a process is touched, from /proc
// (ghost_policy_target() and ghost_policy_attrs()): a stopped or traced
// process, a seccomp one, into which no system call may be run... Also
// asked by the kernel engine before it holds a process for a snapshot.
Result<void> check_untouched(pid_t pid);

// Captures process pid into out (written at its offset), as ghost.ko's
// GHOST_IOC_EXPORT would. With a parent image (its path), an incremental
// image of the pages written since it (dirty.hpp). With precopy, the next
// image of that pre-copy (ghost/precopy.hpp).
struct PrecopyState;
Result<ExportStats> export_process(pid_t pid, Fate fate, int out, std::string_view parent = {},
                                   PrecopyState* precopy = nullptr);

// Replaces the calling process with img, whose bytes (page data included)
// are in bytes. Returns only on failure, with the caller as it was. With
// stopped, it stops (SIGSTOP) before running one instruction of the image.
// With lazy_pages, its private anonymous memory is put in by a pager after
// it runs (lazy.hpp): bytes must not change until the pager is done.
Error restore_self(std::span<const std::byte> bytes, const image::Image& img, bool stopped,
                   bool lazy_pages = false);

// The same for the newest image of a chain whose links are all loaded (a
// pre-copy's sequence): every page from the newest image that has it.
// With a shadow built from the same images, its buffers are moved into
// place instead of copying those mappings' pages.
class Shadow;
Error restore_chain(const chain::Chain& c, bool stopped, Shadow* shadow = nullptr);

} // namespace ghost::user
