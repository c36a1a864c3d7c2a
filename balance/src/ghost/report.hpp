// SPDX-License-Identifier: LGPL-2.1-or-later
// What the ghost policy's decider has heard. At a call a process reports
// its demand (on the barrier message it sends anyway) only when it differs
// from the one it last reported by more than a tolerance (relative, on its
// instructions, bytes per Set), and a Set's manager reports a host only when
// anything of it changed; the decider plans with the values it last heard. A regular application
// (LBM) then pays for its reports once, not at every call. The tolerance is below the margin a move
// must gain, so a stale value within it cannot change a decision by more than the margin already
// ignores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <ghost/balance/observation.hpp>

#include "plan.hpp"

namespace ghost::balance::ghost_policy {

class Reports {
  public:
    explicit Reports(double tolerance) : tolerance_(tolerance) {}

    struct Heard {
        std::size_t procs = 0; // processes that reported at this call
        std::size_t hosts = 0; // hosts whose load was reported
    };

    // demand: the processes' current demands, replaced by what the decider
    // has heard (a process's new demand where it reported). Observation's
    // hosts are compared with what was last heard of them.
    Heard refresh(const Observation& obs, std::span<Demand> demand);

  private:
    bool differs(double heard, double now) const;

    double tolerance_;
    std::vector<Demand> demand_;        // per process, as last reported
    std::vector<std::uint64_t> memory_; // per process, image size as last reported
    std::vector<bool> reported_;        // per process: reported at least once
    std::vector<Host> hosts_;           // per host, as last reported
    std::vector<bool> host_reported_;   // per host: reported at least once
};

} // namespace ghost::balance::ghost_policy
