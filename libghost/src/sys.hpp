// Small system helpers shared by libghost's sources (not installed).
#pragma once

#include <fcntl.h>

#include <string>
#include <system_error>

#include "ghost/fd.hpp"

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

} // namespace ghost
