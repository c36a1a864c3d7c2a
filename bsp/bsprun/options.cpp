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
    add_checkpoint_options(app, o.ck);
}

// Prints the usage error and gives the exit status 2.
int usage(const char* what) {
    std::fprintf(stderr, "bsprun: %s\n", what);
    return 2;
}

// The hosts, the manifest and the program: *code set when it cannot go on.
bool resolve(Plan& p, std::vector<std::string> remaining, int& code) {
    Options& o = p.o;
    if (o.cluster && !o.hosts.empty())
        return (code = usage("--cluster and --hosts: give one of them")), false;
    p.restarting = !o.ck.restart.empty();
    if ((code = checkpoint_usage(o.ck, o.nprocs, !remaining.empty())) != 0)
        return false;
    if (o.cluster) {
        auto all = cluster_hosts(o.migd_socket);
        if (!all) {
            std::fprintf(stderr, "bsprun: --cluster: %s\n", all.error().what().c_str());
            return (code = 1), false;
        }
        o.hosts = *all;
    }
    p.host_list = split_hosts(o.hosts);
    if (!o.hosts.empty() && p.host_list.empty()) {
        std::fprintf(stderr, "bsprun: --hosts '%s' names no host\n", o.hosts.c_str());
        return (code = 2), false;
    }
    if (o.ck.every > 0 && p.host_list.empty() && !p.restarting)
        return (code = usage("--checkpoint-every needs --hosts or --cluster (a checkpointed VP "
                             "must hold no pipe: its output goes to the job directory's "
                             "files)")),
               false;
    if (p.restarting && p.host_list.empty())
        p.host_list.push_back(resolve_home(o.home));
    if (p.restarting) {
        p.manifest = restart_manifest(o.ck, o.migd_socket, o.job_dir, code);
        if (!p.manifest)
            return false;
        o.nprocs = p.manifest->nprocs;
        o.job_dir = p.manifest->job_dir;
    }
    if (!p.multi() && (!o.job_dir.empty() || !o.migd_sockets.empty() || !o.home.empty() ||
                       !o.hub_address.empty()))
        return (code = usage("--job-dir, --migd-sockets, --home and --hub-address go with "
                             "--hosts")),
               false;
    p.cmd = p.restarting ? p.manifest->program : std::move(remaining);
    return true;
}

// The policy and the --at-superstep commands.
bool decide(Plan& p, int& code) {
    Options& o = p.o;
    if (o.dry_run && !p.multi())
        return (code = usage("--dry-run goes with --hosts or --cluster")), false;
    if (o.policy.empty())
        o.policy = p.multi() ? "migbsp" : "none";
    if (o.dry_run && o.policy == "none")
        return (code = usage("--dry-run with --policy none: there is no decision to print")), false;
    auto pol = balance::make_policy(o.policy, balance::Params{});
    if (!pol) {
        std::fprintf(stderr, "bsprun: --policy: %s\n", pol.error().what().c_str());
        return (code = 2), false;
    }
    p.policy = std::move(*pol);
    if (o.policy == "none")
        p.policy.reset();
    for (const auto& spec : o.at_specs) {
        auto c = parse_at_superstep(spec);
        if (!c) {
            std::fprintf(stderr, "bsprun: %s\n", c.error().what().c_str());
            return (code = 2), false;
        }
        p.at_commands.push_back(std::move(*c));
    }
    if (p.cmd.empty())
        return (code = usage("no PROGRAM given (bsprun --help)")), false;
    return true;
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
    if (!resolve(p, app.remaining(), code) || !decide(p, code))
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

} // namespace ghost::bsp
