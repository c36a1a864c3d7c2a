// SPDX-License-Identifier: GPL-2.0
// External load: the share of a host's CPU taken by processes the balancer
// does not manage, a step function of simulated time. On the command line:
//   --load TARGET=F[@T][,F@T...]
// TARGET is a Set name, a host number (from 0, in mapping order) or "all";
// F in [0, 1) is the share taken from time T on (T 0 when omitted), e.g.
// "Labtec=0.5" or "7=0.8@10,0@60"; or from the start of superstep N on
// with @sN ("h2=0.67@s5,0@s12": a load profile set in supersteps, as
// bsprun --at-superstep sets it). One load is in seconds or in supersteps.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ghost/result.hpp>

#include "platform.hpp"

namespace ghost::sim {

struct LoadChange {
    double time = 0.0;
    double fraction = 0.0;
    std::uint64_t superstep = 0; // > 0: from the start of this superstep on, not time
};

// A schedule of load changes for every host of a platform.
class LoadSchedule {
  public:
    LoadSchedule() = default;
    explicit LoadSchedule(std::size_t hosts) : changes_(hosts) {}

    // Adds one --load specification; an error names what is wrong with it.
    Result<void> add(std::string_view spec, const PlatformSpec& platform);
    // Sets host's schedule directly (tests, scripts).
    void set(std::size_t host, std::vector<LoadChange> changes);

    // The share taken at time (changes set in seconds), or in superstep s
    // (changes set in supersteps; 0 before the first).
    double at(std::size_t host, double time) const;
    double at_step(std::size_t host, std::uint64_t s) const;
    bool by_superstep(std::size_t host) const;
    std::span<const LoadChange> changes(std::size_t host) const { return changes_[host]; }
    std::size_t hosts() const { return changes_.size(); }

  private:
    std::vector<std::vector<LoadChange>> changes_;
};

} // namespace ghost::sim
