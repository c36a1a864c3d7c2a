// SPDX-License-Identifier: GPL-2.0
// The VP side of the barrier and of the reconnect path.
#pragma once

namespace ghost::bsp::vp {

// Connects to the job's hub and says HELLO (resumed: after a DETACH,
// possibly in a restarted copy of this process, possibly on another host):
// the abstract socket when this host runs the hub, else the home hub over
// TCP with TLS and the job key.
void connect_hub(bool resumed);
// Closes the connection (TLS close_notify first) and frees its TLS state.
void disconnect_hub();

} // namespace ghost::bsp::vp
