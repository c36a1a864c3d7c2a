// SPDX-License-Identifier: LGPL-2.1-or-later
// A lazy restart (user engine; Documentation/user-engine.md, "Lazy
// restart"): the restored process runs before its anonymous memory is in.
// Its private anonymous mappings are registered with a userfaultfd, and a
// pager process puts each page in from the image, on the process's first
// touch or in the background, whichever comes first; then it exits.
//
// The image is read in place, so nothing may write it until the pager is
// done: the caller takes a read lease on it first (take_lease()), which
// fails if anyone has it open for writing and makes a later opener for
// writing (or a truncation) wait until the pager has let go. Replacing the
// file (rename over it, unlink) leaves the pager's inode as it was.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <vector>

#include "ghost/fd.hpp"
#include "ghost/image.hpp"
#include "ghost/result.hpp"

namespace ghost::user::lazy {

// A read lease on the image open at fd (read-only), held by its open file
// for as long as anything (the pager's mapping) holds that.
Result<void> take_lease(int fd);

// A userfaultfd for the calling process's memory with the events a pager
// needs (fork, mremap, MADV_DONTNEED, munmap). Made by the process that is
// to become the image, before it takes the image's credentials: the kernel
// serves faults taken inside system calls only for a privileged creator
// (CAP_SYS_PTRACE, or vm.unprivileged_userfaultfd = 1), and the fork event
// needs CAP_SYS_PTRACE whatever the sysctl.
Result<UniqueFd> open_uffd();

// Pages of the image and where they go, sorted by address.
struct Piece {
    std::uint64_t addr = 0;
    std::span<const std::byte> data; // whole pages
};

// Registers [start, end) for missing-page faults.
Result<void> register_range(int uffd, std::uint64_t start, std::uint64_t end);

// Starts the pager for target (the caller, about to take img's
// credentials; lazy_start.cpp): forks it, orphaned, with every descriptor
// of the caller's closed; it takes img's credentials and is not dumpable.
// Then the userfaultfd is made (open_uffd()) and handed to it, and the
// caller keeps none. pieces (in the caller's memory, inherited) are every
// page the image has, sorted. Returns the caller's end of their link, for
// hand_over(); once every copy of it is closed (the restorer is done), the
// pager pushes in the background what was not touched.
Result<UniqueFd> start_pager(const image::Image& img, pid_t target, std::span<const Piece> pieces);

// From the restorer, once target's memory is mapped (empty) and before
// anything can touch it: the pager registers the mappings of img.vmas at
// these indexes and will fill them from the pieces they hold. If it fails,
// or has ended, the error says why.
Result<void> hand_over(int link, std::span<const std::uint32_t> vmas);

// The pager's serving life (lazy.cpp), until every piece is in or the
// process is gone, then it exits. If it fails, it kills target and its
// descendants, whose memory it was to complete.
[[noreturn]] void serve_pages(UniqueFd uffd, pid_t target, UniqueFd restorer,
                              std::vector<Piece> pieces);

} // namespace ghost::user::lazy
