// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ghost/kernel_engine.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <linux/ghost.h>

#include "ghost/c/export_target.h"
#include "ghost/c/restore_self.h"
#include "kernel_snapshot.hpp"
#include "sys.hpp"
#include "user/tracee.hpp"

namespace ghost {

Error detail::ioctl_error(int err, const char* reason, std::string_view what) {
    if (reason[0])
        return Error::from_errno(err, std::string(reason, strnlen(reason, GHOST_REASON_LEN)));
    return Error::from_errno(err, fmt::format("{} failed: {}", what, errno_text(err)));
}

namespace {

Error open_error(int err, std::string_view dev) {
    switch (err) {
    case ENOENT:
        return Error::from_errno(err, fmt::format("{} does not exist: the ghost kernel module is "
                                                  "not loaded (load ghost.ko first)",
                                                  dev));
    case EACCES:
    case EPERM:
        return Error::from_errno(err, fmt::format("permission denied opening {}: it is root-only "
                                                  "unless ghost.ko was loaded with group=GID",
                                                  dev));
    case ENXIO:
    case ENODEV:
        return Error::from_errno(
            err, fmt::format("{} exists but no driver answers: ghost.ko was unloaded", dev));
    default:
        return Error::from_errno(err, fmt::format("cannot open {}: {}", dev, errno_text(err)));
    }
}

// Opening the target's pidfd or /proc/PID/mem failed: the access check.
Error target_error(int err, pid_t pid, std::string_view step) {
    if (err == ESRCH || err == ENOENT)
        return Error::from_errno(ESRCH, fmt::format("no process {}", pid));
    if (err == EACCES || err == EPERM)
        return Error::from_errno(
            EPERM, fmt::format("not allowed to export process {}: opening /proc/{}/mem was "
                               "refused (only its owner or root may, and Yama or an LSM may "
                               "forbid even that)",
                               pid, pid));
    return Error::from_errno(
        err, fmt::format("exporting process {}: {} failed: {}", pid, step, errno_text(err)));
}

// What every kernel ghost does; Base is Ghost or MemoryGhost.
template <class Base> class KernelGhostBase : public Base {
  public:
    KernelGhostBase(UniqueFd fd, Backend b) : fd_(std::move(fd)), backend_(b) {}

    Result<ExportStats> export_process(pid_t pid, Fate fate) override {
        // A snapshot a dead exporter left would make ghost.ko refuse it as
        // a parent; where it cannot be held for that, ghost.ko says so.
        (void)user::reap_leftover_snapshots(pid);
        // A process that runs on is held only while its state is read.
        if (fate == Fate::Run)
            if (auto r = detail::kernel_snapshot_export(fd_.get(), pid)) {
                if (*r)
                    len_ = (*r)->bytes;
                return std::move(*r);
            }
        ghost_export e{};
        e.size = sizeof(e);
        e.flags = fate == Fate::Run    ? GHOST_EXPORT_RUN
                  : fate == Fate::Stop ? GHOST_EXPORT_STOP
                                       : GHOST_EXPORT_KILL;
        const char* step = "";
        if (ghost_export_target_open(&e, pid, &step) != 0)
            return target_error(errno, pid, step);
        const UniqueFd pidfd(e.pidfd), mem(e.mem_fd);
        if (::ioctl(fd_.get(), GHOST_IOC_EXPORT, &e) != 0) {
            const int err = errno;
            if (err == ESRCH && !e.reason[0])
                return Error::from_errno(err, fmt::format("no process {}", pid));
            if (err == EPERM && !e.reason[0])
                return Error::from_errno(
                    err, fmt::format("not allowed to export process {}: only its owner or root "
                                     "may",
                                     pid));
            return detail::ioctl_error(err, e.reason, fmt::format("exporting process {}", pid));
        }
        len_ = e.bytes;
        return ExportStats{e.bytes, e.frozen_ns};
    }

    Error restore_self(const RestoreOptions& o) override {
        if (o.lazy)
            return Error::from_errno(EOPNOTSUPP, "the kernel engine does not restart lazily "
                                                 "(a lazy restart is the user engine's)");
        // ghost.ko checks the image's gids against the caller's own: they
        // must lie among the owner's, or the check would be weaker than
        // asked (the restore stub takes the owner's first).
        if (o.owner) {
            auto among = runs_among_groups_of(*o.owner);
            if (!among)
                return among.error();
            if (!*among)
                return Error::from_errno(
                    EINVAL, fmt::format("the kernel engine checks the image of uid {} against "
                                        "the caller's own gid and groups, which are not all "
                                        "among that user's: take them first (the restore stub "
                                        "does)",
                                        o.owner->uid));
        }
        ghost_import im{};
        const __u32 flags =
            (o.stopped ? GHOST_IMPORT_STOPPED : 0) | (o.owner ? GHOST_IMPORT_OWNER : 0);
        const __u32 owner = o.owner ? o.owner->uid : 0;
        if (o.direct)
            ghost_restore_self_direct_as(fd_.get(), &im, flags, owner);
        else
            ghost_restore_self_as(fd_.get(), &im, flags, owner);
        const int err = errno;
        // A module older than a flag refuses it (an unknown flag: EINVAL; a
        // longer struct with a non-zero tail: E2BIG) without a reason.
        if (o.owner && (err == EINVAL || err == E2BIG) && !im.reason[0])
            return Error::from_errno(EOPNOTSUPP,
                                     "this ghost.ko cannot check whose image it restores (it "
                                     "lacks GHOST_IMPORT_OWNER: load a newer module)");
        if (o.stopped && err == EINVAL && !im.reason[0])
            return Error::from_errno(err, "this ghost.ko cannot restore a process stopped "
                                          "(it lacks GHOST_IMPORT_STOPPED: load a newer module)");
        return detail::ioctl_error(err, im.reason, "importing the image");
    }

    const Backend& backend() const override { return backend_; }

  protected:
    UniqueFd fd_;
    Backend backend_;
    std::uint64_t len_ = 0; // bytes in a memory ghost
};

class KernelGhost final : public KernelGhostBase<Ghost> {
  public:
    using KernelGhostBase::KernelGhostBase;
};

class KernelMemoryGhost final : public KernelGhostBase<MemoryGhost> {
  public:
    using KernelGhostBase::KernelGhostBase;

    Result<void> write(std::span<const std::byte> data) override {
        while (!data.empty()) {
            const ssize_t n = ::write(fd_.get(), data.data(), data.size());
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return Error::from_errno(
                    errno, fmt::format("writing into the memory ghost: {}", errno_text(errno)));
            data = data.subspan(static_cast<std::size_t>(n));
            len_ += static_cast<std::uint64_t>(n);
        }
        return {};
    }

    Result<ImageView> view() override {
        if (len_ == 0)
            return ImageView();
        void* p = ::mmap(nullptr, len_, PROT_READ, MAP_SHARED, fd_.get(), 0);
        if (p == MAP_FAILED)
            return Error::from_errno(
                errno, fmt::format("mapping the memory ghost: {}", errno_text(errno)));
        return ImageView(p, len_);
    }
};

} // namespace

Result<KernelEngine> KernelEngine::open(std::string_view device) {
    const std::string dev(device);
    UniqueFd fd(::open(dev.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd)
        return open_error(errno, dev);
    return KernelEngine(std::move(fd), dev);
}

Result<EngineInfo> KernelEngine::info() {
    ghost_version v{};
    v.size = sizeof(v);
    if (::ioctl(fd_.get(), GHOST_IOC_VERSION, &v) != 0) {
        const int err = errno;
        if (err == ENOTTY)
            return Error::from_errno(err, fmt::format("{} is not a ghost device (it does not "
                                                      "answer the version ioctl)",
                                                      device_));
        return Error::from_errno(
            err, fmt::format("version ioctl on {} failed: {}", device_, errno_text(err)));
    }
    EngineInfo info;
    info.engine = std::string(name());
    info.version = fmt::format("{}.{}.{}", v.major, v.minor, v.patch);
    info.features = v.features;
    info.image_version = v.image_version;
    info.image_min = v.image_min;
    return info;
}

// A ghost object with its resource plugged in.
Result<UniqueFd> KernelEngine::make_ghost(const Backend& b) {
    ghost_create c{};
    c.size = sizeof(c);
    c.flags = GHOST_CREATE_CLOEXEC;
    const int g = ::ioctl(fd_.get(), GHOST_IOC_CREATE, &c);
    if (g < 0)
        return Error::from_errno(
            errno, fmt::format("creating a ghost on {}: {}", device_, errno_text(errno)));
    // Kept away from the low numbers an image's descriptors use, so that it
    // never stands where the image wants an inherited descriptor.
    UniqueFd fd = move_fd_high(UniqueFd(g));

    ghost_plug p{};
    p.size = sizeof(p);
    p.fd = b.fd;
    p.capacity = b.capacity;
    switch (b.kind) {
    case Backend::Kind::Memory:
        p.type = GHOST_RES_MEMORY;
        p.fd = -1;
        break;
    case Backend::Kind::File:
        p.type = GHOST_RES_FILE;
        break;
    case Backend::Kind::Socket:
        p.type = GHOST_RES_NETWORK;
        break;
    }
    if (::ioctl(fd.get(), GHOST_IOC_PLUG, &p) != 0) {
        const int err = errno;
        const char* what = b.kind == Backend::Kind::Memory ? "a memory buffer"
                           : b.kind == Backend::Kind::File ? "a file or pipe"
                                                           : "a connected stream socket";
        return Error::from_errno(err, fmt::format("cannot use fd {} as {} for a ghost: {}", b.fd,
                                                  what, errno_text(err)));
    }
    return fd;
}

Result<std::unique_ptr<Ghost>> KernelEngine::create(const Backend& b) {
    if (b.kind == Backend::Kind::Memory)
        return Error::from_errno(EINVAL, "a memory ghost is made by create_memory()");
    auto fd = make_ghost(b);
    if (!fd)
        return fd.error();
    return std::unique_ptr<Ghost>(std::make_unique<KernelGhost>(std::move(*fd), b));
}

Result<std::unique_ptr<MemoryGhost>> KernelEngine::create_memory(std::uint64_t capacity) {
    const Backend b = Backend::memory(capacity);
    auto fd = make_ghost(b);
    if (!fd)
        return fd.error();
    return std::unique_ptr<MemoryGhost>(std::make_unique<KernelMemoryGhost>(std::move(*fd), b));
}

} // namespace ghost
