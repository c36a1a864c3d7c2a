// SPDX-License-Identifier: LGPL-2.1-or-later
#include "visible.hpp"

#include <algorithm>
#include <cmath>

namespace ghost::balance::ghost_policy {

namespace {
// Below this coefficient of variation of the arrival, the slope is noise.
constexpr double steady = 0.05;
} // namespace

void Visibility::observe(double slowest, double length) {
    w_ = decay_ * w_ + 1.0;
    x_ = decay_ * x_ + slowest;
    y_ = decay_ * y_ + length;
    xx_ = decay_ * xx_ + slowest * slowest;
    xy_ = decay_ * xy_ + slowest * length;
}

double Visibility::slope() const {
    if (w_ <= 0.0)
        return 1.0;
    const double mean = x_ / w_;
    const double var = xx_ / w_ - mean * mean;
    if (!(var > 0.0) || std::sqrt(var) < steady * std::abs(mean))
        return 1.0;
    const double cov = xy_ / w_ - mean * (y_ / w_);
    return std::clamp(cov / var, 0.0, 1.0);
}

} // namespace ghost::balance::ghost_policy
