// SPDX-License-Identifier: GPL-2.0
// Runs a program and captures its exit status, stdout and stderr (tests only).
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace testing_util {

struct Outcome {
    int status = -1; // exit status, or 128+signal
    std::string out;
    std::string err;
};

inline std::string slurp(int fd) {
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0)
        s.append(buf, static_cast<std::size_t>(n));
    return s;
}

// Output is read after exit, so it must fit in a pipe; enough for CLI tests.
inline Outcome run(std::vector<std::string> argv) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
        return {};
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
        std::vector<char*> args;
        for (auto& a : argv)
            args.push_back(a.data());
        args.push_back(nullptr);
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    int ws = 0;
    ::waitpid(pid, &ws, 0);
    Outcome o;
    o.out = slurp(out[0]);
    o.err = slurp(err[0]);
    ::close(out[0]);
    ::close(err[0]);
    o.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    return o;
}

} // namespace testing_util
