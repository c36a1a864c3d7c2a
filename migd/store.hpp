// SPDX-License-Identifier: GPL-2.0
// migd's durable state in its state directory: the journal of in-flight
// operations (one file per operation, journal/ID.json: its first state
// written whole to a temporary name, fsynced and renamed; each later state a
// line appended and made durable with fdatasync, the last whole line
// counting) and the location table (locations.cpp: a snapshot and a log).
// A crash leaves the old or the new state, never a torn one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ghost/fd.hpp"
#include "ghost/io.hpp"
#include "ghost/result.hpp"

namespace migd {

using ghost::write_all; // ghost/io.hpp
using nlohmann::json;

// An error naming what failed and errno's text.
ghost::Error sys_error(const std::string& what);

// Appends lines (each ending in a newline) to fd, the file at path (opened
// with O_APPEND and for reading), and makes them durable with fdatasync;
// they start on a line of their own even after a line a crash cut short.
// On failure the file is cut back to what it was.
ghost::Result<void> append_durably(int fd, const std::string& path, std::string_view lines);

// Writes data to path atomically (tmp, fsync, rename, fsync of the directory).
ghost::Result<void> write_file_atomic(const std::string& path, std::string_view data, int mode);

// Removes DIR's files whose names end in ".tmp": what write_file_atomic()
// and the checkpoint server's store leave when a crash cuts them short.
// Only at start, before anything writes there.
void sweep_temporaries(const std::string& dir);

// Makes path (and its parents) if needed, mode 0700.
ghost::Result<void> make_dir(const std::string& path);

// A whole (small) file, or nothing when it cannot be read.
// A whole file; nothing when there is none; an error when it cannot be
// read (read_file(): nothing then too).
ghost::Result<std::optional<std::string>> read_file_if_any(const std::string& path);
std::optional<std::string> read_file(const std::string& path);

// Wall-clock milliseconds since the epoch.
std::uint64_t now_ms();

// A process as /proc/PID/stat knows it now; the start time tells a reused
// pid apart.
struct ProcStat {
    pid_t pid = 0;
    std::uint64_t starttime = 0; // clock ticks after boot (/proc/PID/stat field 22)
    char state = '?';
    std::string comm;
};
std::optional<ProcStat> proc_stat(pid_t pid);

// The same and its owner (/proc/PID/status): what a check of rights needs.
struct ProcInfo : ProcStat {
    uid_t uid = 0;  // real uid
    uid_t suid = 0; // saved uid
    // What a user's right to act on it needs besides: its real, effective,
    // saved and filesystem uids all one and the same for its gids, no
    // permitted capability, and dumpable (the kernel then gives /proc/PID
    // to its euid; root otherwise). A set-user-id or file-capability
    // program is none of these.
    bool plain_ids = false;
    std::uint64_t cap_permitted = 0;
    uid_t proc_owner = 0;
};
std::optional<ProcInfo> proc_info(pid_t pid);
// The same process (pid and start time) still exists and is not a zombie.
bool proc_alive(pid_t pid, std::uint64_t starttime);
// A pidfd of that process, taken before it is checked to be alive (so the
// pid cannot name another process by the time it is used); none if gone.
ghost::UniqueFd pidfd_of(pid_t pid, std::uint64_t starttime);

// One in-flight operation. Fields: id, role ("source"|"dest"|"server"),
// kind ("migrate"|"dup"|"checkpoint"|"restart"), state, peer, gid, pid,
// starttime, and what else the operation needs to finish or roll back.
class Journal {
  public:
    ghost::Result<void> open(const std::string& state_dir);
    ghost::Result<void> put(const json& entry); // by entry["id"]
    void remove(const std::string& id);
    // The entry, or nothing when there is none (or it cannot be read).
    std::optional<json> get(const std::string& id) const;
    // The entry or nothing when there is none; an error when it cannot be
    // read (no descriptor left, an I/O error): not the same answer.
    ghost::Result<std::optional<json>> lookup(const std::string& id) const;
    std::vector<json> all() const;
    // An id names a file in the state directory: letters, digits, '.',
    // '_' and '-', not starting with '.', at most 200 characters.
    static bool valid_id(std::string_view id);

  private:
    // Whether id was removed though its file would not go (under mu_): a
    // finished entry must not be acted on again (a destination's entry
    // resolved against a source that has forgotten it would kill the copy).
    bool removed(const std::string& id) const;
    std::string file_of(const std::string& id) const; // a valid id's file

    std::string dir_;
    mutable std::mutex mu_;
    mutable std::set<std::string> stuck_; // removed, file still there
};

// Where each migrated or duplicated process (by gid) lives, as this host
// knows it: "local" entries are processes on this host (pid, starttime),
// "moved" entries forward to the host it went to (PUB's link table).
struct Location {
    std::string gid;
    std::string state; // "local" | "moved"
    std::string host;  // where it lives (this host for local entries)
    pid_t pid = 0;     // its pid there (when known)
    std::uint64_t starttime = 0;
    uid_t uid = 0;
    std::string comm;
    std::uint64_t updated_ms = 0; // wall clock of the last change
    std::uint64_t exited_ms = 0;  // a local entry: when migd saw it gone (0: not yet)
};

// The table is durable as a snapshot (locations.json, written whole) and a
// log of the changes since (locations.log, one JSON line per change, each
// made durable with fdatasync before set() returns): an update costs one
// small append whatever the table's size. The log is folded into a new
// snapshot once it holds more records than the table has entries (and at
// open and close), so it stays within the table's own size.
class Locations {
  public:
    Locations() = default;
    ~Locations();
    Locations(const Locations&) = delete;
    Locations& operator=(const Locations&) = delete;
    ghost::Result<void> open(const std::string& state_dir, const std::string& host);
    std::string new_gid(); // host-N, N from a persisted counter
    ghost::Result<void> set(const Location& loc);
    // A shortcut learnt from a lookup's answer: kept in memory and written
    // with the next set() (or at close), never waited for. Losing one loses
    // nothing: the entries set() wrote at each move still lead there.
    // Only over the entry the lookup started from (seen; none: no entry):
    // an entry changed meanwhile (a move here or on) is newer than the
    // answer, and a local entry is never replaced by a shortcut.
    void hint(const Location& loc, const std::optional<Location>& seen);
    std::optional<Location> get(const std::string& gid) const;
    std::vector<Location> all() const;
    // This host's own entries ("local"), without copying the others: a
    // table also keeps every gid that only passed through.
    std::vector<Location> local() const;
    // The gid of the process running here as pid (same start time), if it
    // has one.
    std::optional<std::string> local_gid(pid_t pid, std::uint64_t starttime) const;
    // Local entries whose process gone(entry) says has ended: each is marked
    // with the time this was first seen, and erased keep_ms after that.
    // gone() runs without the table's lock. Returns the gids erased.
    std::vector<std::string> forget_exited(std::uint64_t keep_ms,
                                           const std::function<bool(const Location&)>& gone);
    void erase(const std::string& gid);
    // Forwarding entries ("moved") unchanged for keep_ms and not asked about
    // within keep_ms, by the host each points at (at most limit in all): the
    // ones to ask that host about. Each is marked asked (in memory only).
    struct Asked {
        std::string gid;
        std::uint64_t updated_ms = 0;
    };
    std::map<std::string, std::vector<Asked>> moved_to_ask(std::uint64_t keep_ms,
                                                           std::size_t limit);
    // Erases those of asked that still point at host unchanged (host said it
    // does not know them: the process ended there and was forgotten).
    // Returns the gids erased.
    std::vector<std::string> forget_moved(const std::string& host, const std::vector<Asked>& asked);

  private:
    ghost::Result<void> append_locked(const std::string& lines);
    ghost::Result<void> compact_locked();
    std::string pending_hints_locked();
    std::string path_, log_path_, host_;
    std::uint64_t next_ = 1;
    std::map<std::string, Location> map_;
    std::set<std::string> hinted_;                  // gids of hints not yet written
    std::map<std::string, std::uint64_t> asked_ms_; // moved_to_ask(): when
    ghost::UniqueFd log_;                           // locations.log, O_APPEND
    std::size_t log_records_ = 0;
    mutable std::mutex mu_;
};

json to_json(const Location& l);
Location location_from_json(const json& j);

} // namespace migd
