// SPDX-License-Identifier: GPL-2.0
// migd's local control protocol: one JSON object per line in each direction.
// Documented in Documentation/migd-protocol.md.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "daemon.hpp"

namespace migd {

struct Context {
    std::string device;       // ghost.ko device node used for engine queries
    Daemon* daemon = nullptr; // the cluster operations (none: only ping, engine)
};

// Answers one request line from client who. Never throws: malformed input
// gives an error reply. Long operations send progress lines through emit.
nlohmann::json handle_request(std::string_view line, const Context& ctx, const Client& who = {},
                              const Emit& emit = {});

} // namespace migd
