// SPDX-License-Identifier: LGPL-2.1-or-later
// A descriptor passed with a message over a Unix socket (SCM_RIGHTS), for
// libghost's own helper processes (not installed).
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <span>

#include "ghost/fd.hpp"

namespace ghost {

// Sends data as one message with fd attached (fd < 0: none), without
// SIGPIPE; EINTR is retried. 0, or the errno of the failure.
inline int send_with_fd(int sock, std::span<const std::byte> data, int fd) {
    iovec iov{const_cast<std::byte*>(data.data()), data.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    if (fd >= 0) {
        h.msg_control = control;
        h.msg_controllen = sizeof(control);
        cmsghdr* c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof(fd));
    }
    while (::sendmsg(sock, &h, MSG_NOSIGNAL) < 0)
        if (errno != EINTR)
            return errno;
    return 0;
}

// A message received into data, and the descriptor that came with it
// (close-on-exec) in *fd, if one did whole. The bytes received (0: the
// end), or -1 with errno; EINTR is retried.
inline ssize_t recv_with_fd(int sock, std::span<std::byte> data, UniqueFd* fd) {
    iovec iov{data.data(), data.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = control;
    h.msg_controllen = sizeof(control);
    ssize_t n;
    while ((n = ::recvmsg(sock, &h, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
    }
    if (n < 0)
        return n;
    const cmsghdr* c = CMSG_FIRSTHDR(&h);
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int))) {
        int got = -1;
        std::memcpy(&got, CMSG_DATA(c), sizeof(got));
        *fd = UniqueFd(got);
    }
    if (h.msg_flags & MSG_CTRUNC) // a descriptor that did not fit was closed
        fd->reset();
    return n;
}

} // namespace ghost
