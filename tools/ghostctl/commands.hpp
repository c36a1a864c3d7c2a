// SPDX-License-Identifier: GPL-2.0
// ghostctl's commands; main.cpp wires them to the command line.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ghost/engine.hpp"

namespace ghostctl {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

struct Globals {
    std::string device{ghost::Engine::default_device};
    std::string engine = "auto";
    std::string migd_socket = "/run/ghost/migd.sock"; // or $GHOST_MIGD_SOCKET
};

// Prints "ghostctl: <reason>" on stderr and returns exit_failure.
int fail(const ghost::Error& e);
int fail(const std::string& message);
// Prints "ghostctl: <reason>" and where to find the usage; returns exit_usage.
int usage_fail(const std::string& message);
// A decimal int that is the whole of s (a sign allowed, nothing else
// around it); anything else is nullopt.
std::optional<int> parse_int(std::string_view s);
// A positive decimal pid; anything else (a gid, a name) is nullopt.
std::optional<pid_t> parse_pid(std::string_view s);

// The engine the options ask for, or an error already printed (nullptr).
std::unique_ptr<ghost::Engine> open_engine(const Globals& g);

struct CheckpointArgs {
    std::vector<pid_t> pids; // one, but with --server
    std::string server;      // checkpoint server host (through migd)
    std::string schedule = "one-at-a-time";
    bool json = false;
    std::string output;
    bool leave_running = false;
    bool leave_stopped = false;
    bool compress = false;
    int level = 3;
    std::string parent; // --parent: an incremental image
};

struct RestartArgs {
    std::string input;  // a file, or an image id with --server
    std::string server; // checkpoint server host
    std::string on;     // host to restart on (default: this one)
    bool detach = false;
    bool lazy = false;
    std::vector<std::string> inherit_fds; // "N" or "N:M"
};

struct InspectArgs {
    std::string input;
    bool json = false;
    bool regs = false;
};

struct MonitorArgs {
    bool json = false;
    long count = 0; // 0: until interrupted
};

struct MoveArgs {
    std::string op;     // "migrate" or "dup"
    std::string target; // a local PID, or with --to a GID (HOST-N) wherever it runs
    std::string to;
    bool json = false;
    int precopy = -1; // migrate: 1 --precopy, 0 --no-precopy, -1 migd decides
};

struct ImagesArgs {
    std::string server;
    std::string rm;
    bool json = false;
};

int cmd_check(const Globals& g, bool json);
int cmd_move(const Globals& g, const MoveArgs& a);
int cmd_checkpoint_server(const Globals& g, const CheckpointArgs& a);
int cmd_images(const Globals& g, const ImagesArgs& a);
int cmd_restart_server(const Globals& g, const RestartArgs& a);
int cmd_ps(const Globals& g, bool json);
int cmd_hosts(const Globals& g, bool json);
int cmd_where(const Globals& g, const std::string& gid, bool json);
int cmd_kill(const Globals& g, const std::string& gid, const std::string& sig);
int cmd_checkpoint(const Globals& g, const CheckpointArgs& a);
int cmd_restart(const Globals& g, const RestartArgs& a);
int cmd_dup(const Globals& g, pid_t pid);
int cmd_inspect(const InspectArgs& a);
int cmd_monitor(const MonitorArgs& a);

} // namespace ghostctl
