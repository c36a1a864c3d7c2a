// SPDX-License-Identifier: GPL-2.0
// bsprun's command line (Documentation/bsp.md, "bsprun"; bsprun --help).
#include "options.hpp"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "help.hpp"
#include "migd_client.hpp"
#include "multihost.hpp"

namespace ghost::bsp {

namespace {

void add_options(CLI::App& app, Options& o) {
    app.add_option("-n,--nprocs", o.nprocs,
                   "number of virtual processors P (at least 1); required but with --restart")
        ->check(CLI::Range(1, 4096));
    app.add_option("--policy", o.policy,
                   "the balance/ policy called at every barrier: none, migbsp, pub-global, "
                   "pub-simple, pub-conservative, pub-prediction, or another name balance/ "
                   "knows (e.g. ghost); default migbsp with --hosts, none on one host (see "
                   "BALANCING)");
    app.add_option("--migrate-every", o.every,
                   "testing: move one VP at every N-th barrier (see MIGRATION, HOSTS)");
    app.add_flag("-v,--verbose", o.verbose, "print every barrier's statistics on standard error");
    app.add_option("--record", o.record,
                   "write every VP's statistics at every barrier to FILE, one JSON line per "
                   "barrier, for ghost-sim --app replay (see BALANCING)")
        ->type_name("FILE");
    app.add_flag("--dry-run", o.dry_run,
                 "with --hosts or --cluster: the policy decides at every barrier and each of its "
                 "moves is printed as 'would move', but no VP moves after its placement "
                 "(MigBSP's scenario ii: what the balancer itself costs; see BALANCING)");
    app.add_option("--at-superstep", o.at_specs,
                   "run the shell command COMMAND at the barrier before superstep S (S:COMMAND, "
                   "S >= 1; repeatable), while every VP waits there: e.g. start or stop external "
                   "load at the same superstep in every run (see LOAD PROFILES)")
        ->type_name("S:COMMAND")
        ->allow_extra_args(false); // one value per --at-superstep: PROGRAM follows
    app.add_option("--hosts", o.hosts,
                   "run VP i on host i mod N of this comma-separated list of migd host names "
                   "(see HOSTS)");
    app.add_flag("--cluster", o.cluster,
                 "as --hosts with every host of the migd cluster: this host, then the peers of "
                 "its migd's configuration (see HOSTS)");
    app.add_option("--job-dir", o.job_dir,
                   "with --hosts: the directory of the VPs' output files (default: a new "
                   "/tmp/bsprun-XXXXXX, removed at the end unless checkpointed); must be at the "
                   "same path on every host");
    app.add_option("--migd-socket", o.migd_socket,
                   "with --hosts: this host's migd control socket (default $GHOST_MIGD_SOCKET, "
                   "else /run/ghost/migd.sock)");
    app.add_option("--migd-sockets", o.migd_sockets,
                   "with --hosts: the control socket of another host's migd, with {host} for "
                   "its name (optional: without it a VP on another host is moved by gid "
                   "through this host's migd)");
    app.add_option("--home", o.home,
                   "with --hosts: this host's migd name (default $GHOST_CLUSTER_HOST, else the "
                   "host name)");
    app.add_option("--hub-address", o.hub_address,
                   "with --hosts: the IPv4 address the hub listens on for the other hosts' VPs "
                   "(default: the first address of an interface that is up, not loopback)");
    app.add_option("--routing", o.routing,
                   "with --hosts: how puts and messages travel: hub (every superstep's data "
                   "through the hub at home; the default) or relay (a relay per host, PUB's link "
                   "tables: straight to the target's host)")
        ->check(CLI::IsMember({"hub", "relay"}));
    app.add_flag("--no-broadcast", o.no_broadcast,
                 "with --routing relay: after a move tell only the old and the new host's relays "
                 "(others' entries go stale and forward) instead of every relay");
    add_checkpoint_options(app, o.ck);
}

// What resolve() and decide() return when bsprun goes on; any other value
// is the exit status to end with, after saying why.
constexpr int kGoOn = -1;

// Prints "bsprun: WHAT" and gives the exit status code (2: a usage error).
int stop(const std::string& what, int code = 2) {
    std::fprintf(stderr, "bsprun: %s\n", what.c_str());
    return code;
}

// The hosts, the manifest and the program.
int resolve(Plan& p, std::vector<std::string> remaining) {
    Options& o = p.o;
    if (o.cluster && !o.hosts.empty())
        return stop("--cluster and --hosts: give one of them");
    p.restarting = !o.ck.restart.empty();
    if (const int u = checkpoint_usage(o.ck, o.nprocs, !remaining.empty()); u != 0)
        return u;
    if (o.cluster) {
        auto all = cluster_hosts(o.migd_socket);
        if (!all)
            return stop("--cluster: " + all.error().what(), 1);
        o.hosts = *all;
    }
    p.host_list = split_hosts(o.hosts);
    if (!o.hosts.empty() && p.host_list.empty())
        return stop("--hosts '" + o.hosts + "' names no host");
    if (o.ck.every > 0 && p.host_list.empty() && !p.restarting)
        return stop("--checkpoint-every needs --hosts or --cluster (a checkpointed VP must hold "
                    "no pipe: its output goes to the job directory's files)");
    if (p.restarting && p.host_list.empty())
        p.host_list.push_back(resolve_home(o.home));
    if (p.restarting) {
        int code = 1;
        p.manifest = restart_manifest(o.ck, o.migd_socket, o.job_dir, code);
        if (!p.manifest)
            return code;
        o.nprocs = p.manifest->nprocs;
        o.job_dir = p.manifest->job_dir;
    }
    if (!p.multi() && (!o.job_dir.empty() || !o.migd_sockets.empty() || !o.home.empty() ||
                       !o.hub_address.empty() || o.routing != "hub"))
        return stop("--job-dir, --migd-sockets, --home, --hub-address and --routing go with "
                    "--hosts");
    if (o.no_broadcast && o.routing != "relay")
        return stop("--no-broadcast goes with --routing relay");
    p.cmd = p.restarting ? p.manifest->program : std::move(remaining);
    return kGoOn;
}

// The policy and the --at-superstep commands.
int decide(Plan& p) {
    Options& o = p.o;
    if (o.dry_run && !p.multi())
        return stop("--dry-run goes with --hosts or --cluster");
    if (o.policy.empty())
        o.policy = p.multi() ? "migbsp" : "none";
    if (o.dry_run && o.policy == "none")
        return stop("--dry-run with --policy none: there is no decision to print");
    auto pol = balance::make_policy(o.policy, balance::Params{});
    if (!pol)
        return stop("--policy: " + pol.error().what());
    p.policy = std::move(*pol);
    if (o.policy == "none")
        p.policy.reset();
    for (const auto& spec : o.at_specs) {
        auto c = parse_at_superstep(spec);
        if (!c)
            return stop(c.error().what());
        p.at_commands.push_back(std::move(*c));
    }
    if (p.cmd.empty())
        return stop("no PROGRAM given (bsprun --help)");
    return kGoOn;
}

} // namespace

std::optional<Plan> make_plan(int argc, char** argv, int& code) {
    CLI::App app{"bsprun - run a BSPlib program as P virtual processors (ghost bsp/)", "bsprun"};
    app.footer(kBsprunFooter);
    app.prefix_command(); // everything from PROGRAM on is the program's
    Plan p;
    p.o.migd_socket = migd_client::default_socket();
    add_options(app, p.o);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        code = app.exit(e) == 0 ? 0 : 2;
        return std::nullopt;
    }
    code = resolve(p, app.remaining());
    if (code == kGoOn)
        code = decide(p);
    if (code != kGoOn)
        return std::nullopt;
    return p;
}

std::vector<std::string> rollback_options(const Options& o, const std::string& home) {
    std::vector<std::string> pass_on = {"--migd-socket",
                                        o.migd_socket,
                                        "--checkpoint-every",
                                        std::to_string(o.ck.every),
                                        "--on-failure",
                                        "rollback",
                                        "--home",
                                        home};
    for (auto [opt, val] : {std::pair{"--migd-sockets", &o.migd_sockets},
                            {"--hub-address", &o.hub_address},
                            {"--policy", &o.policy}})
        if (!val->empty())
            pass_on.insert(pass_on.end(), {opt, *val});
    pass_on.insert(pass_on.end(), {"--routing", o.routing});
    if (o.no_broadcast)
        pass_on.push_back("--no-broadcast");
    if (o.verbose)
        pass_on.push_back("--verbose");
    if (o.dry_run)
        pass_on.push_back("--dry-run");
    if (o.every > 0)
        pass_on.insert(pass_on.end(), {"--migrate-every", std::to_string(o.every)});
    for (const auto& spec : o.at_specs)
        pass_on.insert(pass_on.end(), {"--at-superstep", spec});
    return pass_on;
}

std::vector<std::string> guard_restart_options(const Options& o, const std::string& host) {
    std::vector<std::string> out = {"--server", o.ck.server};
    const auto pass_on = rollback_options(o, host);
    for (std::size_t i = 0; i < pass_on.size(); ++i) {
        const std::string& a = pass_on[i];
        if (a == "--hub-address" && i + 1 < pass_on.size()) { // the lost host's
            ++i;
            continue;
        }
        if (a == "--migd-socket" && i + 1 < pass_on.size()) {
            // The guard's host's own migd: named by --migd-sockets; else the
            // path given on the command line, taken to be the same on every
            // host; else (this host's environment or the default) none, so
            // that the guard's host uses its own default.
            std::string sock = socket_in(o.migd_sockets, host);
            if (sock.empty())
                sock = o.migd_socket == migd_client::default_socket() ? "" : o.migd_socket;
            if (!sock.empty())
                out.insert(out.end(), {a, sock});
            ++i;
            continue;
        }
        out.push_back(a);
    }
    return out;
}

} // namespace ghost::bsp
