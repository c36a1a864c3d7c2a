// SPDX-License-Identifier: GPL-2.0
// bsprun --hosts: every VP writes its stdout and stderr to regular files in
// the job directory (a pipe cannot move between hosts); bsprun follows
// them and copies what they gain to its own stdout and stderr.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ghost/fd.hpp"
#include "ghost/result.hpp"

namespace ghost::bsp {

// One read(2) of at most 64 KiB from FROM, written whole to TO (a failed
// write drops the rest: bsprun's own output is gone). Returns what read(2)
// returned: bytes, 0 at the end, -1 with errno (EINTR, EAGAIN, ...).
long relay_chunk(int from, int to);

class JobOutput {
  public:
    // dir: the job directory, made (mkdtemp under /tmp) when empty and
    // removed again at the end; a given one is kept with the files.
    static Result<JobOutput> open(std::string dir, int nprocs);
    JobOutput(JobOutput&& o) noexcept
        : dir_(std::move(o.dir_)), made_(std::exchange(o.made_, false)), kept_(o.kept_),
          nprocs_(o.nprocs_), files_(std::move(o.files_)), timer_(std::move(o.timer_)) {}
    JobOutput& operator=(JobOutput&&) = delete;
    ~JobOutput();

    const std::string& dir() const { return dir_; }
    // Whether a directory made here stays at the end (a checkpoint names
    // it); by default it is removed.
    void keep(bool k) { kept_ = k; }
    // DIR/vp<N>.out and .err: what a VP's fds 1 and 2 are opened on.
    std::string path(int vp, bool err) const;
    // A timer descriptor (readable every 50 ms) to poll; tick() reads it
    // and copies every file's new bytes.
    int timer() const { return timer_.get(); }
    void tick();
    // Copies what the files gained since the last copy.
    void copy();

  private:
    JobOutput() = default;
    std::string dir_;
    bool made_ = false; // by open(), under /tmp
    bool kept_ = false;
    int nprocs_ = 0;
    std::vector<UniqueFd> files_; // vp 0 out, vp 0 err, vp 1 out, ...
    UniqueFd timer_;
};

} // namespace ghost::bsp
