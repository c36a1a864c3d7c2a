// SPDX-License-Identifier: LGPL-2.1-or-later
// The lazy pager's guard (lazy.hpp). Once the last holder of a userfaultfd
// closes it, the kernel unregisters its mappings, and a page the pager had
// not yet put in then reads as zeros: a pager that dies early (SIGKILL, the
// OOM killer) would leave the restored process running on memory it never
// had, in silence. The guard is a second process that holds a copy of every
// userfaultfd the pager serves. While it holds them, a fault the pager can
// no longer serve waits; when the pager ends (its end of their socket
// closes) before it let go of every address space, the guard kills the
// restored process and its descendants, logs why, and only then closes
// them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "ghost/fd.hpp"
#include "ghost/result.hpp"

namespace ghost::user::lazy {

// SIGKILL to pid and every descendant (the forks whose memory was served
// from the same pages), each stopped first so that none escapes.
void kill_tree(pid_t pid);

// kill_tree(pid), then saying why in the system log (as ghost-lazy-pager):
// a lazy restart that cannot finish kills its process, never in silence.
void kill_tree_saying(pid_t pid, const std::string& why);

class Guard {
  public:
    // Forks the guard from the pager, whose descriptors it inherits: it
    // keeps uffd (target's address space, id 0) and closes also_close
    // (-1: none), which must not be held beyond the pager.
    static Result<Guard> start(int uffd, pid_t target, int also_close);
    // The userfaultfd of a new address space (a fork of the process). An
    // error when it could not be sent (a guard that is gone is not one: the
    // pager goes on unguarded). A guard that cannot take it (no descriptor
    // left) kills the process tree, as if the pager had ended.
    Result<void> add(std::uint32_t id, int uffd);
    // The space is complete or gone: the guard closes its copy, and
    // answers once it has (the pager then closes its own).
    void drop(std::uint32_t id);

  private:
    explicit Guard(UniqueFd sock) : sock_(std::move(sock)) {}
    int send(std::uint32_t op, std::uint32_t id, int fd); // 0 or errno
    UniqueFd sock_;
};

} // namespace ghost::user::lazy
