// SPDX-License-Identifier: LGPL-2.1-or-later
// Checkpoint, restart and duplication of whole processes: what ghostctl and
// runtimes do with an Engine, in one call each.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ghost/engine.hpp"
#include "ghost/image.hpp"

namespace ghost {

struct Progress {
    std::uint64_t done = 0;  // bytes so far
    std::uint64_t total = 0; // expected bytes, 0 when unknown (an estimate)
};

// Called from a helper thread (checkpoint) or the calling thread (restart)
// about ten times a second while the image moves, and once at the end.
using ProgressFn = std::function<void(const Progress&)>;

struct CheckpointOptions {
    Fate fate = Fate::Kill;
    bool compress = false; // a zstd frame instead of the raw image
    int level = 3;         // zstd level
    ProgressFn progress;
    // An incremental image (user engine): only the pages written since the
    // image at this path, the process's last leave-running checkpoint.
    std::string parent;
    // The next image of this pre-copy (user engine; ghost/precopy.hpp):
    // whole the first time, then the pages written since the previous one.
    // Not with parent.
    Precopy* precopy = nullptr;
    // Runs once the image is complete, before a Kill fate is carried out
    // (e.g. fsync and rename the output). If it fails, the process is let go
    // (it keeps running) and checkpoint fails with its error.
    std::function<Result<void>()> commit;
    // Fate::Kill: wait until the process is gone (tearing down a large one
    // takes milliseconds). false: return once SIGKILL is sent to it, held
    // stopped since the capture, so that it never runs again; the caller
    // waits for it (migd lets the copy run meanwhile). Its teardown then
    // runs at SCHED_IDLE (freeing a GiB takes 0.2 s of CPU here, which the
    // caller's next steps should not share): the caller sets it back
    // before it waits.
    bool wait_for_exit = true;
    // When not 0: the start time the caller saw pid have (/proc/PID/stat
    // field 22, clock ticks after boot). A process that exited since, its
    // pid now another's, is not exported (ESRCH): a daemon that checked
    // whose process pid was must not export whichever has it later.
    std::uint64_t starttime = 0;
};

// Writes the image of process pid to out (a file from its current offset, a
// pipe or a socket). With Fate::Kill the process is stopped for the capture
// and killed only after the image is complete and committed, so a failed
// checkpoint never loses the process.
Result<ExportStats> checkpoint(Engine& engine, pid_t pid, int out,
                               const CheckpointOptions& opts = {});

struct RestartOptions {
    ProgressFn progress;
    // Descriptors the image marks as inherited, supplied from other numbers
    // of the caller: {image fd, caller's fd} (criu restore --inherit-fd).
    // Without an entry, image fd N is the caller's fd N.
    std::vector<std::pair<int, int>> inherit_fds;
    // The restored process stops (SIGSTOP) before it runs one instruction
    // of the image; the caller continues it (SIGCONT) or kills it. migd keeps
    // a migrated copy so until the source has killed the original.
    bool stopped = false;
    // The restore stub to spawn; empty: restore_stub_path() finds it.
    std::string stub;
    // Called with the child's pid as soon as it is spawned, before the
    // restore completes (migd journals it, so that a crash in between never
    // leaves an unknown copy behind).
    std::function<void(pid_t)> spawned;
    // in holds a pre-copy's sequence of images (ghost/precopy.hpp), oldest
    // first, to its end: the newest is restored, each page from the newest
    // image that has it.
    bool sequence = false;
    // With sequence: called (on the calling thread) with the number of
    // images the stub has taken in so far, each time one more is (migd
    // acknowledges a pre-copy image only then, so that the last one never
    // waits behind the work of the earlier ones).
    std::function<void(unsigned)> image_done;
    // User engine: restart lazily (RestoreOptions::lazy): restart() returns
    // as soon as the process runs, and a pager puts its anonymous memory in
    // from in, a whole uncompressed image in a regular file, which nobody
    // may have open for writing; a later opener for writing waits until
    // the pager is done.
    bool lazy = false;
    // The image must run as this user and as nothing more
    // (RestoreOptions::owner, image::check_owner): anything else is refused
    // before the stub opens a file it names. The stub takes the owner's gid
    // and groups before it restores. migd restores a user's image with the
    // user as this host's user database has it here.
    std::optional<Owner> owner;
};

// Rebuilds the image read from in (raw or zstd-compressed; file, pipe or
// socket) as a new child process of the caller and returns its pid once it
// runs as the image (with stopped: once it is stopped, before the image's
// first instruction). Reap it with waitpid(). The child inherits the
// caller's descriptors that are not close-on-exec, among them those the
// image marks as inherited (stdio, pipes). An incremental image is first
// flattened with its chain of parents (ghost/chain.hpp) into one whole
// image, for either engine; a missing or wrong parent fails the restart.
//
// Safe in a multithreaded caller: the child is the restore stub, started
// with posix_spawn() (nothing runs between the vfork and the exec but the
// descriptor moves), and the stub, a new single-threaded program, becomes
// the image. in is read from its current offset by the stub (the offset
// moves for a file: do not read in concurrently).
Result<pid_t> restart(Engine& engine, int in, const RestartOptions& opts = {});

// Rebuilds the image read from in in this very process: returns only on
// failure, and then the caller is as it was (but for its vDSO's address).
// The caller must be single-threaded (the restore stub calls this).
Error restart_self(Engine& engine, int in, const RestoreOptions& opts = {});

struct DuplicateOptions {
    bool stopped = false; // as RestartOptions::stopped
    std::string stub;     // as RestartOptions::stub
};

// A second, independent copy of process pid (which keeps running), as a
// child of the caller; returns its pid. The copy shares pid's inherited
// descriptors (pipes, terminals) and reopens its files by path. The image
// goes to the restore stub in a memory file; like restart(), safe in a
// multithreaded caller.
Result<pid_t> duplicate(Engine& engine, pid_t pid, const DuplicateOptions& opts = {});

// Reaps the copy-on-write snapshots that an exporter which died during a
// --leave-running export (a checkpoint that lets the process run on, a
// duplicate) left in process pid: its own zombie children, which no wait()
// of pid's sees and which would make it refused as a parent. Every export
// does this first; a daemon that restarts after a crash calls it for the
// processes it was exporting. Returns how many it reaped (0 without
// holding pid when there are none); an error if pid could not be held.
Result<int> reap_leftover_snapshots(pid_t pid);

// The restore stub restart() and duplicate() spawn, found in this order:
// override when it is not empty; $GHOST_RESTORE_STUB; the installed
// libexec/ghost/ghost-restore-stub beside this libghost (relative to the
// library's own directory, so a moved install finds its own), or for a
// libghost in its build tree the build's bin/ghost-restore-stub; the
// libexec path compiled in; ghost-restore-stub beside the running program.
// ENOENT, naming the places tried, when none is executable.
Result<std::string> restore_stub_path(std::string_view override = {});

// What an image carries beside its page data, roughly: headers, registers,
// descriptors, a few stray pages. For progress estimates.
inline constexpr std::uint64_t kImageOverheadBytes = 64 * 1024;

// Roughly how many bytes the image of pid will take (its anonymous memory
// plus kImageOverheadBytes), for progress reports; 0 when it cannot be read.
std::uint64_t estimate_image_bytes(pid_t pid);

// Whether the bytes begin a zstd frame (ghostctl checkpoint --compress).
bool is_zstd(std::span<const std::byte> head);

// The raw image bytes read from fd (borrowed), decompressed on the fly when
// they are a zstd stream: for image::read over checkpoint files. It reads
// ahead (small records come from one large read, not a read each), so fd
// must carry the image to its end: what follows it would be taken too.
Result<std::unique_ptr<image::Source>> image_source(int fd);

} // namespace ghost
