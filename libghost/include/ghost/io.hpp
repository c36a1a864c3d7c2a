// SPDX-License-Identifier: LGPL-2.1-or-later
// Whole writes to a descriptor, and writes that cannot raise SIGPIPE, for
// libghost and its callers (migd, tools, bsp/).
#pragma once

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <cstddef>
#include <span>

#include "ghost/result.hpp"

namespace ghost {

// write(2) until every byte of data is written; EINTR is retried, a short
// write continued. The error is the errno of the write that failed, its
// message the errno's text (callers say what they were writing). With done,
// *done is the number of bytes written, on success or failure.
Result<void> write_all(int fd, std::span<const std::byte> data, std::size_t* done = nullptr);

// SIGPIPE blocked in this thread while it lives, and one it raised taken
// back at the end (one pending before is left alone), so that a reader or
// peer gone shows only as EPIPE, whatever the process does with SIGPIPE:
// for calls that cannot say MSG_NOSIGNAL (write(2) under SSL_write,
// splice(2), sendfile(2)).
class NoSigpipe {
  public:
    NoSigpipe() {
        sigemptyset(&pipe_);
        sigaddset(&pipe_, SIGPIPE);
        sigset_t pending;
        sigpending(&pending);
        was_pending_ = sigismember(&pending, SIGPIPE) == 1;
        pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    }
    ~NoSigpipe() {
        sigset_t pending;
        sigpending(&pending);
        if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
            const timespec zero{0, 0};
            while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
            }
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    NoSigpipe(const NoSigpipe&) = delete;
    NoSigpipe& operator=(const NoSigpipe&) = delete;

  private:
    sigset_t pipe_, old_;
    bool was_pending_ = false;
};

} // namespace ghost
