// SPDX-License-Identifier: GPL-2.0
// migd's local control protocol: one JSON object per line in each direction.
// Documented in Documentation/migd-protocol.md.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "config.hpp"

namespace migd {

struct Context {
    std::string device; // ghost.ko device node used for engine queries
    // migd.toml as loaded (main() owns it); nullptr in tests without one.
    const Config* config = nullptr;
};

// Answers one request line. Never throws: malformed input gives an error reply.
nlohmann::json handle_request(std::string_view line, const Context& ctx);

} // namespace migd
