// SPDX-License-Identifier: LGPL-2.1-or-later
#include "window.hpp"

#include <algorithm>

namespace ghost::balance::ghost_policy {

Window::Window(std::size_t length, std::size_t sets)
    : length_(std::max<std::size_t>(1, length)), sets_(sets), slots_(length_ * (1 + sets), 0.0) {}

void Window::observe(const Process& p) {
    started_ = started_ || p.instructions > 0.0;
    if (!started_)
        return; // its idle past says nothing of its demand
    double* slot = &slots_[next_ * (1 + sets_)];
    slot[0] = p.instructions;
    for (std::size_t j = 0; j < sets_; ++j)
        slot[1 + j] = j < p.bytes_from_set.size() ? p.bytes_from_set[j] : 0.0;
    next_ = (next_ + 1) % length_;
    filled_ = std::min(filled_ + 1, length_);
}

double Window::instructions() const {
    if (filled_ == 0)
        return 0.0;
    double sum = 0.0;
    for (std::size_t k = 0; k < filled_; ++k)
        sum += slots_[k * (1 + sets_)];
    return sum / static_cast<double>(filled_);
}

double Window::bytes_from(SetId set) const {
    if (filled_ == 0 || set >= sets_)
        return 0.0;
    double sum = 0.0;
    for (std::size_t k = 0; k < filled_; ++k)
        sum += slots_[k * (1 + sets_) + 1 + set];
    return sum / static_cast<double>(filled_);
}

} // namespace ghost::balance::ghost_policy
