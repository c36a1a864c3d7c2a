// SPDX-License-Identifier: GPL-2.0
#include "zerocopy.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "ghost/io.hpp"
#include "wire.hpp"

namespace migd::zerocopy {

namespace {

using ghost::Error;
using ghost::Result;

std::string who(const Channel& ch) {
    return ch.peer().empty() ? "the peer" : ch.peer();
}

// poll(2) of p alone for at most the channel's timeout (none: for ever),
// EINTR retried: 0 when the timeout ran out.
int poll_one(const Channel& ch, pollfd& p) {
    const int ms = ch.timeout().count() > 0 ? static_cast<int>(ch.timeout().count()) : -1;
    int r;
    while ((r = ::poll(&p, 1, ms)) < 0 && errno == EINTR) {
    }
    return r;
}

// Waits until sock is ready for ev, at most the channel's timeout.
Result<void> ready(const Channel& ch, int sock, short ev) {
    pollfd p{sock, ev, 0};
    if (poll_one(ch, p) == 0)
        return Error::from_errno(ETIMEDOUT,
                                 fmt::format("{} {} nothing for {} ms", who(ch),
                                             ev == POLLIN ? "sent" : "read", ch.timeout().count()));
    return {};
}

Error io_error(const Channel& ch, const char* what) {
    const int e = errno;
    if (e == EAGAIN || e == EWOULDBLOCK) // SO_SNDTIMEO/SO_RCVTIMEO of a TLS channel's socket
        return Error::from_errno(ETIMEDOUT, fmt::format("{}: {} was silent for {} ms", what,
                                                        who(ch), ch.timeout().count()));
    return Error::from_errno(e, fmt::format("{}: {}", what, std::strerror(e)));
}

Result<void> send_header(const Channel& ch, int sock, std::uint32_t len) {
    std::byte h[frame_header_size];
    put_header(h, FrameType::Data, len);
    std::size_t off = 0;
    while (off < sizeof(h)) {
        if (auto r = ready(ch, sock, POLLOUT); !r)
            return r;
        const ssize_t n = ::send(sock, h + off, sizeof(h) - off, MSG_NOSIGNAL | MSG_MORE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return io_error(ch, "sending the image");
        off += static_cast<std::size_t>(n);
    }
    return {};
}

// One frame of len bytes from fd: splice (pipe) or sendfile (file).
Result<void> send_body(const Channel& ch, int sock, int fd, bool pipe, std::size_t len) {
    while (len > 0) {
        if (auto r = ready(ch, sock, POLLOUT); !r)
            return r;
        const ssize_t n =
            pipe ? ::splice(fd, nullptr, sock, nullptr, len, SPLICE_F_MOVE | SPLICE_F_MORE)
                 : ::sendfile(sock, fd, nullptr, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return io_error(ch, "sending the image");
        if (n == 0)
            return Error::from_errno(EIO, "the image ended inside a frame already announced "
                                          "(the file shrank while it was sent)");
        len -= static_cast<std::size_t>(n);
    }
    return {};
}

// Bytes the pipe holds now; 0 and *end at its writer's end.
Result<std::size_t> pipe_ready(int fd, bool* end) {
    pollfd p{fd, POLLIN, 0};
    for (;;) {
        int r;
        while ((r = ::poll(&p, 1, -1)) < 0 && errno == EINTR) {
        }
        int avail = 0;
        if (::ioctl(fd, FIONREAD, &avail) != 0)
            return Error::from_errno(errno,
                                     fmt::format("reading the export: {}", std::strerror(errno)));
        if (avail > 0)
            return static_cast<std::size_t>(avail);
        if (p.revents & (POLLHUP | POLLERR)) {
            *end = true;
            return std::size_t{0};
        }
    }
}

} // namespace

bool can_send(int fd) {
    struct stat st;
    return ::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode));
}

Result<void> send_frames(const Channel& ch, int sock, int fd, std::atomic<std::uint64_t>* sent) {
    struct stat st;
    if (::fstat(fd, &st) != 0)
        return Error::from_errno(errno, fmt::format("the image: {}", std::strerror(errno)));
    const bool pipe = S_ISFIFO(st.st_mode);
    std::uint64_t left = 0; // a file's bytes from its offset
    if (!pipe) {
        const off_t at = ::lseek(fd, 0, SEEK_CUR);
        left = at >= 0 && st.st_size > at ? static_cast<std::uint64_t>(st.st_size - at) : 0;
    }
    ghost::NoSigpipe quiet;
    for (;;) {
        std::size_t n;
        if (pipe) {
            bool end = false;
            auto a = pipe_ready(fd, &end);
            if (!a)
                return a.error();
            if (end)
                return {};
            n = *a;
        } else {
            if (left == 0)
                return {};
            n = static_cast<std::size_t>(std::min<std::uint64_t>(left, max_data_frame));
        }
        n = std::min(n, max_data_frame);
        if (auto h = send_header(ch, sock, static_cast<std::uint32_t>(n)); !h)
            return h;
        if (auto b = send_body(ch, sock, fd, pipe, n); !b)
            return b;
        left -= pipe ? 0 : n;
        if (sent)
            sent->fetch_add(n, std::memory_order_relaxed);
    }
}

namespace {

Error stub_gone() {
    return Error::from_errno(EPIPE, "the restore stub stopped reading");
}

// Waits until the stub's pipe has room, at most the channel's timeout.
Result<void> room(const Channel& ch, int pipe) {
    pollfd p{pipe, POLLOUT, 0};
    const int r = poll_one(ch, p);
    if (r == 0)
        return Error::from_errno(
            ETIME, fmt::format("the restore stub took nothing for {} ms", ch.timeout().count()));
    if (r < 0)
        return Error::from_errno(errno, fmt::format("poll: {}", std::strerror(errno)));
    if ((p.revents & POLLERR) && !(p.revents & POLLOUT))
        return stub_gone();
    return {};
}

} // namespace

Result<void> give(const Channel& ch, int pipe, std::span<const std::byte> b) {
    ghost::NoSigpipe quiet;
    while (!b.empty()) {
        const ssize_t n = ::write(pipe, b.data(), b.size());
        if (n >= 0) {
            b = b.subspan(static_cast<std::size_t>(n));
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == EPIPE)
            return stub_gone();
        if (errno != EAGAIN)
            return Error::from_errno(
                errno, fmt::format("writing to the restore stub: {}", std::strerror(errno)));
        if (auto r = room(ch, pipe); !r)
            return r;
    }
    return {};
}

Result<std::size_t> splice_into(const Channel& ch, int sock, int pipe, std::size_t n) {
    if (auto r = ready(ch, sock, POLLIN); !r)
        return r.error();
    ghost::NoSigpipe quiet;
    for (;;) {
        const auto t0 = std::chrono::steady_clock::now();
        const ssize_t k = ::splice(sock, nullptr, pipe, nullptr, n, SPLICE_F_MOVE);
        if (k >= 0)
            return static_cast<std::size_t>(k);
        if (errno == EINTR)
            continue;
        if (errno == EPIPE)
            return stub_gone();
        if (errno == EAGAIN) {
            // The pipe was full, or the socket's receive timeout ran out.
            // Whether the pipe has room now does not tell which: the stub
            // may have read since. A timeout takes the timeout's length; a
            // full pipe answers at once.
            const auto waited = std::chrono::steady_clock::now() - t0;
            if (ch.timeout().count() > 0 && waited >= ch.timeout() / 2) {
                errno = EAGAIN;
                return io_error(ch, "receiving the image");
            }
            if (auto r = room(ch, pipe); !r)
                return r.error();
            continue;
        }
        return io_error(ch, "receiving the image");
    }
}

} // namespace migd::zerocopy
