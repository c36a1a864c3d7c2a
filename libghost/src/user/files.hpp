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

} // namespace ghost::user
