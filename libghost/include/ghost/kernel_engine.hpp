// SPDX-License-Identifier: LGPL-2.1-or-later
// The kernel engine: ioctls on /dev/ghost (ghost.ko).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ghost/engine.hpp"
#include "ghost/fd.hpp"

namespace ghost {

class KernelEngine final : public Engine {
  public:
    // Fails with a sentence that says what to do (module not loaded,
    // permission, not a ghost device).
    static Result<KernelEngine> open(std::string_view device = default_device);

    std::string_view name() const override { return "kernel"; }
    Result<EngineInfo> info() override;
    Result<std::unique_ptr<Ghost>> create(const Backend& backend) override;
    Result<std::unique_ptr<MemoryGhost>> create_memory(std::uint64_t capacity = 0) override;
    const std::string& device() const { return device_; }

  private:
    Result<UniqueFd> make_ghost(const Backend& backend);

    KernelEngine(UniqueFd fd, std::string device)
        : fd_(std::move(fd)), device_(std::move(device)) {}

    UniqueFd fd_;
    std::string device_;
};

} // namespace ghost
