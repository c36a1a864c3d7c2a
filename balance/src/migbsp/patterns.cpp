// SPDX-License-Identifier: LGPL-2.1-or-later
#include "patterns.hpp"

#include <algorithm>

namespace ghost::balance::migbsp {

bool within(double prediction, double actual, double tolerance) {
    return prediction >= actual * (1.0 - tolerance) && prediction <= actual * (1.0 + tolerance);
}

void Pattern::observe(bool regular, unsigned alpha) {
    const double step = 1.0 / static_cast<double>(alpha);
    value_ = std::clamp(value_ + (regular ? step : -step), 0.0, 1.0);
}

void History::resize(std::size_t sets) {
    pb_.resize(sets);
    btp_.resize(sets);
    comm_.resize(sets);
    last_bytes_.resize(sets, 0.0);
}

namespace {
double at(const std::vector<double>& v, std::size_t j) {
    return j < v.size() ? v[j] : 0.0; // a Set the process did not report: nothing received
}
} // namespace

void History::observe(const Process& p, bool first, unsigned alpha, Tolerances tol) {
    pi_.observe(p.instructions, first);
    ctp_.observe(p.comp_time, first);
    comp_.observe(within(pi_.value(), p.instructions, tol.delta), alpha);
    last_instructions_ = p.instructions;
    for (std::size_t j = 0; j < pb_.size(); ++j) {
        const double bytes = at(p.bytes_from_set, j);
        pb_[j].observe(bytes, first);
        btp_[j].observe(at(p.recv_time_from_set, j), first);
        comm_[j].observe(within(pb_[j].value(), bytes, tol.beta), alpha);
        last_bytes_[j] = bytes;
    }
}

} // namespace ghost::balance::migbsp
