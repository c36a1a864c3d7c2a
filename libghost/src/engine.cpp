// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ghost/engine.hpp"

#include <sys/mman.h>
#include <sys/stat.h>

#include <utility>

#include <fmt/format.h>

#include <unistd.h>

#include "ghost/kernel_engine.hpp"
#include "ghost/user_engine.hpp"

namespace ghost {

ImageView::ImageView(const void* addr, std::size_t len) : addr_(addr), len_(len) {}

ImageView::ImageView(ImageView&& o) noexcept
    : addr_(std::exchange(o.addr_, nullptr)), len_(std::exchange(o.len_, 0)) {}

ImageView& ImageView::operator=(ImageView&& o) noexcept {
    if (this != &o) {
        if (addr_)
            ::munmap(const_cast<void*>(addr_), len_);
        addr_ = std::exchange(o.addr_, nullptr);
        len_ = std::exchange(o.len_, 0);
    }
    return *this;
}

ImageView::~ImageView() {
    if (addr_)
        ::munmap(const_cast<void*>(addr_), len_);
}

Result<ExportStats> Ghost::export_incremental(pid_t, Fate, const std::string&) {
    return Error::from_errno(EOPNOTSUPP, "this engine does not track written pages, so it cannot "
                                         "write incremental images (a parent): use the user "
                                         "engine");
}

Result<ExportStats> Ghost::export_precopy(pid_t, Fate, Precopy&) {
    return Error::from_errno(EOPNOTSUPP, "this engine does not track written pages, so it cannot "
                                         "pre-copy: use the user engine");
}

Result<std::unique_ptr<Engine>> Engine::open(EngineKind kind, std::string_view device) {
    // Auto: the module where it is loaded (its device exists), else ptrace.
    if (kind == EngineKind::Auto)
        kind = ::access(std::string(device).c_str(), F_OK) == 0 ? EngineKind::Kernel
                                                                : EngineKind::User;
    switch (kind) {
    case EngineKind::Kernel: {
        auto k = KernelEngine::open(device);
        if (!k)
            return k.error();
        return std::unique_ptr<Engine>(std::make_unique<KernelEngine>(std::move(*k)));
    }
    case EngineKind::User:
        return std::unique_ptr<Engine>(std::make_unique<UserEngine>());
    case EngineKind::Auto:
        break;
    }
    return Error::from_errno(EINVAL, "unknown engine kind");
}

Result<EngineKind> parse_engine_kind(std::string_view s) {
    if (s == "auto")
        return EngineKind::Auto;
    if (s == "kernel")
        return EngineKind::Kernel;
    if (s == "user")
        return EngineKind::User;
    return Error::from_errno(EINVAL,
                             fmt::format("unknown engine '{}' (expected auto, kernel or user)", s));
}

} // namespace ghost
