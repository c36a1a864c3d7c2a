// SPDX-License-Identifier: LGPL-2.1-or-later
// Processes that a seize would wait on forever (stuck.hpp).
#include "user/stuck.hpp"

#include <thread>

#include <fmt/format.h>

#include "ghost_policy.h"
#include "sys.hpp"
#include "user/proc.hpp"

namespace ghost::user {

namespace {

// The state letter of /proc/PID/task/TID/stat ('?' if unreadable): after
// the command name, which may hold spaces and parentheses.
char thread_state(pid_t pid, int tid) {
    auto stat = read_text(fmt::format("/proc/{}/task/{}/stat", pid, tid));
    if (!stat)
        return '?';
    const auto close = stat->rfind(')');
    return close != std::string::npos && close + 2 < stat->size() ? (*stat)[close + 2] : '?';
}

// A thread of pid in D, or 0.
int thread_in_d(pid_t pid) {
    auto tids = list_numeric(fmt::format("/proc/{}/task", pid));
    if (!tids)
        return 0;
    for (const int tid : *tids)
        if (thread_state(pid, tid) == 'D')
            return tid;
    return 0;
}

// The cgroup v1 freezer path of pid if that cgroup is FROZEN or FREEZING,
// else "".
std::string frozen_in(pid_t pid) {
    auto cg = read_text(fmt::format("/proc/{}/cgroup", pid));
    if (!cg)
        return {};
    std::size_t at = 0;
    while (at < cg->size()) {
        auto end = cg->find('\n', at);
        if (end == std::string::npos)
            end = cg->size();
        const std::string_view line(cg->data() + at, end - at);
        at = end + 1;
        // "ID:freezer:/path"
        const auto c1 = line.find(':');
        const auto c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
        if (c2 == std::string_view::npos || line.substr(c1 + 1, c2 - c1 - 1) != "freezer")
            continue;
        const std::string path(line.substr(c2 + 1));
        auto state = read_text("/sys/fs/cgroup/freezer" + path + "/freezer.state");
        if (state && (state->rfind("FROZEN", 0) == 0 || state->rfind("FREEZING", 0) == 0))
            return path;
        return {};
    }
    return {};
}

// Where this process sees the cgroup v2 hierarchy's root mounted, or "".
std::string cgroup2_root() {
    auto info = read_text("/proc/self/mountinfo");
    if (!info)
        return {};
    std::size_t at = 0;
    while (at < info->size()) {
        auto end = info->find('\n', at);
        if (end == std::string::npos)
            end = info->size();
        const std::string_view line(info->data() + at, end - at);
        at = end + 1;
        // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - TYPE SOURCE SUPEROPTS"
        const auto dash = line.find(" - ");
        if (dash == std::string_view::npos || line.substr(dash + 3, 8) != "cgroup2 ")
            continue;
        std::string_view f = line.substr(0, dash);
        std::string_view field[5];
        for (auto& x : field) {
            const auto sp = f.find(' ');
            x = f.substr(0, sp);
            f = sp == std::string_view::npos ? std::string_view{} : f.substr(sp + 1);
        }
        if (field[3] == "/" && field[4].find('\\') == std::string_view::npos)
            return std::string(field[4]);
    }
    return {};
}

// The cgroup v2 path of pid if that cgroup is frozen or being frozen
// (cgroup.freeze), else "". Such a process sleeps interruptibly in the
// freezer's trap, from which no ptrace stop comes either.
std::string frozen_in_v2(pid_t pid) {
    auto cg = read_text(fmt::format("/proc/{}/cgroup", pid));
    if (!cg)
        return {};
    const auto at = cg->rfind("0::", 0) == 0 ? 0 : cg->find("\n0::");
    if (at == std::string::npos)
        return {};
    const auto from = at == 0 ? 3 : at + 4;
    const std::string path = cg->substr(from, cg->find('\n', from) - from);
    const std::string root = cgroup2_root();
    if (root.empty() || path == "/")
        return {};
    auto events = read_text(root + path + "/cgroup.events");
    auto freeze = read_text(root + path + "/cgroup.freeze");
    if ((events && events->find("frozen 1") != std::string::npos) ||
        (freeze && freeze->rfind("1", 0) == 0))
        return path;
    return {};
}

} // namespace

Result<void> check_not_stuck(pid_t pid, std::chrono::milliseconds patience) {
    if (const auto cg = frozen_in_v2(pid); !cg.empty()) {
        char reason[GHOST_REASON_LEN];
        const int err = ghost_policy_frozen(pid, cg.c_str(), reason, sizeof(reason));
        return Error::from_errno(-err, reason);
    }
    if (!thread_in_d(pid))
        return {};
    if (const auto cg = frozen_in(pid); !cg.empty()) {
        char reason[GHOST_REASON_LEN];
        const int err = ghost_policy_frozen(pid, cg.c_str(), reason, sizeof(reason));
        return Error::from_errno(-err, reason);
    }
    const auto until = std::chrono::steady_clock::now() + patience;
    int tid = 0;
    while ((tid = thread_in_d(pid)) != 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (tid == 0)
        return {};
    auto wchan = read_text(fmt::format("/proc/{}/task/{}/wchan", pid, tid));
    return Error::from_errno(
        EBUSY,
        fmt::format("thread {} of pid {} has stayed in uninterruptible sleep (D{}) for "
                    "{} ms: it could not be held until the kernel lets it go (a hung "
                    "file system?); try again later",
                    tid, pid, wchan && !wchan->empty() ? ", in " + *wchan : "", patience.count()));
}

} // namespace ghost::user
