#include "ghost/kernel_engine.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>

#include <cerrno>

#include <fmt/format.h>
#include <linux/ghost.h>

namespace ghost {

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
        return Error::from_errno(err, fmt::format("cannot open {}: {}", dev,
                                                  std::error_code(err, std::system_category())
                                                      .message()));
    }
}

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
        return Error::from_errno(err, fmt::format("version ioctl on {} failed: {}", device_,
                                                  std::error_code(err, std::system_category())
                                                      .message()));
    }
    EngineInfo info;
    info.engine = std::string(name());
    info.version = fmt::format("{}.{}.{}", v.major, v.minor, v.patch);
    info.features = v.features;
    info.image_version = v.image_version;
    info.image_min = v.image_min;
    return info;
}

} // namespace ghost
