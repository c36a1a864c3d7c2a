// SPDX-License-Identifier: LGPL-2.1-or-later
// The user engine's export: a held process's descriptors, as FILE records
// (ghost_policy_fd() decides what each is, as ghost.ko does).
#include "user/files.hpp"

#include <fcntl.h>
#include <linux/kcmp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include <fmt/format.h>

#include "ghost_policy.h"
#include "sys.hpp"
#include "user/proc.hpp"

namespace ghost::user {

namespace {

// Is @link, the path of a /proc file held open as @st, a file of
// /proc/N/ whose process is gone? Its path then names nothing, or, once N
// is reused, another process's file: another inode.
bool dead_proc_file(const struct stat& st, const std::string& link) {
    constexpr std::string_view kProc = "/proc/";
    if (!link.starts_with(kProc))
        return false;
    const std::size_t end = link.find('/', kProc.size());
    if (end == std::string::npos || end == kProc.size() ||
        link.find_first_not_of("0123456789", kProc.size()) != end)
        return false;
    struct stat now {};
    if (::lstat(link.c_str(), &now) != 0)
        return errno == ENOENT || errno == ESRCH;
    return now.st_dev == st.st_dev && now.st_ino != st.st_ino;
}

// The facts of a descriptor for ghost_policy_fd(): its type and device
// from stat(2) of /proc/PID/fd/N, its path from readlink.
Result<std::uint32_t> classify_fd(pid_t pid, int fd, const struct stat& st,
                                  const std::string& link) {
    ghost_fd_facts f{};
    f.fd = static_cast<unsigned>(fd);
    f.pid = pid;
    f.mode = st.st_mode & S_IFMT;
    if (S_ISCHR(st.st_mode)) {
        f.major = major(st.st_rdev);
        f.minor = minor(st.st_rdev);
    }
    f.reachable = !link.empty() && link[0] == '/' && !link.ends_with(" (deleted)");
    f.deleted = !link.empty() && link[0] == '/' && link.ends_with(" (deleted)");
    f.dead_proc = dead_proc_file(st, link);
    f.path = link.c_str();
    char reason[GHOST_REASON_LEN] = {};
    const int r = ghost_policy_fd(&f, reason, sizeof(reason));
    if (r < 0)
        return Error::from_errno(-r, reason);
    return static_cast<std::uint32_t>(r);
}

} // namespace

Result<void> check_files(pid_t pid) {
    auto fds = list_fds(pid);
    if (!fds)
        return fds.error();
    for (const int fd : *fds) {
        const std::string p = fmt::format("/proc/{}/fd/{}", pid, fd);
        struct stat st {};
        auto link = read_link(p);
        if (!link || ::stat(p.c_str(), &st) != 0)
            continue; // closed meanwhile, or unnamed: decided once held
        if (auto kind = classify_fd(pid, fd, st, *link); !kind)
            return kind.error();
    }
    return {};
}

// fdinfo[i] gets the /proc/PID/fdinfo text of the i-th file, which
// capture_locks() reads its locks from.
Result<std::vector<image::File>> capture_files(pid_t pid, std::vector<std::string>& fdinfo) {
    auto fds = list_fds(pid);
    if (!fds)
        return fds.error();
    std::vector<image::File> out;
    std::uint64_t ids = 0;
    for (const int fd : *fds) {
        const std::string p = fmt::format("/proc/{}/fd/{}", pid, fd);
        // Not skipped when it cannot be named (a path longer than PATH_MAX,
        // built with openat()): the restored process would lack the fd.
        auto link = read_link(p);
        if (!link)
            return Error{link.error().code,
                         fmt::format("cannot name the file of fd {} of pid {}: {}", fd, pid,
                                     link.error().what())};
        auto info = read_text(fmt::format("/proc/{}/fdinfo/{}", pid, fd));
        if (!info)
            return info.error();
        image::File f;
        f.path = *link;
        f.rec.fd = fd;
        f.rec.path_len = static_cast<std::uint32_t>(f.path.size());
        const auto flags = static_cast<std::uint32_t>(parse_u64(status_field(*info, "flags"), 8));
        f.rec.flags = flags & ~static_cast<std::uint32_t>(O_CLOEXEC);
        f.rec.fd_flags = (flags & O_CLOEXEC) ? FD_CLOEXEC : 0;
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0)
            return Error::from_errno(
                errno, fmt::format("cannot stat fd {} of pid {}: {}", fd, pid, errno_text(errno)));
        f.rec.mode = st.st_mode & S_IFMT;

        // A dup of an earlier descriptor: one open file, one offset, one
        // file id (ids count the open files in order).
        const image::File* same = nullptr;
        for (const auto& e : out)
            if (e.rec.kind != GHOST_FILE_DUP &&
                ::syscall(SYS_kcmp, pid, pid, KCMP_FILE, e.rec.fd, fd) == 0) {
                same = &e;
                break;
            }
        if (same) {
            f.rec.kind = GHOST_FILE_DUP;
            f.rec.file_id = same->rec.file_id;
        } else {
            f.rec.file_id = ++ids;
            auto kind = classify_fd(pid, fd, st, *link);
            if (!kind)
                return kind.error();
            f.rec.kind = *kind;
            f.rec.pos = parse_u64(status_field(*info, "pos"));
        }
        out.push_back(std::move(f));
        fdinfo.push_back(std::move(*info));
    }
    return out;
}

} // namespace ghost::user
