// SPDX-License-Identifier: GPL-2.0
// migd's local control server: a Unix stream socket, peers authenticated by
// their kernel-reported credentials (SO_PEERCRED).
#pragma once

#include <string>

#include "control.hpp"
#include "ghost/result.hpp"

namespace migd {

struct ServerConfig {
    std::string socket_path;
    Context ctx;
    unsigned max_clients = 256;         // connections at once
    unsigned max_clients_per_user = 16; // of one uid (root: none of its own)
};

// Serves until SIGINT or SIGTERM, then removes the socket. Fails early (socket
// in use, no permission) with a reason.
ghost::Result<void> serve(const ServerConfig& cfg);

} // namespace migd
