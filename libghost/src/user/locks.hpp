// SPDX-License-Identifier: LGPL-2.1-or-later
// File locks (LOCK records) in the user engine: read from /proc/PID/fdinfo
// at export, taken again at import (Documentation/user-engine.md).
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "ghost/image.hpp"

namespace ghost::user {

// The locks held through the open files of the held process pid, in the
// order ghost.ko writes them (each open file's fdinfo: flock, POSIX and
// OFD, leases), or ghost_policy_lock()'s refusal. fdinfo[i]: the
// /proc/PID/fdinfo text of files[i], as capture_files() read it.
Result<std::vector<ghost_lock>> capture_locks(pid_t pid, const std::vector<image::File>& files,
                                              const std::vector<std::string>& fdinfo);

// In the caller, before the point of no return. file_fd[i]: the reopened
// files[i] (or -1). OFD and flock locks are taken on the open files (they
// follow them through dup3); POSIX locks, which any close of the file drops,
// are only tested: none may be held by another process now.
Result<void> take_early_locks(const image::Image& img, const std::vector<int>& file_fd);

// The image descriptor a lock is held through (the first of its open file).
int lock_fd(const image::Image& img, const ghost_lock& l);

// The F_SETLK request of a POSIX lock.
struct flock posix_request(const ghost_lock& l);

// The reason a lock cannot be taken again: another process holds it.
Error lock_conflict(const image::Image& img, const ghost_lock& l);

} // namespace ghost::user
