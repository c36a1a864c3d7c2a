#include "ghost/engine.hpp"

#include <sys/mman.h>
#include <sys/stat.h>

#include <utility>

#include <fmt/format.h>

#include "ghost/kernel_engine.hpp"

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

Result<std::unique_ptr<Engine>> Engine::open(EngineKind kind, std::string_view device) {
    switch (kind) {
    case EngineKind::Auto:
    case EngineKind::Kernel: {
        // Only the kernel engine exists so far, so Auto means Kernel.
        auto k = KernelEngine::open(device);
        if (!k)
            return k.error();
        return std::unique_ptr<Engine>(std::make_unique<KernelEngine>(std::move(*k)));
    }
    }
    return Error::from_errno(EINVAL, "unknown engine kind");
}

Result<EngineKind> parse_engine_kind(std::string_view s) {
    if (s == "auto")
        return EngineKind::Auto;
    if (s == "kernel")
        return EngineKind::Kernel;
    return Error::from_errno(EINVAL,
                             fmt::format("unknown engine '{}' (expected auto or kernel)", s));
}

} // namespace ghost
