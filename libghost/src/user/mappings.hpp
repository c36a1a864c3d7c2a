// SPDX-License-Identifier: LGPL-2.1-or-later
// The mappings of a held process for its image (Documentation/user-engine.md,
// "Memory"): each one's class (ghost_policy_vma()), its attributes and the
// pages it carries.
//
// The attributes are only in /proc/PID/smaps, which walks every page of
// every mapping for its counters: about 18 ms a GiB here, all of it while
// the process is held. So smaps is read on a second thread once the
// exporter has asked the process its questions (its scratch mapping would
// wait for the walk, which holds the mapping lock), while it gathers the
// rest and finds the pages from /proc/PID/maps; at the end the two lists
// must agree, or smaps is read again.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <future>
#include <vector>

#include "ghost/image.hpp"
#include "ghost/result.hpp"
#include "user/dirty.hpp"
#include "user/proc.hpp"

namespace ghost::user {

class EarlySmaps {
  public:
    // Starts reading pid's smaps, the process held (or running on with its
    // system calls watched: the last image of a pre-copy). Never fails:
    // without a thread to be had (RLIMIT_NPROC...) it is read when asked for.
    static EarlySmaps start(pid_t pid);
    // No smaps while held: get() hands maps back as read, without VmFlags;
    // the flags come from the copy-on-write snapshot's smaps once the
    // process runs again (refine_from_snapshot()).
    static EarlySmaps deferred(pid_t pid);

    // The entries, as read early where they agree with plain (maps read
    // now, the process still held), else read again.
    Result<std::vector<MapEntry>> get(const Result<std::vector<MapEntry>>& plain);
    // What get() handed back.
    const std::vector<MapEntry>& used() const { return used_; }
    // Whether get() would not wait.
    bool ready() const;

  private:
    pid_t pid_ = 0;
    bool deferred_ = false;
    std::vector<MapEntry> used_;
    std::future<Result<std::vector<MapEntry>>> f_;
};

// The mappings of pid, held, as image records with their page runs (an
// incremental export's parent's pages flagged); the first refusal in
// ghost.ko's order.
Result<std::vector<image::Vma>> capture_maps(pid_t pid, const ghost_mm& mm, const Parent* parent,
                                             EarlySmaps& smaps);

// Whether system call nr leaves every mapping and its flags as they are
// (reads, writes, sleeps, signals...): while a process makes only such calls,
// an early reading of its smaps stays true (Tracee::run_watched()).
bool leaves_mappings_alone(long nr);

// The last image of a pre-copy: the smaps of t's process, read while it
// runs on with its system calls watched (Tracee::run_watched(); until, for
// tests, must also say the read is done), then held again; nullopt where it
// made a call that could change a mapping.
Result<std::optional<EarlySmaps>> smaps_while_watched(Tracee& t,
                                                      const std::function<bool()>& until);

// After capture_maps() with EarlySmaps::deferred(): each mapping's class
// and attributes from the smaps of child, the snapshot forked at the
// capture point (held). A fork passes on every mapping and flag but locks
// (the caller made sure there were none), mappings with MADV_DONTFORK
// (absent in the child) and the pages of MADV_WIPEONFORK ones (zero in
// it): where the child's mappings are not the process's, or one has
// MADV_WIPEONFORK, false and vmas unchanged (the snapshot is not the
// process). With live, child is the process itself, running again (a
// pre-copy round that is not the last): false where its mappings are no
// longer those of the capture. A refusal as capture_maps() would have made
// it.
Result<bool> refine_from_snapshot(const EarlySmaps& smaps, pid_t child, bool live,
                                  const ghost_mm& mm, std::vector<image::Vma>& vmas);

} // namespace ghost::user
