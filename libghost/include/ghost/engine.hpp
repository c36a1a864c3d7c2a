// The Engine interface: one way of turning processes into ghosts and back.
// The kernel engine drives ghost.ko through /dev/ghost; a user-space engine
// (ptrace) comes later for machines that cannot load the module.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ghost/result.hpp"

namespace ghost {

// Feature bits are those of uapi/linux/ghost.h (GHOST_FEAT_*).
using Features = std::uint64_t;

// Names of the bits in f, in bit order; unknown bits as "unknown-bit-N".
std::vector<std::string> feature_names(Features f);

struct EngineInfo {
    std::string engine;   // "kernel"
    std::string version;  // interface version, "major.minor.patch"
    Features features = 0;
    std::uint32_t image_version = 0; // format export writes (0: cannot export)
    std::uint32_t image_min = 0;     // oldest format import reads (0: cannot import)
};

enum class EngineKind { Auto, Kernel };

class Engine {
  public:
    virtual ~Engine() = default;
    virtual std::string_view name() const = 0;
    virtual Result<EngineInfo> info() = 0;

    // Opens the engine of that kind; Auto picks the best one available.
    // device is the kernel engine's device node.
    static Result<std::unique_ptr<Engine>> open(EngineKind kind = EngineKind::Auto,
                                                std::string_view device = default_device);

    static constexpr std::string_view default_device = "/dev/ghost";
};

} // namespace ghost
