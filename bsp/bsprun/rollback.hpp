// SPDX-License-Identifier: GPL-2.0
// bsprun --on-failure rollback: after a lost VP or host, restart the job
// from its last complete checkpoint on the hosts still up, by executing
// bsprun --restart (Documentation/bsp.md, "Checkpoint and rollback").
#pragma once

#include <string>
#include <vector>

#include "checkpoint.hpp"

namespace ghost::bsp {

// At most this many rollbacks in a row (GHOST_BSPRUN_ROLLBACKS counts them).
inline constexpr int kMaxRollbacks = 3;

// why: the failure. pass_on: the options the restarted bsprun keeps
// (--migd-socket, --checkpoint-every, ...). Replaces this process with
// "bsprun --restart JOB --server SERVER --hosts UP PASS_ON..."; returns
// only when it cannot (no complete checkpoint, no host up, too many
// rollbacks, exec failed), after saying why on standard error.
void rollback(HostsMover& mover, const std::vector<std::string>& hosts, const JobCheckpointer& ck,
              const std::string& server, const std::string& why,
              const std::vector<std::string>& pass_on);

} // namespace ghost::bsp
