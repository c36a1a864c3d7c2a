// SPDX-License-Identifier: GPL-2.0
// A subprocess with both output streams read to their end (poll), then
// reaped by its pid.
#include "run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace bsptest {

Run run(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    int o[2], e[2];
    if (::pipe2(o, O_CLOEXEC) != 0 || ::pipe2(e, O_CLOEXEC) != 0)
        std::abort();
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(o[1], 1);
        ::dup2(e[1], 2);
        for (const auto& kv : env)
            ::putenv(const_cast<char*>(kv.c_str()));
        std::vector<char*> av;
        for (const auto& a : argv)
            av.push_back(const_cast<char*>(a.c_str()));
        av.push_back(nullptr);
        ::execv(av[0], av.data());
        ::_exit(127);
    }
    ::close(o[1]);
    ::close(e[1]);
    Run r;
    bool oo = true, eo = true;
    while (oo || eo) {
        pollfd f[2] = {{o[0], POLLIN, 0}, {e[0], POLLIN, 0}};
        if (::poll(f, 2, -1) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; ++i) {
            if (!(f[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[4096];
            const ssize_t n = ::read(f[i].fd, buf, sizeof buf);
            if (n <= 0) {
                (i == 0 ? oo : eo) = false;
                f[i].fd = -1;
                continue;
            }
            (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
        }
        if (!oo)
            ::close(o[0]), o[0] = -1;
        if (!eo)
            ::close(e[0]), e[0] = -1;
    }
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

} // namespace bsptest
