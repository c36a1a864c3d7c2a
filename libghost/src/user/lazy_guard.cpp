// SPDX-License-Identifier: LGPL-2.1-or-later
// The lazy pager's guard (lazy_guard.hpp).
#include "user/lazy_guard.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "scm_rights.hpp"
#include "sys.hpp"
#include "user/proc.hpp"

namespace ghost::user::lazy {

namespace {

enum : std::uint32_t { kAdd = 1, kDrop = 2 };

struct Msg {
    std::uint32_t op;
    std::uint32_t id;
};

// The guard's life: holds each space's userfaultfd until the pager drops
// it; the end of the socket with any still held means the pager is gone.
[[noreturn]] void guard(UniqueFd sock, UniqueFd first, pid_t target) {
    ::prctl(PR_SET_NAME, "ghost-pgguard", 0, 0, 0);
    std::map<std::uint32_t, UniqueFd> held;
    held.emplace(0, std::move(first));
    for (;;) {
        Msg m{};
        UniqueFd fd;
        if (recv_with_fd(sock.get(), std::as_writable_bytes(std::span(&m, 1)), &fd) <= 0)
            break;
        if (m.op == kAdd && !fd) {
            // A space it cannot hold is one it cannot guard: fail closed.
            kill_tree_saying(target, fmt::format("the guard of a lazy restart could not take "
                                                 "a fork's userfaultfd (no descriptor left?): "
                                                 "process {} is killed",
                                                 target));
            ::_exit(1);
        }
        if (m.op == kAdd)
            held[m.id] = std::move(fd);
        if (m.op == kDrop) {
            held.erase(m.id);
            (void)::send(sock.get(), &m.id, sizeof(m.id), MSG_NOSIGNAL);
        }
    }
    if (!held.empty()) {
        kill_tree_saying(target, fmt::format("the pager of a lazy restart ended before process "
                                             "{} had all its memory: the process is killed "
                                             "(its missing pages would read as zeros)",
                                             target));
    }
    ::_exit(0);
}

} // namespace

namespace {

int open_pidfd(pid_t pid) {
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

void signal_pidfd(int pidfd, int sig) {
    (void)::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0);
}

// The children of pid, of every one of its threads, as /proc lists them.
std::vector<pid_t> children_of(pid_t pid) {
    std::vector<pid_t> out;
    auto tasks = list_numeric(fmt::format("/proc/{}/task", pid));
    if (!tasks)
        return out;
    for (const auto tid : *tasks) {
        auto kids = read_text(fmt::format("/proc/{}/task/{}/children", pid, tid));
        if (!kids)
            continue;
        const char* c = kids->c_str();
        char* end = nullptr;
        for (long k; (k = std::strtol(c, &end, 10)) > 0; c = end)
            out.push_back(static_cast<pid_t>(k));
    }
    return out;
}

// pid's parent, from its status; 0 if it cannot be read.
pid_t parent_of(pid_t pid) {
    auto status = read_text(fmt::format("/proc/{}/status", pid));
    return status ? static_cast<pid_t>(parse_u64(status_field(*status, "PPid"))) : 0;
}

} // namespace

// Every process of the tree is stopped before any is killed: a parent
// killed first hands its children to init before they are found (and they
// would run on, reading zeros where pages were pending), while a stopped
// one forks no more. The walk goes on until a pass finds no one new. Each
// process is held by a pidfd from when it is found, its parent checked
// after: a pid that ended and was given to another process is never
// signalled.
void kill_tree(pid_t pid) {
    std::map<pid_t, UniqueFd> tree;
    std::vector<std::pair<pid_t, pid_t>> todo{{pid, 0}}; // (pid, its parent; 0: the root)
    for (bool more = true; more;) {
        while (!todo.empty()) {
            const auto [p, parent] = todo.back();
            todo.pop_back();
            if (tree.contains(p))
                continue;
            UniqueFd fd(open_pidfd(p));
            if (!fd || (parent != 0 && parent_of(p) != parent))
                continue; // gone, or another process's pid by now
            signal_pidfd(fd.get(), SIGSTOP);
            tree.emplace(p, std::move(fd));
            for (const pid_t c : children_of(p))
                todo.emplace_back(c, p);
        }
        more = false;
        for (const auto& [p, fd] : tree)
            for (const pid_t c : children_of(p))
                if (!tree.contains(c)) {
                    todo.emplace_back(c, p);
                    more = true;
                }
    }
    for (const auto& [p, fd] : tree)
        signal_pidfd(fd.get(), SIGKILL);
}

// Logged after the kill: a system log that is slow to take the message
// must not keep the tree running on.
void kill_tree_saying(pid_t pid, const std::string& why) {
    kill_tree(pid);
    ::openlog("ghost-lazy-pager", LOG_PID, LOG_USER);
    ::syslog(LOG_ERR, "%s", why.c_str());
}

Result<Guard> Guard::start(int uffd, pid_t target, int also_close) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return Error::from_errno(errno, fmt::format("socketpair: {}", errno_text(errno)));
    UniqueFd mine(sv[0]), theirs(sv[1]);
    const pid_t pid = ::fork();
    if (pid < 0)
        return Error::from_errno(errno,
                                 fmt::format("fork (the pager's guard): {}", errno_text(errno)));
    if (pid == 0) {
        mine.reset();
        if (also_close >= 0)
            ::close(also_close);
        guard(std::move(theirs), UniqueFd(uffd), target);
    }
    return Guard(std::move(mine));
}

int Guard::send(std::uint32_t op, std::uint32_t id, int fd) {
    const Msg m{op, id};
    const int err = send_with_fd(sock_.get(), std::as_bytes(std::span(&m, 1)), fd);
    // A guard that is gone (killed) guards nothing more; the pager goes on.
    return err == EPIPE || err == ECONNRESET ? 0 : err;
}

Result<void> Guard::add(std::uint32_t id, int uffd) {
    if (const int err = send(kAdd, id, uffd); err != 0)
        return Error::from_errno(
            err, fmt::format("handing a fork's userfaultfd to the guard: {}", errno_text(err)));
    return {};
}

void Guard::drop(std::uint32_t id) {
    if (send(kDrop, id, -1) != 0)
        return;
    // Its copy closed before the pager closes its own: otherwise a fault
    // in between would wait on a userfaultfd nobody reads. The answer names
    // the space: one that came late for an earlier drop is skipped.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        pollfd p{sock_.get(), POLLIN, 0};
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) != 1)
            return;
        std::uint32_t done = 0;
        if (::recv(sock_.get(), &done, sizeof(done), MSG_DONTWAIT) != sizeof(done) || done == id)
            return;
    }
}

} // namespace ghost::user::lazy
