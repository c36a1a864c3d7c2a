// SPDX-License-Identifier: LGPL-2.1-or-later
// Whom a privileged restorer restores an image for (RestoreOptions::owner,
// RestartOptions::owner, image::check_owner()).
#pragma once

#include <sys/types.h>

#include <vector>

#include "ghost/result.hpp"

namespace ghost {

// A user as this host knows it: the image must run as uid and as nothing
// more, its gid and supplementary groups among gid and groups (its primary
// and supplementary groups here: migd reads them from the user database).
// For uid 0 only the uids count.
struct Owner {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
};

// Whether this process's real, effective and saved gids and its
// supplementary groups all lie among o's gid and groups: what ghost.ko
// checks an owner's image's gids against (GHOST_IMPORT_OWNER).
Result<bool> runs_among_groups_of(const Owner& o);

} // namespace ghost
