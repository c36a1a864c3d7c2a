// SPDX-License-Identifier: GPL-2.0
// Connections that carry nothing for long by design (bsprun's guard and
// the hub, bsp/bsprun/guard.hpp): noticing that the other end is lost,
// and how.
#pragma once

#include <string>

namespace ghost::bsp::wire {

// TCP keepalive: probes after 2 s of silence, 1 s apart; 3 unanswered
// end the connection. Each end notices a lost peer 3 to 5 s after it went,
// by the phase of its own probes.
void keep_alive(int fd);
// The most one end can notice later than the other (the phases of the
// two ends' probes differ by up to the idle time).
inline constexpr int kKeepAliveSkewMs = 2000;

// How such a connection ended.
struct Loss {
    // True when the peer went silent (keepalive gave up, or no route is
    // left): its host is down or cut off from this one, which cannot be
    // told apart from here. False when the peer's kernel closed the
    // connection: the process ended, and its host still answers.
    bool silent = false;
    std::string why;
};
// The loss of a socket on which poll() reported POLLERR, POLLHUP or
// POLLRDHUP (reads its pending error).
Loss loss_of(int fd);
// Whether a read's or write's errno means silence (as Loss::silent).
bool silent_errno(int err);

} // namespace ghost::bsp::wire
