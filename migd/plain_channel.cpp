// SPDX-License-Identifier: GPL-2.0
// A Channel over a plain connected descriptor: for tests of the protocol and
// for a host talking to itself through a socketpair (never to a peer).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "channel.hpp"

namespace migd {

namespace {

using ghost::Error;
using ghost::Result;

class PlainChannel final : public Channel {
  public:
    PlainChannel(ghost::UniqueFd fd, std::string peer)
        : fd_(std::move(fd)), peer_(std::move(peer)) {}

    Result<std::size_t> read(std::span<std::byte> buf) override {
        if (auto w = wait(POLLIN); !w)
            return w.error();
        for (;;) {
            const ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
            if (n >= 0)
                return static_cast<std::size_t>(n);
            if (errno != EINTR)
                return Error::from_errno(errno, fmt::format("receive: {}", std::strerror(errno)));
        }
    }

    Result<void> write(std::span<const std::byte> data) override {
        std::size_t off = 0;
        while (off < data.size()) {
            if (auto w = wait(POLLOUT); !w)
                return w.error();
            const ssize_t n = ::send(fd_.get(), data.data() + off, data.size() - off, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return Error::from_errno(errno, fmt::format("send: {}", std::strerror(errno)));
            off += static_cast<std::size_t>(n);
        }
        return {};
    }

    Result<void> finish() override {
        ::shutdown(fd_.get(), SHUT_WR);
        return {};
    }
    const std::string& peer() const override { return peer_; }
    int fd() const override { return fd_.get(); }
    void set_timeout(std::chrono::milliseconds t) override { timeout_ = t; }
    std::chrono::milliseconds timeout() const override { return timeout_; }
    // Nothing to leave: the stream plane is the descriptor already.
    int stream_fd() const override { return fd_.get(); }

  private:
    Result<void> wait(short ev) {
        if (timeout_.count() <= 0)
            return {};
        pollfd p{fd_.get(), ev, 0};
        int r;
        while ((r = ::poll(&p, 1, static_cast<int>(timeout_.count()))) < 0 && errno == EINTR) {
        }
        if (r == 0)
            return Error::from_errno(ETIMEDOUT, fmt::format("no data for {} ms", timeout_.count()));
        return {};
    }
    ghost::UniqueFd fd_;
    std::string peer_;
    std::chrono::milliseconds timeout_{0};
};

} // namespace

std::unique_ptr<Channel> plain_channel(ghost::UniqueFd fd, std::string peer) {
    return std::make_unique<PlainChannel>(std::move(fd), std::move(peer));
}

} // namespace migd
