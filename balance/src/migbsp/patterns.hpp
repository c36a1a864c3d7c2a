// SPDX-License-Identifier: LGPL-2.1-or-later
// What MigBSP remembers of each process between two rescheduling calls
// (Righi et al., §3.3.1-3.3.2): the aging predictions PI (instructions), CTP
// (computation time), PB (bytes received per Set) and BTP (receive time per
// Set), reset at the first superstep k of every window, and the patterns
// P_comp and P_comm (regularity in [0, 1], initially 1, kept across windows).
#pragma once

#include <cstddef>
#include <vector>

#include <ghost/balance/observation.hpp>

namespace ghost::balance::migbsp {

// The aging prediction: X_k at the window's first superstep, then
// X_t = X_{t-1}/2 + x_t/2.
class Aging {
  public:
    void observe(double x, bool first) { value_ = first ? x : value_ / 2.0 + x / 2.0; }
    double value() const { return value_; }

  private:
    double value_ = 0.0;
};

// A prediction is regular when actual*(1 - tolerance) <= prediction <=
// actual*(1 + tolerance) (Fig. 5 line 2, Fig. 6 line 2).
bool within(double prediction, double actual, double tolerance);

// P_comp or P_comm: +1/alpha on a regular superstep, -1/alpha otherwise,
// kept in [0, 1]. Starts at 1: every process is assumed regular until it
// proves otherwise (the paper says so of P_comp; we start P_comm the same).
class Pattern {
  public:
    void observe(bool regular, unsigned alpha);
    double value() const { return value_; }

  private:
    double value_ = 1.0;
};

struct Tolerances {
    double delta = 0.1; // instructions (Fig. 5)
    double beta = 0.1;  // bytes (Fig. 6)
};

// One process's predictions and patterns. Fig. 6 line 2 reads B_k and PB_k
// inside a loop over t; we read them as B_t and PB_t (as Fig. 5 does), else
// the loop would compare the same two numbers alpha times.
class History {
  public:
    explicit History(std::size_t sets = 0) { resize(sets); }

    // One superstep of the window; first: t = k. alpha: the window's length.
    void observe(const Process& p, bool first, unsigned alpha, Tolerances tol);

    double pi() const { return pi_.value(); }
    double ctp() const { return ctp_.value(); }
    double pb(SetId j) const { return pb_[j].value(); }
    double btp(SetId j) const { return btp_[j].value(); }
    double p_comp() const { return comp_.value(); }
    double p_comm(SetId j) const { return comm_[j].value(); }
    double last_instructions() const { return last_instructions_; }
    double last_bytes(SetId j) const { return last_bytes_[j]; }
    std::size_t sets() const { return pb_.size(); }

  private:
    void resize(std::size_t sets);

    Aging pi_, ctp_;
    std::vector<Aging> pb_, btp_;
    Pattern comp_;
    std::vector<Pattern> comm_;
    double last_instructions_ = 0.0; // I_{k+alpha-1}(i) once the window closes
    std::vector<double> last_bytes_; // B_{k+alpha-1}(i, j)
};

} // namespace ghost::balance::migbsp
