// SPDX-License-Identifier: GPL-2.0
// JobOutput: the job directory's output files, followed with a timer.
#include "output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace ghost::bsp {

Result<JobOutput> JobOutput::open(std::string dir, int nprocs) {
    JobOutput o;
    o.nprocs_ = nprocs;
    if (dir.empty()) {
        char tmpl[] = "/tmp/bsprun-XXXXXX";
        if (!::mkdtemp(tmpl))
            return Error::from_errno(
                errno, fmt::format("mkdtemp /tmp/bsprun-XXXXXX: {}", std::strerror(errno)));
        ::chmod(tmpl, 0755);
        dir = tmpl;
        o.made_ = true;
    } else if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        return Error::from_errno(errno,
                                 fmt::format("--job-dir {}: mkdir: {}", dir, std::strerror(errno)));
    }
    o.dir_ = std::move(dir);
    for (int v = 0; v < nprocs; ++v)
        for (bool err : {false, true}) {
            const std::string p = o.path(v, err);
            // Made empty here, read from here; the VP appends (O_APPEND) on
            // whichever host it runs.
            UniqueFd w(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
            UniqueFd r(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
            if (!w || !r)
                return Error::from_errno(errno, fmt::format("job directory: cannot create {}: {}",
                                                            p, std::strerror(errno)));
            o.files_.push_back(std::move(r));
        }
    o.timer_ = UniqueFd(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    if (!o.timer_)
        return Error::from_errno(errno, fmt::format("timerfd_create: {}", std::strerror(errno)));
    const itimerspec every{{0, 50'000'000}, {0, 50'000'000}};
    ::timerfd_settime(o.timer_.get(), 0, &every, nullptr);
    return o;
}

JobOutput::~JobOutput() {
    if (!made_ || kept_ || dir_.empty())
        return;
    ::unlink((dir_ + "/hub").c_str());
    for (int v = 0; v < nprocs_; ++v)
        for (bool err : {false, true})
            ::unlink(path(v, err).c_str());
    ::rmdir(dir_.c_str());
}

std::string JobOutput::path(int vp, bool err) const {
    return fmt::format("{}/vp{}.{}", dir_, vp, err ? "err" : "out");
}

void JobOutput::tick() {
    std::uint64_t n;
    while (::read(timer_.get(), &n, sizeof n) > 0) {
    }
    copy();
}

long relay_chunk(int from, int to) {
    char buf[65536];
    const ssize_t n = ::read(from, buf, sizeof buf);
    for (ssize_t done = 0; done < n;) {
        const ssize_t w = ::write(to, buf + done, static_cast<std::size_t>(n - done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break; // our own output is gone: drop the rest
        done += w;
    }
    return n;
}

void JobOutput::copy() {
    for (std::size_t i = 0; i < files_.size(); ++i) {
        long n;
        while ((n = relay_chunk(files_[i].get(), i % 2 ? 2 : 1)) > 0 || (n < 0 && errno == EINTR)) {
        }
    }
}

} // namespace ghost::bsp
