// SPDX-License-Identifier: GPL-2.0
// GuardFence (see fence.hpp).
#include "fence.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>

#include <fmt/format.h>

#include "keepalive.hpp"

namespace ghost::bsp {

namespace {

void watch(int fd, int stop, const std::string& host, const std::string& job) {
    // Only a hang-up or an error wakes it: the guard sends nothing after
    // its hello, and the hub reads its one answer after stop().
    pollfd p[2] = {{fd, POLLRDHUP, 0}, {stop, POLLIN, 0}};
    for (;;) {
        if (::poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        if (p[1].revents)
            return;
        if (p[0].revents & (POLLERR | POLLHUP | POLLRDHUP))
            break;
    }
    const wire::Loss loss = wire::loss_of(fd);
    if (!loss.silent) {
        std::fprintf(stderr,
                     "bsprun: warning: the guard on %s has ended (%s): if bsprun or its host is "
                     "lost from now on, job %s is not rolled back\n",
                     host.c_str(), loss.why.c_str(), job.c_str());
        return;
    }
    // Straight to the descriptor: the main thread may hold stdio's lock.
    const std::string msg = fmt::format(
        "bsprun: lost the guard on {} ({}): its host is down or cut off from this one. Job {} "
        "stops here, so that it does not run twice: if the guard is alive it rolls the job back "
        "from its last checkpoint on its side; if not, run bsprun --restart {} --server {} once "
        "{} is back\n",
        host, loss.why, job, job, host, host);
    [[maybe_unused]] const ssize_t n = ::write(2, msg.data(), msg.size());
    ::_exit(1);
}

} // namespace

Result<GuardFence> GuardFence::start(int fd, std::string host, std::string job) {
    UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
    if (!stop)
        return Error::from_errno(errno, "eventfd for the guard's watch");
    wire::keep_alive(fd);
    std::jthread t([fd, s = stop.get(), host = std::move(host), job = std::move(job)] {
        watch(fd, s, host, job);
    });
    return GuardFence(std::move(stop), std::move(t));
}

GuardFence::~GuardFence() {
    if (!thread_.joinable())
        return;
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(stop_.get(), &one, sizeof one);
    thread_.join();
}

} // namespace ghost::bsp
