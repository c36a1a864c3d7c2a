// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ghost/io.hpp"

#include <unistd.h>

#include <cerrno>

#include "sys.hpp"

namespace ghost {

Result<void> write_all(int fd, std::span<const std::byte> data, std::size_t* done) {
    std::size_t off = 0;
    const auto report = [&] {
        if (done)
            *done = off;
    };
    while (off < data.size()) {
        const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            const int err = errno;
            report();
            return Error::from_errno(err, errno_text(err));
        }
        off += static_cast<std::size_t>(n);
    }
    report();
    return {};
}

} // namespace ghost
