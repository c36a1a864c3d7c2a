// SPDX-License-Identifier: GPL-2.0
// ghostctl's commands; main.cpp wires them to the command line.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "ghost/engine.hpp"

namespace ghostctl {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

struct Globals {
    std::string device{ghost::Engine::default_device};
    std::string engine = "auto";
};

// Prints "ghostctl: <reason>" on stderr and returns exit_failure.
int fail(const ghost::Error& e);
int fail(const std::string& message);

// The engine the options ask for, or an error already printed (nullptr).
std::unique_ptr<ghost::Engine> open_engine(const Globals& g);

struct CheckpointArgs {
    pid_t pid = 0;
    std::string output;
    bool leave_running = false;
    bool leave_stopped = false;
    bool compress = false;
    int level = 3;
};

struct RestartArgs {
    std::string input;
    bool detach = false;
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

int cmd_check(const Globals& g, bool json);
int cmd_checkpoint(const Globals& g, const CheckpointArgs& a);
int cmd_restart(const Globals& g, const RestartArgs& a);
int cmd_dup(const Globals& g, pid_t pid);
int cmd_inspect(const InspectArgs& a);
int cmd_monitor(const MonitorArgs& a);

} // namespace ghostctl
