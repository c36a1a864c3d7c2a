// SPDX-License-Identifier: LGPL-2.1-or-later
// Process attributes (GHOST_SEC_ATTRS) in the user engine: what is refused
// (common/ghost_policy.h's ghost_policy_attrs(), as ghost.ko), what the
// image records, and at import what the caller may be given and, past the
// point of no return, giving it. Not installed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <linux/ghost.h>

#include "ghost/result.hpp"
#include "user/call_batch.hpp"
#include "user/tracee.hpp"

namespace ghost::user {

// ---- export ----

// ghost_policy_attrs() from /proc/PID/status (Seccomp) and /proc/PID/ns
// (time, time_for_children): before the process is touched, and again once
// it is held and before any system call runs in it. status: the text of
// /proc/PID/status, where the caller has read it already.
Result<void> check_attrs(pid_t pid, std::string_view status);
Result<void> check_attrs(pid_t pid);

// What only the held process can say, with system calls run inside it
// (prctl, membarrier): the calls, appended to @calls (ask.cpp runs them all,
// whatever each returns); @scratch is 8 writable bytes of its memory.
void queue_attrs(std::vector<CallEntry>& calls, std::uint64_t scratch);
// What their results say: @answers are those queue_attrs() appended, run;
// @subreaper the int PR_GET_CHILD_SUBREAPER wrote at @scratch.
void attrs_answered(std::span<const CallEntry> answers, std::int32_t subreaper, ghost_attrs& a);

// The rest, from /proc: NoNewPrivs, oom_score_adj, nice, session, group.
Result<void> read_attrs(pid_t pid, std::string_view status, ghost_attrs& a);

// ---- import ----

// What the caller did (and undoes if the import fails before the point of
// no return) and what the tracer does after it.
struct AttrsPlan {
    bool present = false; // the image has ATTRS: otherwise nothing changes
    ghost_attrs want{};
    bool setsid = false, setpgid = false;
    bool oom_set = false;
    int oom0 = 0;
    bool nice_set = false;
    int nice0 = 0;
};

// In the caller, while it is still itself: refuses what it may not have
// (GHOST_NICE_REASON, GHOST_OOM_REASON, GHOST_SETSID_REASON,
// GHOST_MEMBARRIER_REASON, as ghost.ko) and sets what must be tried to be
// known allowed (a lower nice value, oom_score_adj): undo_attrs() puts them back.
Result<void> prepare_attrs(const ghost_attrs* a, AttrsPlan& plan);
void undo_attrs(const AttrsPlan& plan);

// In the tracer, after the point of no return: the rest, as system calls
// queued to run in the caller (the batch names the first that fails).
Result<void> commit_attrs(CallBatch& batch, const AttrsPlan& plan);

} // namespace ghost::user
