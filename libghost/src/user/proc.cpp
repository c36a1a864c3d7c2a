// SPDX-License-Identifier: LGPL-2.1-or-later
#include "user/proc.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "sys.hpp"

namespace ghost::user {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
        s.remove_suffix(1);
    return s;
}

// "start-end perms offset dev inode   name"
bool parse_map_line(std::string_view line, MapEntry& m) {
    auto next = [&line]() {
        line = trim(line);
        const auto sp = line.find(' ');
        std::string_view tok = line.substr(0, sp);
        line = sp == std::string_view::npos ? std::string_view{} : line.substr(sp);
        return tok;
    };
    const auto range = next();
    const auto dash = range.find('-');
    if (dash == std::string_view::npos)
        return false;
    m.start = parse_u64(range.substr(0, dash), 16);
    m.end = parse_u64(range.substr(dash + 1), 16);
    const auto perms = next();
    if (perms.size() != 4)
        return false;
    std::copy(perms.begin(), perms.end(), m.perms);
    m.offset = parse_u64(next(), 16);
    next(); // dev
    const auto ino = next();
    std::from_chars(ino.data(), ino.data() + ino.size(), m.inode);
    // The name is the rest; a path may hold spaces, so only the separator
    // before it is trimmed.
    while (!line.empty() && line.front() == ' ')
        line.remove_prefix(1);
    m.name = std::string(line);
    return true;
}

} // namespace

std::uint64_t parse_u64(std::string_view s, int base) {
    std::uint64_t v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v, base);
    return v;
}

std::uint64_t pending_signals(std::string_view status) {
    return parse_u64(status_field(status, "SigPnd"), 16) |
           parse_u64(status_field(status, "ShdPnd"), 16);
}

bool MapEntry::has_flag(std::string_view f) const {
    std::string_view v = vmflags;
    while (!v.empty()) {
        const auto sp = v.find(' ');
        if (v.substr(0, sp) == f)
            return true;
        if (sp == std::string_view::npos)
            break;
        v.remove_prefix(sp + 1);
    }
    return false;
}

bool MapEntry::deleted() const {
    static constexpr std::string_view kDeleted = " (deleted)";
    return name.size() > kDeleted.size() &&
           std::string_view(name).substr(name.size() - kDeleted.size()) == kDeleted;
}

Result<UniqueFd> open_pagemap(pid_t pid) {
    UniqueFd fd(::open(fmt::format("/proc/{}/pagemap", pid).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd)
        return Error::from_errno(
            errno, fmt::format("cannot open /proc/{}/pagemap: {}", pid, errno_text(errno)));
    return fd;
}

Result<std::string> read_text(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd)
        return Error::from_errno(errno, fmt::format("cannot read {}: {}", path, errno_text(errno)));
    std::string out;
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return Error::from_errno(errno,
                                     fmt::format("cannot read {}: {}", path, errno_text(errno)));
        if (n == 0)
            return out;
        out.append(buf, static_cast<std::size_t>(n));
    }
}

Result<std::string> read_status(pid_t pid) {
    auto status = read_text(fmt::format("/proc/{}/status", pid));
    if (!status)
        return Error::from_errno(ESRCH, fmt::format("no process with pid {}", pid));
    return status;
}

Result<std::vector<MapEntry>> read_maps(pid_t pid, bool with_flags) {
    auto text = read_text(fmt::format("/proc/{}/{}", pid, with_flags ? "smaps" : "maps"));
    if (!text)
        return text.error();
    std::vector<MapEntry> out;
    std::string_view rest = *text;
    while (!rest.empty()) {
        const auto nl = rest.find('\n');
        std::string_view line = rest.substr(0, nl);
        rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
        if (line.empty())
            continue;
        if (line.starts_with("VmFlags:")) {
            if (!out.empty())
                out.back().vmflags = std::string(trim(line.substr(8)));
            continue;
        }
        if (line.starts_with("Rss:")) {
            if (!out.empty())
                out.back().rss_kb = parse_u64(trim(line.substr(4)));
            continue;
        }
        // smaps detail lines are "Key:   value"; a mapping line starts
        // with a hex range.
        const auto colon = line.find(':');
        const auto space = line.find(' ');
        if (colon != std::string_view::npos && colon < space)
            continue;
        MapEntry m;
        if (!parse_map_line(line, m))
            continue;
        // maps shows a newline in a name as "\012" and a backslash as
        // itself: such a name is ambiguous, map_files has it as it is.
        if (m.inode != 0 && m.name.find('\\') != std::string::npos) {
            auto raw = read_link(fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, m.start, m.end));
            if (!raw)
                return Error{raw.error().code,
                             fmt::format("the name of the file mapped at {:#x} by pid {} has a "
                                         "backslash or a newline, which /proc/{}/maps does not "
                                         "show as it is, and map_files cannot say it: {}",
                                         m.start, pid, pid, raw.error().what())};
            m.name = std::move(*raw);
        }
        out.push_back(std::move(m));
    }
    return out;
}

std::string status_field(std::string_view status, std::string_view key) {
    std::string_view rest = status;
    while (!rest.empty()) {
        const auto nl = rest.find('\n');
        std::string_view line = rest.substr(0, nl);
        rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
        if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == ':')
            return std::string(trim(line.substr(key.size() + 1)));
    }
    return {};
}

Result<std::vector<std::string>> read_stat(pid_t pid) {
    auto text = read_text(fmt::format("/proc/{}/stat", pid));
    if (!text)
        return text.error();
    // The command name may hold anything, ')' included: fields resume
    // after the last ')'.
    const auto close = text->rfind(')');
    if (close == std::string::npos)
        return Error::from_errno(EIO, fmt::format("cannot parse /proc/{}/stat", pid));
    std::vector<std::string> f{std::to_string(pid), text->substr(0, close + 1)};
    std::istringstream in(text->substr(close + 1));
    std::string tok;
    while (in >> tok)
        f.push_back(tok);
    f.insert(f.begin(), std::string()); // 1-based, as proc(5)
    return f;
}

// proc_pid_limits() prints one row per RLIMIT_*, in their order, as
// "%-25s %-20s %-20s %-10s" (name, soft, hard, units); a value is a number
// or "unlimited".
Result<std::vector<Rlimit>> read_limits(pid_t pid) {
    const auto path = fmt::format("/proc/{}/limits", pid);
    auto text = read_text(path);
    if (!text)
        return text.error();
    const auto value = [](std::string_view row, std::size_t at, std::uint64_t& out) {
        if (row.size() <= at)
            return false;
        row = row.substr(at, std::min<std::size_t>(20, row.size() - at));
        while (!row.empty() && row.back() == ' ')
            row.remove_suffix(1);
        if (row == "unlimited") {
            out = RLIM_INFINITY;
            return true;
        }
        const auto [end, ec] = std::from_chars(row.data(), row.data() + row.size(), out);
        return ec == std::errc() && end == row.data() + row.size() && !row.empty();
    };
    std::vector<Rlimit> out;
    std::istringstream in(*text);
    std::string row;
    std::getline(in, row); // the heading
    while (std::getline(in, row)) {
        Rlimit r;
        if (!value(row, 26, r.cur) || !value(row, 47, r.max))
            return Error::from_errno(EIO, fmt::format("cannot parse {}: \"{}\"", path, row));
        out.push_back(r);
    }
    if (out.size() < RLIM_NLIMITS)
        return Error::from_errno(EIO, fmt::format("{} has {} limits, not {}", path, out.size(),
                                                  static_cast<int>(RLIM_NLIMITS)));
    return out;
}

Result<std::vector<int>> list_fds(pid_t pid) {
    return list_numeric(fmt::format("/proc/{}/fd", pid));
}

Result<std::vector<int>> list_numeric(const std::string& dir) {
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
    if (!d)
        return Error::from_errno(errno, fmt::format("cannot list {}: {}", dir, errno_text(errno)));
    std::vector<int> out;
    while (const dirent* e = ::readdir(d.get())) {
        int n = -1;
        const std::string_view name(e->d_name);
        if (std::from_chars(name.data(), name.data() + name.size(), n).ec == std::errc{} && n >= 0)
            out.push_back(n);
    }
    std::sort(out.begin(), out.end());
    return out;
}

Result<std::string> read_link(const std::string& path) {
    std::string buf(PATH_MAX, '\0');
    const ssize_t n = ::readlink(path.c_str(), buf.data(), buf.size());
    if (n < 0)
        return Error::from_errno(errno,
                                 fmt::format("cannot read link {}: {}", path, errno_text(errno)));
    buf.resize(static_cast<std::size_t>(n));
    return buf;
}

namespace {

// kcmp(KCMP_SYSVSEM) of pid against a child that holds no undo list: 0 when
// pid holds none either, < 0 when it cannot tell.
long against_fresh_child(pid_t pid) {
    auto cmp = [pid](pid_t other) { return ::syscall(SYS_kcmp, other, pid, KCMP_SYSVSEM, 0, 0); };
    // First a vfork() child that has exited and is not yet reaped: vfork()
    // gave it no list (and its exit would have dropped one), and the zombie
    // can be compared until waitpid(). It copies no page tables, which a
    // fork() of a large caller (migd, ghostctl) does: milliseconds under
    // emulation, for every export.
    if (const pid_t z = ::vfork(); z == 0) {
        ::_exit(0);
    } else if (z > 0) {
        const long c = cmp(z);
        while (::waitpid(z, nullptr, 0) < 0 && errno == EINTR) {
        }
        if (c >= 0)
            return c;
        // Reaped before the comparison (SIGCHLD ignored, or another thread
        // of the caller waits for any child): a child that waits instead.
    }
    const pid_t ref = ::fork();
    if (ref == 0) { // only async-signal-safe calls: the caller may have threads
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (;;)
            ::pause();
    }
    if (ref < 0)
        return -1;
    const long c = cmp(ref);
    ::kill(ref, SIGKILL);
    while (::waitpid(ref, nullptr, 0) < 0 && errno == EINTR) {
    }
    return c;
}

} // namespace

// Whether pid holds a SysV semaphore undo list. No interface shows it, but
// kcmp(KCMP_SYSVSEM) compares two processes' lists: against ours, and if
// ours is not the same (a multithreaded caller has one: glibc creates
// threads with CLONE_SYSVSEM, which makes one for them to share), against
// a child's, which has none. Without kcmp (CONFIG_KCMP) it cannot tell:
// false. (The waiting child holds no descriptor anyone waits on: children
// of concurrent exports in several threads once waited on each other's
// pipe ends for ever.)
bool holds_sysvsem(pid_t pid) {
    if (::syscall(SYS_kcmp, ::getpid(), pid, KCMP_SYSVSEM, 0, 0) <= 0)
        return false; // the same as ours (none, in general), or cannot tell
    return against_fresh_child(pid) > 0;
}

// Whether pid uses io_uring: a ring's descriptor or mapping. (ghost.ko sees
// the task's io_uring context, which outlives both.)
bool uses_io_uring(pid_t pid) {
    static constexpr std::string_view kRing = "anon_inode:[io_uring]";
    if (auto fds = list_fds(pid))
        for (const int fd : *fds)
            if (auto l = read_link(fmt::format("/proc/{}/fd/{}", pid, fd)); l && *l == kRing)
                return true;
    if (auto maps = read_maps(pid))
        for (const auto& m : *maps)
            if (m.name == kRing)
                return true;
    return false;
}

std::vector<pid_t> leftover_snapshots(const std::vector<pid_t>& children) {
    std::vector<pid_t> out;
    for (const pid_t c : children) {
        auto f = read_stat(c);
        if (!f || f->size() <= 38 || (*f)[3] != "Z" || (*f)[38] != "0")
            continue;
        // Field 2 is "(comm)": read_stat() kept it whole, after the pid.
        const std::string& named = (*f)[2];
        const auto open = named.find('(');
        if (open != std::string::npos && named.size() >= open + 2 &&
            std::string_view(named).substr(open + 1, named.size() - open - 2) == kSnapshotComm)
            out.push_back(c);
    }
    return out;
}

bool exiting(pid_t pid) {
    auto stat = read_stat(pid);
    return !stat || stat->size() <= 9 || (parse_u64((*stat)[9]) & kPfExiting);
}

std::vector<pid_t> children_of(pid_t pid) {
    std::vector<pid_t> out;
    bool listed = false;
    if (auto tasks = list_numeric(fmt::format("/proc/{}/task", pid)))
        for (const int tid : *tasks)
            if (auto c = read_text(fmt::format("/proc/{}/task/{}/children", pid, tid))) {
                listed = true;
                std::string_view v = *c;
                while (!v.empty()) {
                    const auto end = v.find(' ');
                    if (const auto n = parse_u64(v.substr(0, end)); n > 0)
                        out.push_back(static_cast<pid_t>(n));
                    v = end == std::string_view::npos ? std::string_view() : v.substr(end + 1);
                }
            }
    if (listed)
        return out;
    if (auto all = list_numeric("/proc"))
        for (const int p : *all)
            if (auto st = read_text(fmt::format("/proc/{}/status", p));
                st && parse_u64(status_field(*st, "PPid")) == static_cast<std::uint64_t>(pid))
                out.push_back(p);
    return out;
}

Sharing sharing_of(pid_t pid, pid_t ppid) {
    Sharing s;
    const auto compare = [&](pid_t other) {
        if (other <= 0 || other == pid)
            return;
        if (!s.mm && ::syscall(SYS_kcmp, pid, other, KCMP_VM, 0, 0) == 0)
            s.mm = true;
        if (!s.files && ::syscall(SYS_kcmp, pid, other, KCMP_FILES, 0, 0) == 0)
            s.files = true;
    };
    if (ppid > 0) {
        compare(ppid);
        for (const pid_t sibling : children_of(ppid))
            compare(sibling);
    }
    return s;
}

} // namespace ghost::user
