// SPDX-License-Identifier: GPL-2.0
// bsprun's command line: the options, the rules that tie them together
// (--hosts or --cluster, --restart's manifest, the policy, --at-superstep),
// and the options a rollback passes on to the bsprun it executes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "at_superstep.hpp"
#include "checkpoint.hpp"
#include "ckpt_cli.hpp"
#include "ghost/balance/policy.hpp"

namespace ghost::bsp {

struct Options {
    int nprocs = 0;
    std::string policy; // default: migbsp with --hosts, none on one host
    unsigned every = 0; // --migrate-every
    bool verbose = false, dry_run = false, cluster = false;
    std::string hosts;
    std::vector<std::string> at_specs;
    std::string job_dir, migd_socket, migd_sockets, home, hub_address;
    std::string record;          // --record FILE
    std::string routing = "hub"; // --routing: hub or relay
    bool no_broadcast = false;   // --no-broadcast (with --routing relay)
    CkptOptions ck;
};

// What the options come to once checked.
struct Plan {
    Options o;
    std::vector<std::string> host_list; // empty: one host, no migd
    bool restarting = false;
    std::optional<Manifest> manifest; // --restart's
    std::unique_ptr<balance::Policy> policy;
    std::vector<SuperstepCommand> at_commands;
    std::vector<std::string> cmd; // PROGRAM ARGS...
    bool multi() const { return !host_list.empty(); }
};

// Parses and checks the command line (asking the home migd for --cluster's
// hosts and --restart's manifest). Returns the plan, or the exit status to
// end with after printing why (0 after --help, 2 for a usage error, 1 when
// migd cannot answer).
std::optional<Plan> make_plan(int argc, char** argv, int& code);

// The options a rollback keeps (--migd-socket, --checkpoint-every, --home,
// --policy, ...) for "bsprun --restart JOB --server S --hosts UP ...".
std::vector<std::string> rollback_options(const Options& o, const std::string& home);

// What the guard on host passes to "bsprun --restart JOB --hosts UP"
// (guard.hpp): "--server S" and rollback_options() for host, without the
// lost home's --hub-address, with host's own migd socket when
// --migd-sockets names it (else the --migd-socket given, or none).
std::vector<std::string> guard_restart_options(const Options& o, const std::string& host);

} // namespace ghost::bsp
