// SPDX-License-Identifier: GPL-2.0
// The VP side of the barrier and of the reconnect path.
#pragma once

namespace ghost::bsp::vp {

// Connects to the job's hub on this host and says HELLO (resumed: after a
// DETACH, possibly in a restarted copy of this process).
void connect_hub(bool resumed);
// The SIGUSR2 handler that ends the wait of a detached VP (bsp_begin).
void install_wakeup_handler();

} // namespace ghost::bsp::vp
