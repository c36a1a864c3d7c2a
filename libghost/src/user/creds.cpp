// SPDX-License-Identifier: LGPL-2.1-or-later
// Credentials in the user engine (creds.hpp, Documentation/user-engine.md).
#include "user/creds.hpp"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "ghost/c/assume_creds.h"
#include "ghost_creds.h"
#include "sys.hpp"
#include "user/proc.hpp"

namespace ghost::user {

namespace {

// "1000\t1000\t1000\t1000" into four ids.
bool four_ids(const std::string& line, std::uint32_t (&out)[4]) {
    std::istringstream in(line);
    for (auto& v : out)
        if (!(in >> v))
            return false;
    return true;
}

// The record of pid as its status text and loginuid file say.
Result<void> read_creds(pid_t pid, std::string_view status, std::uint32_t securebits,
                        ghost_creds& c, std::vector<std::uint32_t>& groups) {
    c = ghost_creds{};
    std::uint32_t u[4], g[4];
    if (!four_ids(status_field(status, "Uid"), u) || !four_ids(status_field(status, "Gid"), g))
        return Error::from_errno(EIO, fmt::format("/proc/{}/status has no Uid/Gid lines", pid));
    c.uid = u[0], c.euid = u[1], c.suid = u[2], c.fsuid = u[3];
    c.gid = g[0], c.egid = g[1], c.sgid = g[2], c.fsgid = g[3];
    groups.clear();
    std::istringstream in(status_field(status, "Groups"));
    for (std::uint32_t x; in >> x;)
        groups.push_back(x);
    c.ngroups = static_cast<std::uint32_t>(groups.size());
    c.cap_inheritable = parse_u64(status_field(status, "CapInh"), 16);
    c.cap_permitted = parse_u64(status_field(status, "CapPrm"), 16);
    c.cap_effective = parse_u64(status_field(status, "CapEff"), 16);
    c.cap_bset = parse_u64(status_field(status, "CapBnd"), 16);
    c.cap_ambient = parse_u64(status_field(status, "CapAmb"), 16);
    c.securebits = securebits;
    c.loginuid = GHOST_LOGINUID_UNSET; // a kernel without audit has none
    if (auto l = read_text(fmt::format("/proc/{}/loginuid", pid)); l)
        c.loginuid = static_cast<std::uint32_t>(parse_u64(*l));
    return {};
}

} // namespace

Result<void> fill_creds(pid_t pid, std::string_view status, std::uint32_t securebits,
                        image::Image& img) {
    ghost_creds c{};
    if (auto r = read_creds(pid, status, securebits, c, img.groups); !r)
        return r;
    img.creds = c;
    return {};
}

namespace {

// The image's credentials checked as the caller's to assume (the shared
// rule), then want (the image's, or the pager's made from them) taken.
Result<void> assume(const image::Image& img, const ghost_creds& want) {
    auto status = read_text("/proc/self/status");
    if (!status)
        return status.error();
    const long sb = ::prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
    ghost_creds me{};
    std::vector<std::uint32_t> my_groups;
    if (auto r = read_creds(::getpid(), *status, sb < 0 ? 0 : static_cast<std::uint32_t>(sb), me,
                            my_groups);
        !r)
        return r;
    char reason[GHOST_REASON_LEN];
    if (const int err = ghost_creds_may_assume(&*img.creds, img.groups.data(), &me,
                                               my_groups.data(), reason, sizeof(reason)))
        return Error::from_errno(-err, reason);
    if (ghost_creds_own_session(&want, reason, sizeof(reason)) != 0)
        return Error::from_errno(errno, reason);
    if (ghost_creds_same(&want, img.groups.data(), &me, my_groups.data()))
        return {};
    // The restorer sets the image's limits with prlimit once the caller
    // runs as the image, maybe without CAP_SYS_RESOURCE: a limit it would
    // have to raise (hard, or soft: locked memory is mapped before the
    // limits are set) is raised now, while the caller may (check_limits).
    for (int i = 0; i < GHOST_NRLIMITS; i++) {
        rlimit cur{};
        const auto res = static_cast<__rlimit_resource>(i);
        const auto& want_rl = img.rlimits.rlim[i];
        if (::getrlimit(res, &cur) != 0 ||
            (want_rl.max <= cur.rlim_max && want_rl.cur <= cur.rlim_cur))
            continue;
        cur.rlim_max = std::max<rlim_t>(cur.rlim_max, want_rl.max);
        cur.rlim_cur = std::max<rlim_t>(cur.rlim_cur, want_rl.cur);
        if (::setrlimit(res, &cur) != 0)
            return Error::from_errno(errno, fmt::format("cannot raise limit {} to the image's: {}",
                                                        i, errno_text(errno)));
    }
    if (ghost_assume_creds(&want, img.groups.data(), reason, sizeof(reason)) != 0)
        return Error::from_errno(errno, reason);
    // As ghost.ko checks before its point of no return.
    status = read_text("/proc/self/status");
    if (!status)
        return status.error();
    const long sb2 = ::prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
    if (auto r = read_creds(::getpid(), *status, sb2 < 0 ? 0 : static_cast<std::uint32_t>(sb2), me,
                            my_groups);
        !r)
        return r;
    if (!ghost_creds_same(&want, img.groups.data(), &me, my_groups.data()))
        return Error::from_errno(EPERM, fmt::format(GHOST_CREDS_NOT_SWITCHED_REASON, me.uid, me.gid,
                                                    want.uid, want.gid));
    return {};
}

} // namespace

Result<void> assume_image_creds(const image::Image& img) {
    if (!img.creds)
        return {};
    return assume(img, *img.creds);
}

Result<void> assume_pager_creds(const image::Image& img) {
    if (!img.creds || img.creds->uid == 0)
        return assume_image_creds(img);
    ghost_creds want = *img.creds;
    std::uint32_t none = kNoAccountId;
    while (none == want.uid || none == want.euid || none == want.suid || none == want.gid ||
           none == want.egid || none == want.sgid)
        none--;
    want.uid = want.suid = none;
    want.gid = want.sgid = none;
    want.cap_inheritable = want.cap_permitted = want.cap_effective = want.cap_ambient = 0;
    want.securebits = 0;
    return assume(img, want);
}

} // namespace ghost::user
