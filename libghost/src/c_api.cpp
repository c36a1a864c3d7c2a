// SPDX-License-Identifier: LGPL-2.1-or-later
// The C API (ghost/ghost.h) over the C++ one. Nothing may escape into C:
// every entry point catches everything and turns it into errno + reason.
#include "ghost/ghost.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

#include "ghost/engine.hpp"
#include "ghost/process.hpp"

namespace {

int report(ghost_error* err, int code, const std::string& reason) {
    if (err) {
        err->code = code;
        std::snprintf(err->reason, sizeof(err->reason), "%s", reason.c_str());
    }
    errno = code;
    return -1;
}

int report(ghost_error* err, const ghost::Error& e) {
    return report(err, e.code.value() ? e.code.value() : EIO, e.what());
}

int ok(ghost_error* err) {
    if (err) {
        err->code = 0;
        err->reason[0] = '\0';
    }
    return 0;
}

ghost::Result<std::unique_ptr<ghost::Engine>> engine() {
    const char* dev = std::getenv("GHOST_DEVICE");
    const char* name = std::getenv("GHOST_ENGINE");
    auto kind = ghost::parse_engine_kind(name && *name ? name : "auto");
    if (!kind)
        return kind.error();
    return ghost::Engine::open(*kind, dev && *dev ? dev : ghost::Engine::default_device);
}

// Runs fn, turning any exception into an error report.
template <class Fn> int guarded(ghost_error* err, Fn&& fn) noexcept {
    try {
        return fn();
    } catch (const std::bad_alloc&) {
        return report(err, ENOMEM, "out of memory");
    } catch (const std::exception& e) {
        return report(err, EIO, e.what());
    } catch (...) {
        return report(err, EIO, "unexpected error in libghost");
    }
}

} // namespace

extern "C" {

int ghost_get_features(uint64_t* features, ghost_error* err) {
    return guarded(err, [&] {
        if (!features)
            return report(err, EINVAL, "features is NULL");
        auto e = engine();
        if (!e)
            return report(err, e.error());
        auto info = (*e)->info();
        if (!info)
            return report(err, info.error());
        *features = info->features;
        return ok(err);
    });
}

int ghost_checkpoint_fd(pid_t pid, int fd, unsigned int flags, ghost_error* err) {
    return guarded(err, [&] {
        constexpr unsigned int fates = GHOST_CKPT_LEAVE_RUNNING | GHOST_CKPT_LEAVE_STOPPED;
        if (flags & ~(fates | GHOST_CKPT_COMPRESS) || (flags & fates) == fates)
            return report(err, EINVAL, "unknown or conflicting checkpoint flags");
        auto e = engine();
        if (!e)
            return report(err, e.error());
        ghost::CheckpointOptions o;
        o.fate = (flags & GHOST_CKPT_LEAVE_RUNNING)   ? ghost::Fate::Run
                 : (flags & GHOST_CKPT_LEAVE_STOPPED) ? ghost::Fate::Stop
                                                      : ghost::Fate::Kill;
        o.compress = flags & GHOST_CKPT_COMPRESS;
        auto s = ghost::checkpoint(**e, pid, fd, o);
        return s ? ok(err) : report(err, s.error());
    });
}

int ghost_restart_fd(int fd, pid_t* pid, ghost_error* err) {
    return guarded(err, [&] {
        if (!pid)
            return report(err, EINVAL, "pid is NULL");
        auto e = engine();
        if (!e)
            return report(err, e.error());
        auto p = ghost::restart(**e, fd);
        if (!p)
            return report(err, p.error());
        *pid = *p;
        return ok(err);
    });
}

int ghost_restart_self_fd(int fd, ghost_error* err) {
    return guarded(err, [&] {
        auto e = engine();
        if (!e)
            return report(err, e.error());
        return report(err, ghost::restart_self(**e, fd));
    });
}

int ghost_duplicate(pid_t pid, pid_t* copy, ghost_error* err) {
    return guarded(err, [&] {
        if (!copy)
            return report(err, EINVAL, "copy is NULL");
        auto e = engine();
        if (!e)
            return report(err, e.error());
        auto p = ghost::duplicate(**e, pid);
        if (!p)
            return report(err, p.error());
        *copy = *p;
        return ok(err);
    });
}

const char* ghost_library_version(void) {
    return GHOST_LIBRARY_VERSION;
}

} // extern "C"
