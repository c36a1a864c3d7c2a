// SPDX-License-Identifier: GPL-2.0
#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace ghostctl {

std::string human_bytes(std::uint64_t n) {
    static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(n);
    std::size_t u = 0;
    while (v >= 1024 && u + 1 < std::size(units)) {
        v /= 1024;
        ++u;
    }
    return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", v, units[u]);
}

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)), tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

ghost::ProgressFn ProgressBar::callback() {
    if (!tty_)
        return {};
    return [this](const ghost::Progress& p) { draw(p); };
}

void ProgressBar::draw(const ghost::Progress& p) {
    if (std::max(p.total, p.done) <= threshold)
        return;
    const std::uint64_t total = std::max(p.total, p.done);
    const double frac = static_cast<double>(p.done) / static_cast<double>(total);
    constexpr int width = 30;
    const int filled = static_cast<int>(frac * width);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = secs > 0 ? static_cast<double>(p.done) / secs : 0;
    fmt::print(stderr, "\r{} [{:#<{}}{:.<{}}] {:3.0f}% {} of {} {}/s\x1b[K", label_, "", filled, "",
               width - filled, frac * 100, human_bytes(p.done), human_bytes(total),
               human_bytes(static_cast<std::uint64_t>(rate)));
    std::fflush(stderr);
    drawn_ = true;
}

void ProgressBar::finish() {
    if (drawn_)
        fmt::print(stderr, "\n");
    drawn_ = false;
}

} // namespace ghostctl
