// SPDX-License-Identifier: GPL-2.0
// start_helper(): a relay or the guard, started here and placed by migd.
#include "helper.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "migd_client.hpp"
#include "output.hpp"

namespace ghost::bsp {

using nlohmann::json;

namespace {

// Whether pid catches SIGUSR2 yet (/proc/PID/status, SigCgt): then it has
// it blocked and waits for it, and a wake-up after the move cannot kill it.
bool catches_wakeup(pid_t pid) {
    std::FILE* f = std::fopen(fmt::format("/proc/{}/status", pid).c_str(), "re");
    if (!f)
        return false;
    char line[256];
    unsigned long long mask = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "SigCgt: %llx", &mask) == 1)
            break;
    std::fclose(f);
    return (mask >> (SIGUSR2 - 1)) & 1;
}

void reap(pid_t pid) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
}

} // namespace

Result<HelperProc> start_helper(HostsMover& mover, const std::string& host, const std::string& log,
                                const std::vector<std::string>& argv,
                                const std::vector<std::pair<std::string, std::string>>& env,
                                const std::string& what) {
    const pid_t c = ::fork();
    if (c < 0)
        return Error::from_errno(errno, fmt::format("{}: fork: {}", what, std::strerror(errno)));
    if (c == 0) {
        const int in = ::open("/dev/null", O_RDONLY);
        const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (in < 0 || out < 0)
            ::_exit(127);
        ::dup2(in, 0);
        ::dup2(out, 1);
        ::dup2(out, 2);
        ::close_range(3, ~0U, 0); // it holds nothing migd could not carry
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        for (const auto& [k, v] : env)
            ::setenv(k.c_str(), v.c_str(), 1);
        std::vector<char*> av;
        for (const auto& a : argv)
            av.push_back(const_cast<char*>(a.c_str()));
        av.push_back(nullptr);
        ::execv(av[0], av.data());
        std::fprintf(stderr, "bsprun: cannot run %s: %s\n", av[0], std::strerror(errno));
        ::_exit(127);
    }
    HelperProc h{host, c, {}};
    if (host == mover.home())
        return h;
    // Moved as a VP is placed: by pid through the home migd, then woken
    // through migd's kill by gid, once it waits for that.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!catches_wakeup(c) && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const auto fail = [&](const std::string& why) {
        ::kill(c, SIGKILL);
        reap(c);
        return Error::from_errno(EIO, fmt::format("{}: {} (its log: {})", what, why, log));
    };
    if (!catches_wakeup(c))
        return fail(fmt::format("pid {} did not get ready in 10 s", c));
    const json reply =
        migd_client::call(mover.home_socket(), {{"op", "migrate"}, {"pid", c}, {"to", host}});
    if (!reply.value("ok", false))
        return fail(fmt::format("migd ({}): migrate pid {} to {}: {}", mover.home_socket(), c, host,
                                reply.value("error", "refused")));
    reap(c);
    h.pid = reply.value("pid", -1);
    h.gid = reply.value("gid", "");
    if (auto w = migd_kill(mover.home_socket(), h.gid, SIGUSR2); !w) {
        (void)migd_kill(mover.home_socket(), h.gid, SIGKILL);
        return Error::from_errno(EIO, fmt::format("{} on {} ({}): cannot wake it through migd: "
                                                  "{} (its log: {})",
                                                  what, host, h.gid, w.error().what(), log));
    }
    return h;
}

bool helper_gone(HostsMover& mover, const HelperProc& h) {
    if (h.gid.empty()) {
        int st;
        const pid_t p = ::waitpid(h.pid, &st, WNOHANG);
        return p == h.pid || (p < 0 && errno == ECHILD);
    }
    int status = -1;
    return migd_gone(mover.home_socket(), h.gid, &status);
}

void copy_log_out(const std::string& log) {
    if (UniqueFd fd(::open(log.c_str(), O_RDONLY | O_CLOEXEC)); fd)
        while (relay_chunk(fd.get(), 2) > 0) {
        }
    ::unlink(log.c_str());
}

} // namespace ghost::bsp
