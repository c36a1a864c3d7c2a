// SPDX-License-Identifier: GPL-2.0
// Image frames moved by the kernel instead of through migd's memory, where
// the channel's stream plane is its socket (Channel::stream_fd(): a plain
// channel, or a TLS channel streaming in the clear): splice(2) from the
// exporter's pipe, sendfile(2) from a stored image, and on the receiving
// side page data spliced from the socket into the restore stub's pipe
// (wire.hpp's FrameSource::skip()). The frames on the wire are the same.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "channel.hpp"
#include "ghost/result.hpp"

namespace migd::zerocopy {

// Whether send_frames() can move fd's bytes: a pipe or a regular file.
bool can_send(int fd);

// DATA frames of everything fd holds until its end, moved from fd (a pipe:
// splice; a regular file from its offset: sendfile) to sock; counts bytes
// in *sent. Waits for sock at most ch.timeout() at a time.
ghost::Result<void> send_frames(const Channel& ch, int sock, int fd,
                                std::atomic<std::uint64_t>* sent);

// Up to n bytes of sock moved into pipe (splice), waiting for sock at most
// ch.timeout(); 0 when the peer closed. An error EPIPE: pipe's reader is
// gone (nothing was moved).
ghost::Result<std::size_t> splice_into(const Channel& ch, int sock, int pipe, std::size_t n);

// Writes bytes to pipe; false when its reader is gone. No SIGPIPE.
bool give(int pipe, std::span<const std::byte> b);

} // namespace migd::zerocopy
