// SPDX-License-Identifier: LGPL-2.1-or-later
// MigBSP's two adaptations of "when" (Righi et al., §3.2): the interval
// alpha between rescheduling calls (Fig. 2, Inequalities 1 and 2) and the
// distance D that says how far from the average the slowest and fastest
// processes may be (Fig. 3, omega calls without migration).
#pragma once

#include <span>

namespace ghost::balance::migbsp {

// Inequalities 1 and 2 on the processes' superstep times:
//   slowest < average * (1 + D)  and  fastest > average * (1 - D).
// No process at all, or all times zero, counts as balanced (nothing to
// rebalance; the literal inequalities would be false on an average of 0).
bool balanced(std::span<const double> step_times, double distance);

// Fig. 2. alpha' grows by one at every balanced superstep, shrinks by one at
// every unbalanced one but never below the initial alpha; at the call that
// closes the window, alpha takes the value of alpha'.
class Interval {
  public:
    explicit Interval(unsigned initial) : initial_(initial), alpha_(initial), next_(initial) {}

    void observe(bool is_balanced) {
        if (is_balanced)
            ++next_;
        else if (next_ > initial_)
            --next_;
    }
    void call() { alpha_ = next_; }

    unsigned alpha() const { return alpha_; }     // length of the current window
    unsigned alpha_next() const { return next_; } // alpha'
    unsigned initial() const { return initial_; }

  private:
    unsigned initial_;
    unsigned alpha_;
    unsigned next_;
};

// Fig. 3, at every call: gamma counts the consecutive calls without a
// migration (this one included). gamma >= omega: D grows by D/2 if the
// result stays below 1. Otherwise, a call that migrated (gamma = 0) with D
// above its initial value halves it. Fig. 3 alone could take D below its
// initial value (0.75 -> 0.375 with D = 0.5); the text says D decreases
// "down to a limit" and the condition names the initial D, so our reading
// stops at the initial D.
class Distance {
  public:
    Distance(double initial, unsigned omega) : initial_(initial), value_(initial), omega_(omega) {}

    void call(bool migrated);

    double value() const { return value_; }
    unsigned gamma() const { return gamma_; }

  private:
    double initial_;
    double value_;
    unsigned omega_;
    unsigned gamma_ = 0;
};

} // namespace ghost::balance::migbsp
