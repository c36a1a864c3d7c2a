// SPDX-License-Identifier: LGPL-2.1-or-later
// The user engine: ptrace, process_vm_readv/writev and /proc instead of
// ghost.ko, for machines that cannot load the module. It writes and reads
// the same images (Documentation/user-engine.md says how, and its limits).
#pragma once

#include <cstdint>
#include <string_view>

#include "ghost/engine.hpp"

namespace ghost {

class UserEngine final : public Engine {
  public:
    std::string_view name() const override { return "user"; }
    Result<EngineInfo> info() override;
    Result<std::unique_ptr<Ghost>> create(const Backend& backend) override;
    Result<std::unique_ptr<MemoryGhost>> create_memory(std::uint64_t capacity = 0) override;
};

} // namespace ghost
