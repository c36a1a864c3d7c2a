// SPDX-License-Identifier: LGPL-2.1-or-later
// How much of the slowest process's time shows in the superstep's length.
// A superstep lasts as long as its slowest process only if nothing else
// bounds it: when a centralised barrier's messages queue on the master's
// link, the last arrival waits there anyway, and shortening it saves
// nothing. The policy measures this instead of assuming it: the slope of
// the superstep's length (between two barriers) over the latest arrival at
// the barrier, by weighted least squares over recent supersteps, in [0, 1].
// Regular applications, whose arrival hardly varies, give no slope: 1.
#pragma once

namespace ghost::balance::ghost_policy {

class Visibility {
  public:
    explicit Visibility(double decay) : decay_(decay) {}

    // slowest: the latest arrival at the barrier; length: the seconds since
    // the previous barrier.
    void observe(double slowest, double length);
    double slope() const;

  private:
    double decay_;
    double w_ = 0.0, x_ = 0.0, y_ = 0.0, xx_ = 0.0, xy_ = 0.0;
};

} // namespace ghost::balance::ghost_policy
