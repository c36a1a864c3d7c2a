// SPDX-License-Identifier: GPL-2.0
// bsprun --at-superstep S:COMMAND: runs a shell command at the barrier
// before superstep S, while every VP waits there, so that something outside
// the job (PUB's load profiles: a CPU hog that comes and goes) changes at
// the same superstep in every run (Documentation/bsp.md, "Load profiles").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ghost/result.hpp"
#include "hub.hpp"

namespace ghost::bsp {

struct SuperstepCommand {
    std::uint64_t superstep = 0; // runs before this superstep begins (at least 1)
    std::string command;         // given to /bin/sh -c
};

// "S:COMMAND" with S a decimal integer of at least 1 and COMMAND not empty.
Result<SuperstepCommand> parse_at_superstep(std::string_view spec);

// Runs /bin/sh -c COMMAND with stdin /dev/null, stdout and stderr bsprun's
// standard error, no other descriptor, the signal mask emptied, and
// GHOST_BSP_JOB and GHOST_BSP_SUPERSTEP in its environment; waits for it.
// Returns its wait status, or an error naming the call that failed.
Result<int> run_superstep_command(const SuperstepCommand& c, std::string_view job);

// Wraps the barrier hook: at the barrier that ends superstep S-1 the inner
// hook decides first, then every command for S runs, in the order given,
// each to its end, before any VP gets its DELIVER. A command that fails is
// reported on standard error and the job goes on.
class SuperstepCommands final : public BarrierHook {
  public:
    SuperstepCommands(BarrierHook& inner, std::vector<SuperstepCommand> commands, std::string job)
        : inner_(inner), commands_(std::move(commands)), job_(std::move(job)) {}
    std::vector<int> barrier(std::uint64_t superstep, std::span<const VpStats> stats) override;

  private:
    BarrierHook& inner_;
    std::vector<SuperstepCommand> commands_;
    std::string job_;
};

} // namespace ghost::bsp
