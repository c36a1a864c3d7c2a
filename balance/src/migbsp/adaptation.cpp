// SPDX-License-Identifier: LGPL-2.1-or-later
#include "adaptation.hpp"

#include <algorithm>

namespace ghost::balance::migbsp {

bool balanced(std::span<const double> step_times, double distance) {
    if (step_times.empty())
        return true;
    auto [fastest, slowest] = std::minmax_element(step_times.begin(), step_times.end());
    double sum = 0.0;
    for (double t : step_times)
        sum += t;
    const double average = sum / static_cast<double>(step_times.size());
    if (average == 0.0)
        return true; // every process took no time: equal, so balanced
    return *slowest < average * (1.0 + distance) && *fastest > average * (1.0 - distance);
}

void Distance::call(bool migrated) {
    gamma_ = migrated ? 0 : gamma_ + 1;
    if (gamma_ >= omega_) {
        if (value_ + value_ / 2.0 < 1.0)
            value_ += value_ / 2.0;
    } else if (value_ > initial_ && gamma_ == 0) {
        value_ = std::max(initial_, value_ - value_ / 2.0);
    }
}

} // namespace ghost::balance::migbsp
