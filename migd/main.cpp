// SPDX-License-Identifier: GPL-2.0
// migd: the per-host ghost daemon. Serves its local control socket (ghostctl,
// runtimes) and, when migd.toml names TLS files, listens for peer migds
// (mutual TLS 1.3). See migd(8).
#include <sys/resource.h>

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "config.hpp"
#include "daemon.hpp"
#include "listener.hpp"
#include "server.hpp"

namespace {

constexpr const char* default_config = "/etc/ghost/migd.toml";

// One line per event on stderr, naming the host; the time is left to
// journald when it is the one reading (it sets JOURNAL_STREAM).
void setup_log(const std::string& host, const std::string& level) {
    auto logger = spdlog::stderr_logger_mt("migd");
    const bool journald = std::getenv("JOURNAL_STREAM") != nullptr;
    logger->set_pattern(
        fmt::format("{}migd[{}] %l: %v", journald ? "" : "%Y-%m-%d %H:%M:%S.%e ", host));
    logger->set_level(spdlog::level::from_str(level));
    logger->flush_on(spdlog::level::trace);
    spdlog::set_default_logger(logger);
}

std::string bytes_or(std::uint64_t v, const char* none) {
    return v ? fmt::format("{} bytes", v) : none;
}

void print_summary(const migd::Config& c, const migd::TlsContext* tls) {
    fmt::print("config: {}\n", c.source);
    fmt::print("host: {} (peers connect to {}:{})\n", c.host, c.listen, c.port);
    fmt::print("socket: {}\nstate: {}\n", c.socket, c.state_dir);
    fmt::print("engine: {} (device {}, restore stub {})\n", c.engine, c.device,
               c.restore_stub.empty() ? "libghost's default" : c.restore_stub);
    if (tls)
        fmt::print("tls: CA {}, certificate {} (names {}), key {}\n", c.tls_ca, c.tls_cert,
                   tls->own_name(), c.tls_key);
    else
        fmt::print("tls: none: peer operations are disabled\n");
    fmt::print("peers:{}\n", c.peers.empty() ? " none" : "");
    for (const auto& p : c.peers)
        fmt::print("  {} at {}:{}\n", p.name, p.address, p.port);
    if (c.server_dir.empty())
        fmt::print("checkpoint server: no\n");
    else
        fmt::print("checkpoint server: {} (quota {})\n", c.server_dir,
                   bytes_or(c.server_max_bytes, "none"));
    fmt::print("limits: allow_root {}, max_image_bytes {}, max_transfers {}, io_timeout_ms {}, "
               "forget_exited_s {}\n",
               c.allow_root, bytes_or(c.max_image_bytes, "none"), c.max_transfers, c.io_timeout_ms,
               c.forget_exited_s ? std::to_string(c.forget_exited_s) : "never");
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"migd - per-host ghost daemon: local control socket for ghostctl and "
                 "runtimes, mutual-TLS listener for peer migds",
                 "migd"};
    app.footer("Configuration: migd.toml (see migd(8)). Local protocol: one JSON object per "
               "line, e.g. {\"op\":\"ping\"}; see Documentation/migd-protocol.md.\nLocal "
               "users act only on their own processes (SO_PEERCRED); peers need a certificate "
               "of the cluster CA (ghost-ca(1)). Stops on SIGINT or SIGTERM.");
    app.set_version_flag("--version", std::string(GHOST_VERSION));

    std::string config_path, socket, device, state_dir, log_level = "info";
    bool check = false;
    app.add_option("--config", config_path,
                   fmt::format("migd.toml to read (default {} if it exists, else built-in "
                               "defaults)",
                               default_config))
        ->type_name("FILE");
    app.add_option("--socket", socket, "control socket path, overriding [paths] socket")
        ->type_name("PATH");
    app.add_option("--device", device, "ghost.ko device node, overriding [engine] device")
        ->type_name("PATH");
    app.add_option("--state-dir", state_dir,
                   "journal and location table, overriding [paths] "
                   "state_dir")
        ->type_name("DIR");
    app.add_flag("--check-config", check,
                 "read the config and the TLS files, print a summary and exit (0: valid)");
    app.add_option("--log-level", log_level, "trace, debug, info (default), warn, error")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
    try {
        app.parse(argc, argv);
    } catch (const CLI::Success& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        fmt::print(stderr, "migd: {}\nRun 'migd --help' for usage.\n", e.what());
        return 2;
    }

    // A thread and descriptors per connection, a pidfd per process it
    // kills, a file per journal read: out of descriptors, a journal entry
    // cannot be read, and that must not be what decides a migration. The
    // soft limit goes to the hard one (the processes migd restores get
    // their images' own limits).
    if (rlimit n{}; ::getrlimit(RLIMIT_NOFILE, &n) == 0 && n.rlim_cur < n.rlim_max) {
        n.rlim_cur = n.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &n);
    }

    if (config_path.empty() && std::filesystem::exists(default_config))
        config_path = default_config;
    auto loaded = config_path.empty() ? migd::parse_config("", "built-in defaults")
                                      : migd::load_config(config_path);
    if (!loaded) {
        fmt::print(stderr, "migd: {}\n", loaded.error().what());
        return 1;
    }
    migd::Config cfg = std::move(*loaded);
    if (!socket.empty())
        cfg.socket = socket;
    if (!device.empty())
        cfg.device = device;
    if (!state_dir.empty())
        cfg.state_dir = state_dir;

    std::shared_ptr<migd::TlsContext> tls;
    if (!cfg.tls_ca.empty()) {
        auto t = migd::load_tls(cfg);
        if (!t) {
            fmt::print(stderr, "migd: {}\n", t.error().what());
            return 1;
        }
        tls = *t;
    }
    if (check) {
        print_summary(cfg, tls.get());
        return 0;
    }

    setup_log(cfg.host, log_level);
    // Before any thread: SIGINT and SIGTERM go to serve()'s signalfd only,
    // and a vanished peer does not kill the daemon.
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &mask, nullptr);
    ::signal(SIGPIPE, SIG_IGN);

    // The cluster operations (daemon.cpp): they read the journal and the
    // location table in state_dir and finish or roll back what was in
    // flight before anything is served.
    migd::Daemon daemon(cfg, tls);
    if (auto r = daemon.start(); !r) {
        spdlog::error("{}", r.error().what());
        return 1;
    }
    migd::ServerConfig server;
    server.socket_path = cfg.socket;
    server.ctx.device = cfg.device;
    server.ctx.daemon = &daemon;
    server.max_clients = cfg.max_clients;
    server.max_clients_per_user = cfg.max_clients_per_user;

    std::unique_ptr<migd::Listener> listener;
    if (tls) {
        auto handler = [&daemon](std::unique_ptr<migd::Channel> ch) {
            daemon.serve_peer(std::move(ch));
        };
        auto l = migd::Listener::start(cfg, tls, handler);
        if (!l) {
            spdlog::error("{}", l.error().what());
            return 1;
        }
        listener = std::move(*l);
        spdlog::info("listening for peers on {}:{} as {} ({} peers in {})", cfg.listen, cfg.port,
                     tls->own_name(), cfg.peers.size(), cfg.source);
    } else {
        spdlog::warn("no [tls] in {}: peer operations are disabled", cfg.source);
    }
    spdlog::info("control socket {}", cfg.socket);

    auto r = migd::serve(server);
    if (listener)
        listener->stop();
    daemon.stop();
    if (!r) {
        spdlog::error("{}", r.error().what());
        return 1;
    }
    spdlog::info("stopped");
    return 0;
}
