// SPDX-License-Identifier: LGPL-2.1-or-later
// File locks in the user engine. At export, each open file's locks come from
// /proc/PID/fdinfo/FD of its first descriptor ("lock:" lines: the flock and
// OFD locks its open file owns and the POSIX locks the process took through
// it, then leases), as ghost.ko reads them from the inode. At import, OFD
// and flock locks are taken on the reopened files in the caller; POSIX
// locks are tested there and taken by the tracer after the last close
// (import.cpp, Rebuild::set_locks()).
#include "user/locks.hpp"

#include <sys/file.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "ghost_lock.h"
#include "ghost_policy.h"
#include "sys.hpp"
#include "user/proc.hpp"

namespace ghost::user {

namespace {

// One "lock:" line of fdinfo, e.g. "1: POSIX  ADVISORY  WRITE 42 fe:00:12 10 29".
struct Line {
    bool lease = false;
    ghost_lock l{};
};

std::optional<Line> parse_line(std::string_view text) {
    std::istringstream in{std::string(text)};
    std::vector<std::string> t;
    for (std::string w; in >> w;)
        t.push_back(w);
    if (t.size() < 2)
        return std::nullopt;
    Line out;
    if (t[1] == "POSIX")
        out.l.kind = GHOST_LOCK_POSIX;
    else if (t[1] == "OFDLCK")
        out.l.kind = GHOST_LOCK_OFD;
    else if (t[1] == "FLOCK")
        out.l.kind = GHOST_LOCK_FLOCK;
    else
        out.lease = true; // LEASE, DELEG
    const auto type = std::find_if(
        t.begin() + 2, t.end(), [](const std::string& w) { return w == "READ" || w == "WRITE"; });
    if (out.lease)
        return out;
    if (type == t.end() || t.end() - type < 5) // type pid dev start end
        return std::nullopt;
    out.l.type = *type == "WRITE" ? GHOST_LOCK_WRLCK : GHOST_LOCK_RDLCK;
    if (out.l.kind == GHOST_LOCK_FLOCK)
        return out;
    out.l.start = parse_u64(type[3]);
    out.l.len = type[4] == "EOF" ? 0 : parse_u64(type[4]) - out.l.start + 1;
    return out;
}

const image::File* file_of(const image::Image& img, std::uint64_t id) {
    for (const auto& f : img.files)
        if (f.rec.file_id == id && f.rec.kind != GHOST_FILE_DUP)
            return &f;
    return nullptr;
}

} // namespace

Result<std::vector<ghost_lock>> capture_locks(pid_t pid, const std::vector<image::File>& files,
                                              const std::vector<std::string>& fdinfo) {
    std::vector<ghost_lock> out;
    for (std::size_t i = 0; i < files.size() && i < fdinfo.size(); i++) {
        const auto& f = files[i];
        if (f.rec.kind == GHOST_FILE_DUP)
            continue; // fdinfo of a dup shows the same locks
        const std::string& info = fdinfo[i];
        std::vector<ghost_lock> mine;
        ghost_lock_facts facts{};
        facts.fd = static_cast<unsigned>(f.rec.fd);
        facts.file_kind = static_cast<int>(f.rec.kind);
        std::istringstream lines(info);
        for (std::string line; std::getline(lines, line);) {
            if (!line.starts_with("lock:"))
                continue;
            auto l = parse_line(std::string_view(line).substr(5));
            if (!l)
                return Error::from_errno(EIO, fmt::format("cannot read the lock of fd {} of pid "
                                                          "{}: {}",
                                                          f.rec.fd, pid, line));
            if (l->lease) {
                facts.lease = true;
                continue;
            }
            l->l.file_id = f.rec.file_id;
            mine.push_back(l->l);
        }
        if (mine.empty() && !facts.lease)
            continue;
        facts.kind = mine.empty() ? 0 : mine.front().kind;
        char reason[GHOST_REASON_LEN];
        if (const int err = ghost_policy_lock(&facts, reason, sizeof(reason)))
            return Error::from_errno(-err, reason);
        out.insert(out.end(), mine.begin(), mine.end());
    }
    return out;
}

int lock_fd(const image::Image& img, const ghost_lock& l) {
    const auto* f = file_of(img, l.file_id);
    return f ? f->rec.fd : -1;
}

struct flock posix_request(const ghost_lock& l) {
    struct flock fl {};
    fl.l_type = l.type == GHOST_LOCK_WRLCK ? F_WRLCK : F_RDLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = static_cast<off_t>(l.start);
    fl.l_len = static_cast<off_t>(l.len);
    return fl;
}

Error lock_conflict(const image::Image& img, const ghost_lock& l) {
    const auto* f = file_of(img, l.file_id);
    char reason[GHOST_REASON_LEN];
    ghost_lock_conflict(reason, sizeof(reason), &l, f ? f->rec.fd : -1, f ? f->path.c_str() : "?");
    return Error::from_errno(EAGAIN, reason);
}

Result<void> take_early_locks(const image::Image& img, const std::vector<int>& file_fd) {
    // The OFD and flock locks first, then the POSIX ones tested against
    // everything, those included: an OFD lock recorded after a POSIX one
    // on the same bytes would make the POSIX lock fail to be taken past the
    // point of no return.
    for (const bool posix : {false, true})
        for (const auto& l : img.locks) {
            if ((l.kind == GHOST_LOCK_POSIX) != posix)
                continue;
            std::size_t i = 0;
            while (i < img.files.size() && (img.files[i].rec.file_id != l.file_id ||
                                            img.files[i].rec.kind == GHOST_FILE_DUP))
                i++;
            const int fd = i < file_fd.size() ? file_fd[i] : -1;
            if (fd < 0)
                return Error::from_errno(EBADMSG, fmt::format("a lock names file id {}, which the "
                                                              "image does not reopen by path",
                                                              l.file_id));
            const auto& r = img.files[i].rec;
            const auto acc = r.flags & O_ACCMODE;
            const bool ok = l.type == GHOST_LOCK_WRLCK ? acc == O_WRONLY || acc == O_RDWR
                                                       : acc == O_RDONLY || acc == O_RDWR;
            if (l.kind != GHOST_LOCK_FLOCK && !ok)
                return Error::from_errno(
                    EBADMSG, fmt::format("the {} lock of fd {} needs the file open for {}",
                                         ghost_lock_kind_name(l.kind), r.fd,
                                         l.type == GHOST_LOCK_WRLCK ? "writing" : "reading"));
            struct flock fl = posix_request(l);
            int rc;
            if (l.kind == GHOST_LOCK_FLOCK)
                rc = ::flock(fd, (l.type == GHOST_LOCK_WRLCK ? LOCK_EX : LOCK_SH) | LOCK_NB);
            else if (l.kind == GHOST_LOCK_OFD)
                rc = ::fcntl(fd, F_OFD_SETLK, &fl);
            else if ((rc = ::fcntl(fd, F_GETLK, &fl)) == 0 && fl.l_type != F_UNLCK)
                return lock_conflict(img, l);
            if (rc != 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EACCES))
                return lock_conflict(img, l);
            if (rc != 0)
                return Error::from_errno(errno, fmt::format("cannot take the {} lock of fd {} "
                                                            "again: {}",
                                                            ghost_lock_kind_name(l.kind), r.fd,
                                                            errno_text(errno)));
        }
    return {};
}

} // namespace ghost::user
