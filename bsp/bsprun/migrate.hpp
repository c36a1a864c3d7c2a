// SPDX-License-Identifier: GPL-2.0
// Same-host migration of a detached VP through libghost (bsprun
// --migrate-every): checkpoint into a pipe while restart rebuilds it from the
// other end; the original dies only once the copy exists.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "ghost/engine.hpp"
#include "hub.hpp"

namespace ghost::bsp {

class LocalMover final : public Mover {
  public:
    // out, err: bsprun's ends of the VPs' stdout and stderr pipes, given to
    // the copy as its fds 1 and 2.
    LocalMover(std::unique_ptr<Engine> engine, int out, int err)
        : engine_(std::move(engine)), out_(out), err_(err) {}
    Result<pid_t> move(int vp, pid_t pid, std::uint64_t superstep) override;

  private:
    std::unique_ptr<Engine> engine_;
    int out_, err_;
};

// --migrate-every N (a testing option): at every N-th barrier, VP
// (superstep mod P) moves; no VP when N is 0 or at the other barriers.
inline std::optional<int> forced_vp(std::uint64_t superstep, unsigned every, int nprocs) {
    if (every == 0 || (superstep + 1) % every != 0)
        return std::nullopt;
    return static_cast<int>(superstep % static_cast<std::uint64_t>(nprocs));
}

// Moves forced_vp() on this host.
class EveryNth final : public BarrierHook {
  public:
    EveryNth(unsigned n, int nprocs) : n_(n), nprocs_(nprocs) {}
    std::vector<int> barrier(std::uint64_t superstep, std::span<const VpStats> stats) override;

  private:
    unsigned n_;
    int nprocs_;
};

} // namespace ghost::bsp
