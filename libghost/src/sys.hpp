// SPDX-License-Identifier: LGPL-2.1-or-later
// Small system helpers shared by libghost's sources (not installed).
#pragma once

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

#include "ghost/fd.hpp"
#include "ghost/result.hpp"

namespace ghost {

inline std::string errno_text(int err) {
    return std::error_code(err, std::system_category()).message();
}

// Descriptors libghost opens for its own use are moved to this number or
// above: images name low descriptors, and an inherited descriptor of the
// image must not meet one of ours at its number.
inline constexpr int high_fd_base = 512;

// fd moved to the lowest free number >= high_fd_base (close-on-exec); the
// original number is closed. On failure (a low RLIMIT_NOFILE) fd stays.
inline UniqueFd move_fd_high(UniqueFd fd) {
    if (!fd || fd.get() >= high_fd_base)
        return fd;
    const int hi = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, high_fd_base);
    if (hi < 0)
        return fd;
    return UniqueFd(hi);
}

// Closes every descriptor below end (~0U: all of them) but those in keep.
inline void close_below(unsigned end, std::vector<int> keep) {
    std::sort(keep.begin(), keep.end());
    unsigned lo = 0;
    for (const int k : keep) {
        const auto u = static_cast<unsigned>(k);
        if (u >= end)
            break;
        if (u > lo)
            ::syscall(SYS_close_range, lo, u - 1, 0);
        lo = u + 1;
    }
    if (lo < end)
        ::syscall(SYS_close_range, lo, end - 1, 0);
}

// A failure told by one process to another over a pipe (a restoring child
// to the restart, the user engine's tracer to the process it rebuilds):
// "errno reason", and back.
inline std::string failure_report(const Error& e) {
    return std::to_string(e.code.value()) + " " + e.what();
}

inline Error parse_failure_report(const std::string& report) {
    const auto space = report.find(' ');
    const int err = std::atoi(report.substr(0, space).c_str());
    return Error::from_errno(err > 0 ? err : EIO,
                             space == std::string::npos ? report : report.substr(space + 1));
}

} // namespace ghost
