// SPDX-License-Identifier: GPL-2.0
// A progress bar on standard error, only on a terminal and only for images
// big enough to make the user wait (over 64 MiB).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "ghost/process.hpp"

namespace ghostctl {

class ProgressBar {
  public:
    explicit ProgressBar(std::string label);
    ~ProgressBar() { finish(); }
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    // A ProgressFn for libghost; a no-op when standard error is not a tty.
    ghost::ProgressFn callback();
    // Ends the line if a bar was drawn.
    void finish();

    static constexpr std::uint64_t threshold = 64ULL << 20;

  private:
    void draw(const ghost::Progress& p);

    std::string label_;
    bool tty_;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point start_;
};

std::string human_bytes(std::uint64_t n);

} // namespace ghostctl
