// SPDX-License-Identifier: LGPL-2.1-or-later
// Credentials in the user engine: the CREDS section of an export, and on
// import the rule (common/ghost_creds.h) and the switch
// (ghost/c/assume_creds.h). Not installed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "ghost/image.hpp"
#include "ghost/result.hpp"

namespace ghost::user {

// The CREDS record of pid from its /proc/PID/status text (Uid, Gid, Groups,
// Cap* lines) and /proc/PID/loginuid; securebits as the process said them
// (prctl(PR_GET_SECUREBITS) run inside it).
Result<void> fill_creds(pid_t pid, std::string_view status, std::uint32_t securebits,
                        image::Image& img);

// In the importer, before anything is touched: refuses an image whose
// credentials the caller may not assume (the shared rule), else raises
// the caller's hard limits to the image's where they are higher (the
// restorer sets the limits later, without the privilege the caller may
// lose), and switches the caller to the image's credentials, first giving
// it a session of its own when root restores another user's process
// (ghost_creds_own_session()). Nothing for an image without credentials.
Result<void> assume_image_creds(const image::Image& img);

// Debian reserves uids and gids 65000-65533 and gives no account one.
constexpr std::uint32_t kNoAccountId = 65533;

// The lazy pager's credentials (lazy_start.cpp), under the same rule: the
// image's effective and file-system ids, with which it reads the restored
// process's smaps and may kill it, and its groups, but a real and saved
// uid and gid of no account (kNoAccountId, or the next below that the image
// does not use) and no capabilities. The kernel lets a user signal a
// process whose real or saved uid is theirs, and set its limits: the
// image's user could stop the pager, and with it every fault taken inside
// a system call of the restored process, for as long as they liked. An
// image that runs as root gets the image's own (its user is root).
Result<void> assume_pager_creds(const image::Image& img);

} // namespace ghost::user
