// SPDX-License-Identifier: GPL-2.0
// bsp-relay: a BSP job's relay on one host (relay.hpp). bsprun starts it
// on the home host; for another host it starts it holding nothing, has
// migd move it there and wakes it with SIGUSR2 (Documentation/bsp.md,
// "Routing through relays"). Its environment:
//   GHOST_BSP_JOB, GHOST_BSP_KEY (hex, scrubbed once read), GHOST_BSP_HUB
//   (the hub's TLS listener), GHOST_BSP_RELAY_HOST (this host's migd name),
//   GHOST_BSP_RELAY_WAIT=1 (wait for SIGUSR2 first), GHOST_BSP_RELAY_ADDRESS
//   (optional: where to listen for other relays).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "relay.hpp"
#include "wakeup.hpp"

using namespace ghost::bsp;

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

} // namespace

int main(int argc, char** argv) {
    if (argc > 1) {
        std::fprintf(argc > 1 && std::strcmp(argv[1], "--help") == 0 ? stdout : stderr,
                     "usage: bsp-relay (no arguments)\n"
                     "A BSP job's relay on one host. bsprun --routing relay starts one per host\n"
                     "of the job; it is not run by hand. See Documentation/bsp.md, \"Routing\n"
                     "through relays\".\n");
        return std::strcmp(argv[1], "--help") == 0 ? 0 : 2;
    }
    relay::Config c;
    c.job = env("GHOST_BSP_JOB");
    c.host = env("GHOST_BSP_RELAY_HOST");
    c.hub_address = env("GHOST_BSP_HUB");
    c.address = env("GHOST_BSP_RELAY_ADDRESS");
    char* key = std::getenv("GHOST_BSP_KEY");
    if (c.job.empty() || c.host.empty() || c.hub_address.empty() || !key) {
        std::fprintf(stderr, "bsp-relay: GHOST_BSP_JOB, GHOST_BSP_RELAY_HOST, GHOST_BSP_HUB and "
                             "GHOST_BSP_KEY must be set (bsprun sets them)\n");
        return 2;
    }
    auto k = wire::key_from_hex(key);
    std::memset(key, 'x', std::strlen(key)); // not in /proc/PID/environ from now on
    ::unsetenv("GHOST_BSP_KEY");
    if (!k) {
        std::fprintf(stderr, "bsp-relay %s: GHOST_BSP_KEY: %s\n", c.host.c_str(),
                     k.error().what().c_str());
        return 2;
    }
    c.key = *k;
    if (env("GHOST_BSP_RELAY_WAIT") == "1") // holds nothing migd cannot move
        wire::wait_for_wakeup([] { std::fflush(nullptr); });
    ::signal(SIGPIPE, SIG_IGN); // a dead peer is an error on the write, not a signal
    auto r = relay::Relay::start(std::move(c));
    if (!r) {
        std::fprintf(stderr, "bsp-relay %s: %s\n", env("GHOST_BSP_RELAY_HOST").c_str(),
                     r.error().what().c_str());
        return 1;
    }
    const int code = (*r)->run();
    std::fflush(nullptr);
    std::_Exit(code); // the other threads are blocked on sockets: no unwinding
}
