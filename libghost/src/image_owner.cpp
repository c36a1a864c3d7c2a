// SPDX-License-Identifier: LGPL-2.1-or-later
// Whose image it is: the owner rule of common/ghost_creds.h (which ghost.ko
// applies for GHOST_IMPORT_OWNER) for the user engine, restart() and migd.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "ghost/image.hpp"
#include "ghost_creds.h"

namespace ghost {

Result<bool> runs_among_groups_of(const Owner& o) {
    const auto among = [&o](gid_t g) {
        return g == o.gid || std::find(o.groups.begin(), o.groups.end(), g) != o.groups.end();
    };
    gid_t r = 0, e = 0, s = 0;
    std::vector<gid_t> mine(static_cast<std::size_t>(std::max(::getgroups(0, nullptr), 0)));
    if (::getresgid(&r, &e, &s) != 0 ||
        ::getgroups(static_cast<int>(mine.size()), mine.data()) != static_cast<int>(mine.size()))
        return Error::from_errno(
            errno, fmt::format("reading this process's groups: {}", std::strerror(errno)));
    return among(r) && among(e) && among(s) && std::all_of(mine.begin(), mine.end(), among);
}

namespace image {

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

} // namespace image

} // namespace ghost
