// SPDX-License-Identifier: GPL-2.0
// One request to the local migd over its control socket (JSON lines,
// Documentation/migd-protocol.md), shared by ghostctl and bsprun.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ghost::migd_client {

// Called for every progress line {"progress":{"done":N,"total":M}}.
using Progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

// The default control socket (/run/ghost/migd.sock), or $GHOST_MIGD_SOCKET.
std::string_view default_socket();

// Sends req on a new connection to the migd at socket and returns its final
// reply. Errors (no daemon, a closed connection, a malformed reply) come
// back as {"ok":false,"error":"..."}, naming the socket and the cause.
nlohmann::json call(std::string_view socket, const nlohmann::json& req,
                    const Progress& progress = {});

} // namespace ghost::migd_client
