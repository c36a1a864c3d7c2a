// SPDX-License-Identifier: LGPL-2.1-or-later
// A --leave-running export through ghost.ko that holds the process only to
// read its state: GHOST_EXPORT_SNAPSHOT then GHOST_EXPORT_FINISH, with the
// fork that makes the snapshot run inside the process by the user engine's
// tracer. Not installed.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string_view>

#include "ghost/engine.hpp"
#include "ghost/result.hpp"

namespace ghost::detail {

// A ghost.ko ioctl's failure: the module's reason when it gave one, else a
// sentence from the errno naming what failed (kernel_engine.cpp).
Error ioctl_error(int err, const char* reason, std::string_view what);

// The export's result, or std::nullopt where this way is not open (the
// module lacks it, the process cannot be traced or fork, ghost.ko refused
// the snapshot): the process is then as it was, its snapshot gone, and the
// caller exports it the plain way, which gives the error if there is one.
std::optional<Result<ExportStats>> kernel_snapshot_export(int ghost_fd, pid_t pid);

} // namespace ghost::detail
