// SPDX-License-Identifier: GPL-2.0
// bsprun --at-superstep: a command run at a barrier (at_superstep.hpp).
#include "at_superstep.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "ghost/fd.hpp"

extern char** environ;

namespace ghost::bsp {

Result<SuperstepCommand> parse_at_superstep(std::string_view spec) {
    const auto colon = spec.find(':');
    if (colon == std::string_view::npos || colon == 0)
        return Error::from_errno(EINVAL,
                                 fmt::format("--at-superstep '{}': expected S:COMMAND", spec));
    SuperstepCommand c;
    const char* first = spec.data();
    const char* last = spec.data() + colon;
    const auto [ptr, ec] = std::from_chars(first, last, c.superstep);
    if (ec != std::errc{} || ptr != last || c.superstep < 1)
        return Error::from_errno(EINVAL,
                                 fmt::format("--at-superstep '{}': the superstep '{}' is not an "
                                             "integer of at least 1",
                                             spec, spec.substr(0, colon)));
    c.command = std::string(spec.substr(colon + 1));
    if (c.command.empty())
        return Error::from_errno(EINVAL,
                                 fmt::format("--at-superstep '{}': the command is empty", spec));
    return c;
}

Result<int> run_superstep_command(const SuperstepCommand& c, std::string_view job) {
    const std::string step = std::to_string(c.superstep);
    // The child's environment, made before fork (the child only execs).
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string_view v(*e);
        if (!v.starts_with("GHOST_BSP_JOB=") && !v.starts_with("GHOST_BSP_SUPERSTEP="))
            env.emplace_back(v);
    }
    env.push_back(fmt::format("GHOST_BSP_JOB={}", job));
    env.push_back(fmt::format("GHOST_BSP_SUPERSTEP={}", step));
    std::vector<char*> envp;
    for (auto& e : env)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::array<const char*, 4> argv{"sh", "-c", c.command.c_str(), nullptr};
    const UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devnull)
        return Error::from_errno(errno, fmt::format("open /dev/null: {}", std::strerror(errno)));
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0)
        return Error::from_errno(errno, fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        if (::dup2(devnull.get(), 0) < 0 || ::dup2(2, 1) < 0)
            ::_exit(126);
        ::close_range(3, ~0U, 0);
        ::execve("/bin/sh", const_cast<char* const*>(argv.data()), envp.data());
        static const char msg[] = "bsprun: --at-superstep: exec /bin/sh failed\n";
        [[maybe_unused]] auto w = ::write(2, msg, sizeof msg - 1);
        ::_exit(127);
    }
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return Error::from_errno(
                errno, fmt::format("waitpid of its shell (pid {}): {}", pid, std::strerror(errno)));
    return st;
}

std::vector<int> SuperstepCommands::barrier(std::uint64_t superstep,
                                            std::span<const VpStats> stats) {
    std::vector<int> moves = inner_.barrier(superstep, stats);
    for (const auto& c : commands_) {
        if (c.superstep != superstep + 1)
            continue;
        std::fprintf(stderr, "bsprun: before superstep %llu: running '%s'\n",
                     static_cast<unsigned long long>(c.superstep), c.command.c_str());
        const auto st = run_superstep_command(c, job_);
        if (!st)
            std::fprintf(stderr,
                         "bsprun: --at-superstep %llu: cannot run '%s': %s; the job "
                         "goes on\n",
                         static_cast<unsigned long long>(c.superstep), c.command.c_str(),
                         st.error().what().c_str());
        else if (*st != 0)
            std::fprintf(stderr, "bsprun: --at-superstep %llu: '%s' %s %d; the job goes on\n",
                         static_cast<unsigned long long>(c.superstep), c.command.c_str(),
                         WIFSIGNALED(*st) ? "was killed by signal" : "exited with status",
                         WIFSIGNALED(*st) ? WTERMSIG(*st) : WEXITSTATUS(*st));
    }
    return moves;
}

} // namespace ghost::bsp
