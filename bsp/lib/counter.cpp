// SPDX-License-Identifier: GPL-2.0
// A VP's user-mode instruction count per superstep (counter.hpp).
#include "counter.hpp"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ghost::bsp::vp {

static_assert(PERF_TYPE_HARDWARE == 0 && PERF_COUNT_HW_INSTRUCTIONS == 1,
              "counter.hpp's defaults are these two");

InstructionCounter::~InstructionCounter() {
    if (fd_ >= 0)
        ::close(fd_);
}

void InstructionCounter::start() {
    if (fd_ >= 0 || refused_)
        return;
    perf_event_attr a;
    std::memset(&a, 0, sizeof(a));
    a.size = sizeof(a);
    a.type = type_;
    a.config = config_;
    // User mode only: what perf_event_paranoid 2 (Debian's default) allows
    // an unprivileged process, and the part of the work that is the
    // program's own.
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    const long fd = ::syscall(SYS_perf_event_open, &a, 0 /* this process */, -1 /* any CPU */,
                              -1 /* no group */, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        refused_ = errno ? errno : ENODEV;
        return;
    }
    fd_ = static_cast<int>(fd);
}

InstructionCounter::Count InstructionCounter::stop() {
    if (fd_ < 0)
        return {0, refused_ ? refused_ : EBADF};
    std::uint64_t n = 0;
    const ssize_t got = ::read(fd_, &n, sizeof(n));
    const int err = got == static_cast<ssize_t>(sizeof(n)) ? 0 : (got < 0 ? errno : EIO);
    ::close(fd_);
    fd_ = -1;
    return {err ? 0 : n, err};
}

} // namespace ghost::bsp::vp
