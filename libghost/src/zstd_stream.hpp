// SPDX-License-Identifier: LGPL-2.1-or-later
// Streaming zstd between descriptors (not installed); reading compressed
// images is ghost::image_source() (process.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "ghost/io.hpp"
#include "ghost/result.hpp"

namespace ghost {

// Reads in to its end, writes one zstd frame to out. counted(n) after each
// n input bytes consumed.
Result<void> compress_fd(int in, int out, int level,
                         const std::function<void(std::uint64_t)>& counted);

// read(2) with EINTR retried. (Whole writes: write_all() of ghost/io.hpp.)
Result<std::size_t> read_some(int fd, std::span<std::byte> buf);

} // namespace ghost
