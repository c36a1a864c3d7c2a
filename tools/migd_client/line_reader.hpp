// SPDX-License-Identifier: GPL-2.0
// The lines of migd's control protocol (one JSON object per line), read from
// a stream socket: shared by migd (requests) and migd_client (replies).
// Header-only, so that migd needs no link to the client library.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace ghost::migd_client {

class LineReader {
  public:
    // max: the longest line accepted (a longer one ends the stream with
    // too_long() set).
    explicit LineReader(int fd, std::size_t max = std::numeric_limits<std::size_t>::max())
        : fd_(fd), max_(max) {}

    // The next line without its newline, valid until the next call; nothing
    // at the end of the stream, on an error, or when the line is too long.
    // Each byte is scanned for the newline once, however long the line.
    std::optional<std::string_view> next() {
        buf_.erase(0, taken_);
        taken_ = 0;
        for (;;) {
            if (const auto nl = buf_.find('\n', scanned_); nl != std::string::npos) {
                taken_ = nl + 1;
                scanned_ = 0;
                return std::string_view(buf_).substr(0, nl);
            }
            scanned_ = buf_.size();
            if (buf_.size() > max_) {
                too_long_ = true;
                return std::nullopt;
            }
            char chunk[65536];
            const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return std::nullopt;
            buf_.append(chunk, static_cast<std::size_t>(n));
        }
    }
    bool too_long() const { return too_long_; }

  private:
    int fd_;
    std::size_t max_;
    std::string buf_;
    std::size_t taken_ = 0;   // the line last returned and its newline
    std::size_t scanned_ = 0; // bytes of buf_ known to hold no newline
    bool too_long_ = false;
};

} // namespace ghost::migd_client
