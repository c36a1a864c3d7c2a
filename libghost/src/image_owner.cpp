// SPDX-License-Identifier: LGPL-2.1-or-later
// Whose image it is: the owner rule of common/ghost_creds.h (which ghost.ko
// applies for GHOST_IMPORT_OWNER) for the user engine, restart() and migd.
#include <sys/resource.h>

#include <cerrno>
#include <vector>

#include <fmt/format.h>

#include "ghost/image.hpp"
#include "ghost_creds.h"

namespace ghost::image {

Result<void> check_owner(const Image& img, const Owner& owner) {
    ghost_creds who{};
    who.uid = who.euid = who.suid = who.fsuid = owner.uid;
    who.gid = who.egid = who.sgid = who.fsgid = owner.gid;
    const std::vector<std::uint32_t> groups(owner.groups.begin(), owner.groups.end());
    who.ngroups = static_cast<std::uint32_t>(groups.size());
    char reason[GHOST_REASON_LEN];
    const ghost_creds* c = img.creds ? &*img.creds : nullptr;
    if (const int err = ghost_creds_of_owner(c, img.groups.data(), owner.uid, &who, groups.data(),
                                             reason, sizeof(reason)))
        return Error::from_errno(-err, reason);
    // Nor limits another host allowed the user: no hard limit above this
    // process's own, whatever its CAP_SYS_RESOURCE (ghost.ko's rule with
    // GHOST_IMPORT_OWNER).
    if (owner.uid == 0)
        return {};
    for (int i = 0; i < GHOST_NRLIMITS; i++) {
        rlimit mine{};
        if (::getrlimit(static_cast<__rlimit_resource>(i), &mine) == 0 &&
            img.rlimits.rlim[i].max > mine.rlim_max)
            return Error::from_errno(EPERM, fmt::format("the image raises hard limit {} above the "
                                                        "caller's",
                                                        i));
    }
    return {};
}

} // namespace ghost::image
