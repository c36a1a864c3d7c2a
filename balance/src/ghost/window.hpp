// SPDX-License-Identifier: LGPL-2.1-or-later
// What the ghost policy remembers of a process: its instructions and the
// bytes it received from each Set over the last few supersteps, so that its
// demand per superstep is a mean over a window rather than the last value
// (LU alternates a heavy and a light superstep; a window of an even length
// sees both, whatever the phase). Instructions and bytes do not depend on
// the host, so the window stays valid across a migration. The supersteps
// before a process first computes are not part of its window: a process
// that joins a wavefront late (Smith-Waterman) is as busy as the others
// from its first superstep on, and a mean over its idle past would rank it
// light while it is on the critical path.
#pragma once

#include <cstddef>
#include <vector>

#include <ghost/balance/observation.hpp>

namespace ghost::balance::ghost_policy {

class Window {
  public:
    Window(std::size_t length, std::size_t sets);

    void observe(const Process& p);
    // Means over the supersteps observed since the process first computed
    // (at most length of them); zero before that.
    double instructions() const;
    double bytes_from(SetId set) const;
    std::size_t filled() const { return filled_; }
    // Whether the process has computed in any superstep observed so far.
    bool started() const { return started_; }

  private:
    std::size_t length_;
    std::size_t sets_;
    std::size_t next_ = 0;      // slot the next superstep overwrites
    std::size_t filled_ = 0;    // slots holding a superstep since the process started
    bool started_ = false;      // some superstep had instructions
    std::vector<double> slots_; // length x (1 + sets): instructions, bytes per Set
};

} // namespace ghost::balance::ghost_policy
