// SPDX-License-Identifier: GPL-2.0
// migd: the per-host ghost daemon. At this stage it serves its local control
// socket (ping, engine); migration and load balancing build on it.
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "server.hpp"

int main(int argc, char** argv) {
    CLI::App app{"migd - per-host ghost daemon: local control socket for ghostctl and "
                 "runtimes",
                 "migd"};
    app.footer("Protocol: one JSON object per line, e.g. {\"op\":\"ping\"}; see "
               "Documentation/migd-protocol.md.\nOnly root and the daemon's own user may "
               "connect. Stops on SIGINT or SIGTERM and removes its socket.");
    app.set_version_flag("--version", std::string(GHOST_VERSION));

    migd::ServerConfig cfg;
    cfg.socket_path = "/run/ghost/migd.sock";
    cfg.ctx.device = "/dev/ghost";
    app.add_option("--socket", cfg.socket_path, "control socket path (default /run/ghost/migd.sock)")
        ->type_name("PATH");
    app.add_option("--device", cfg.ctx.device, "ghost.ko device node (default /dev/ghost)")
        ->type_name("PATH");
    try {
        app.parse(argc, argv);
    } catch (const CLI::Success& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        fmt::print(stderr, "migd: {}\nRun 'migd --help' for usage.\n", e.what());
        return 2;
    }

    auto r = migd::serve(cfg);
    if (!r) {
        fmt::print(stderr, "migd: {}\n", r.error().what());
        return 1;
    }
    return 0;
}
