// SPDX-License-Identifier: LGPL-2.1-or-later
// Whole writes to a descriptor, for libghost and its callers (migd, tools).
#pragma once

#include <cstddef>
#include <span>

#include "ghost/result.hpp"

namespace ghost {

// write(2) until every byte of data is written; EINTR is retried, a short
// write continued. The error is the errno of the write that failed, its
// message the errno's text (callers say what they were writing). With done,
// *done is the number of bytes written, on success or failure.
Result<void> write_all(int fd, std::span<const std::byte> data, std::size_t* done = nullptr);

} // namespace ghost
