// SPDX-License-Identifier: LGPL-2.1-or-later
// A held process's descriptors as image FILE records (user engine export).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "ghost/image.hpp"
#include "ghost/result.hpp"

namespace ghost::user {

// Its descriptors in order, each a FILE record (a DUP of an earlier one
// where they share the open file; kcmp), or the first refusal
// ghost_policy_fd() makes. fdinfo[i] gets the /proc/PID/fdinfo text of the
// i-th, which capture_locks() reads its locks from.
Result<std::vector<image::File>> capture_files(pid_t pid, std::vector<std::string>& fdinfo);

// ghost_policy_fd()'s first refusal of pid's descriptors as they are now,
// before it is held: seizing it interrupts what it sleeps in, and some
// calls return EINTR to it then (epoll_wait() on the epoll descriptor that
// gets it refused). capture_files() decides again once it is held.
Result<void> check_files(pid_t pid);

} // namespace ghost::user
