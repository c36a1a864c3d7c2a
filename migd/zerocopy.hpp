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

// The restore stub's pipe is non-blocking on migd's side (import_from):
// a stub that stops taking bytes without exiting must not hold a thread of
// migd for ever. Both calls below wait for room in it at most ch.timeout()
// at a time, then fail with ETIME ("the restore stub took nothing for N
// ms"; ETIMEDOUT is a silent peer); EPIPE when its reader is gone. No
// SIGPIPE.

// Up to n bytes of sock moved into pipe (splice), waiting for sock at most
// ch.timeout(); 0 when the peer closed. On EPIPE or ETIME nothing was
// moved.
ghost::Result<std::size_t> splice_into(const Channel& ch, int sock, int pipe, std::size_t n);

// Writes all of b to pipe.
ghost::Result<void> give(const Channel& ch, int pipe, std::span<const std::byte> b);

} // namespace migd::zerocopy
