#include "ghost/engine.hpp"

#include "ghost/kernel_engine.hpp"

namespace ghost {

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

} // namespace ghost
