// SPDX-License-Identifier: LGPL-2.1-or-later
// What /proc says about a process, parsed: its mappings, status lines, stat
// fields and descriptors. Not installed; the user engine's eyes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ghost/fd.hpp"
#include "ghost/result.hpp"

namespace ghost::user {

struct MapEntry {
    std::uint64_t start = 0, end = 0;
    char perms[5] = {}; // "rwxp" / "r--s"
    std::uint64_t offset = 0;
    std::uint64_t inode = 0;
    std::string name;         // path, "[heap]", "[vdso]", "" for anonymous
    std::string vmflags;      // smaps "VmFlags:" mnemonics, space-separated (with_flags)
    std::uint64_t rss_kb = 0; // smaps "Rss:" (with_flags)

    bool readable() const { return perms[0] == 'r'; }
    bool shared() const { return perms[3] == 's'; }
    bool has_flag(std::string_view f) const; // a VmFlags mnemonic ("gd", "ht", ...)
    bool deleted() const;                    // a path ending in " (deleted)"
};

// /proc/PID/maps, or /proc/PID/smaps for the VmFlags too.
Result<std::vector<MapEntry>> read_maps(pid_t pid, bool with_flags = false);

// /proc/PID/pagemap, opened for reading (and PAGEMAP_SCAN); errors name it.
Result<UniqueFd> open_pagemap(pid_t pid);

// A whole small file; errors name the path.
Result<std::string> read_text(const std::string& path);

// The text of /proc/PID/status; ESRCH "no process with pid N" if it cannot
// be read.
Result<std::string> read_status(pid_t pid);

// A number as /proc writes it (decimal, or hex/octal by base); 0 if none.
std::uint64_t parse_u64(std::string_view s, int base = 10);

// The value of "Key:" in /proc/PID/status text ("" if absent), trimmed.
std::string status_field(std::string_view status, std::string_view key);

// /proc/PID/stat fields, numbered as proc(5) numbers them (1 = pid).
Result<std::vector<std::string>> read_stat(pid_t pid);
// Bits of its field 9, the task's flags (the kernel's PF_*).
constexpr unsigned kPfKthread = 0x00200000, kPfExiting = 0x4;

// The resource limits of pid from /proc/PID/limits (readable by anyone,
// where prlimit(2) on another user's process needs CAP_SYS_RESOURCE),
// indexed by RLIMIT_*; RLIM_INFINITY for "unlimited".
struct Rlimit {
    std::uint64_t cur = 0, max = 0;
};
Result<std::vector<Rlimit>> read_limits(pid_t pid);

// Signals pending for the process (SigPnd | ShdPnd of its status text),
// bit N-1 = signal N.
std::uint64_t pending_signals(std::string_view status);

// The entries of a /proc directory that are numbers (descriptors in
// /proc/PID/fd, threads in /proc/PID/task), ascending.
Result<std::vector<int>> list_numeric(const std::string& dir);

// Open descriptor numbers of pid, ascending.
Result<std::vector<int>> list_fds(pid_t pid);

// The target of a symlink in /proc ("/path", "pipe:[123]").
Result<std::string> read_link(const std::string& path);

// Whether /proc says the task is exiting (PF_EXITING in its stat flags,
// proc(5)'s field 9, set before its descriptors close), or is gone.
bool exiting(pid_t pid);

// The children of every thread of pid (/proc/PID/task/TID/children,
// CONFIG_PROC_CHILDREN); without that file, the PPid of every process.
// Zombies too: the children list keeps them until they are reaped.
std::vector<pid_t> children_of(pid_t pid);

// The name Tracee::fork_snapshot() gives its child (comm, 15 bytes at
// most), so that one its exporter left behind can be told from the
// process's own children.
inline constexpr std::string_view kSnapshotComm = "ghost-snapshot";

// Which of children (children_of() a process) are copy-on-write snapshots
// an exporter left behind: zombies named kSnapshotComm, with exit signal 0
// (no wait() of the process's own sees them). An exporter that dies
// mid-export (migd killed) has its snapshot killed (PTRACE_O_EXITKILL) but
// cannot reap it: it stays a zombie child, and would make the process
// refused as a parent.
std::vector<pid_t> leftover_snapshots(const std::vector<pid_t>& children);

// Whether pid holds a SysV semaphore undo list (kcmp(KCMP_SYSVSEM)).
bool holds_sysvsem(pid_t pid);

// Whether pid has an io_uring ring open or mapped.
bool uses_io_uring(pid_t pid);

// Whether pid shares its memory (CLONE_VM) or its descriptor table
// (CLONE_FILES) with another process, ppid its parent: kcmp(2) against the
// processes that can, but its children (refused before) and the rare
// sharer whose parent exited in between: its parent (pid was cloned so)
// and its siblings (CLONE_PARENT, or sharers reparented together). A
// process we may not read (kcmp's EPERM) is not counted.
struct Sharing {
    bool mm = false, files = false;
};
Sharing sharing_of(pid_t pid, pid_t ppid);

} // namespace ghost::user
