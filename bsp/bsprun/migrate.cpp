// SPDX-License-Identifier: GPL-2.0
// LocalMover: ghost::checkpoint (Fate::Kill) into a pipe and ghost::restart
// (stopped) from it, as migd's export_to/import_from pair them.
#include "migrate.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "ghost/process.hpp"

namespace ghost::bsp {

Result<pid_t> LocalMover::move(int vp, pid_t pid, std::uint64_t superstep) {
    (void)superstep;
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0)
        return Error::from_errno(errno, fmt::format("pipe: {}", std::strerror(errno)));
    UniqueFd rd(p[0]), wr(p[1]);
    ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);

    // The copy is rebuilt while the image is written, stopped before its
    // first instruction; the original is killed (by checkpoint's Kill fate)
    // only after commit saw the copy exist.
    Result<pid_t> restored = Error{};
    std::thread restorer([&] {
        RestartOptions o;
        o.stopped = true;
        o.inherit_fds = {{1, out_}, {2, err_}};
        restored = restart(*engine_, rd.get(), o);
        rd.reset();
    });
    bool joined = false;
    CheckpointOptions c;
    c.fate = Fate::Kill;
    c.commit = [&]() -> Result<void> {
        wr.reset();
        restorer.join();
        joined = true;
        if (!restored)
            return Error::from_errno(
                restored.error().code.value(),
                fmt::format("restart of vp {}: {}", vp, restored.error().what()));
        return {};
    };
    auto stats = checkpoint(*engine_, pid, wr.get(), c);
    wr.reset();
    if (!joined)
        restorer.join();
    if (!stats) {
        if (restored) { // our child: its pid cannot be reused before we reap it
            ::kill(*restored, SIGKILL);
            while (::waitpid(*restored, nullptr, 0) < 0 && errno == EINTR) {
            }
        }
        return Error::from_errno(
            stats.error().code.value(),
            fmt::format("checkpoint of vp {} (pid {}): {}", vp, pid, stats.error().what()));
    }
    // The original is gone: reap it (ECHILD if libghost did) and let the
    // copy run.
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    ::kill(*restored, SIGCONT);
    return *restored;
}

std::vector<int> EveryNth::barrier(std::uint64_t superstep, std::span<const VpStats> stats) {
    (void)stats;
    if (auto v = forced_vp(superstep, n_, nprocs_))
        return {*v};
    return {};
}

} // namespace ghost::bsp
