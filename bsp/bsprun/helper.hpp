// SPDX-License-Identifier: GPL-2.0
// A helper process of a job on some host: a relay (relays.hpp) or the guard
// (guard.hpp). It starts here, holding nothing but its log; for another
// host migd moves it there (by pid through the home migd) and bsprun wakes
// it with SIGUSR2 through migd's kill by gid, as it places a VP. Its
// program must wait for that first (wire::wait_for_wakeup) when told
// "wait".
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "ghost/result.hpp"
#include "hosts.hpp"

namespace ghost::bsp {

struct HelperProc {
    std::string host;
    pid_t pid = -1;
    std::string gid; // migd's, once it moved the helper (empty: bsprun's child)
};

// Runs argv (argv[0] a path) with env added, stdin /dev/null and stdout
// and stderr appended to log; for a host other than mover.home(), moves
// it there and wakes it. what names it in errors ("the relay for h2").
// On an error the process is killed (here or through migd).
Result<HelperProc> start_helper(HostsMover& mover, const std::string& host, const std::string& log,
                                const std::vector<std::string>& argv,
                                const std::vector<std::pair<std::string, std::string>>& env,
                                const std::string& what);

// Whether the helper has exited (our child reaped, or migd says so).
bool helper_gone(HostsMover& mover, const HelperProc& h);

// Once the helper is gone: what it wrote in log goes to bsprun's stderr,
// and the log is removed.
void copy_log_out(const std::string& log);

} // namespace ghost::bsp
