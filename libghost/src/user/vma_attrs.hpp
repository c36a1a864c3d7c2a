// SPDX-License-Identifier: LGPL-2.1-or-later
// Mapping attributes (GHOST_VMA_ATTRS: mlock, MAP_NORESERVE, the madvise
// flags, may-write) for the user engine: read from smaps at export, checked
// in the caller and given back with system calls in it at import.
#pragma once

#include <cstdint>
#include <functional>

#include "ghost/image.hpp"
#include "ghost/result.hpp"
#include "user/proc.hpp"

namespace ghost::user {

// The GHOST_VMA_ATTRS of a mapping from its smaps entry (VmFlags, Rss).
std::uint32_t vma_attrs(const MapEntry& m);

// The first guard page (MADV_GUARD_INSTALL) a /proc/PID/pagemap entry
// shows (bit 58, Linux 6.15+), for ghost_policy_guard().
bool pagemap_guard(std::uint64_t entry);

// Before the point of no return, in the caller: its RLIMIT_MEMLOCK (or
// CAP_IPC_LOCK) admits the image's locked memory (GHOST_MEMLOCK_REASON).
Result<void> check_memlock(const image::Image& img);

// Before the point of no return, in the caller: this kernel takes every
// madvise() advice the image's mappings need (GHOST_ADVICE_REASON).
Result<void> check_advice(const image::Image& img);

// A system call run in the process being rebuilt: (what, nr, a1, a2, a3).
using SysCall =
    std::function<Result<long>(const char*, long, std::uint64_t, std::uint64_t, std::uint64_t)>;

// After a mapping is made and filled: its madvise flags and mlock.
Result<void> apply_vma_attrs(const SysCall& call, const ghost_vma& v);

} // namespace ghost::user
