// SPDX-License-Identifier: GPL-2.0
// bsprun: starts a BSP job of P virtual processors on this host, runs its
// hub, relays the VPs' output, and exits with the job's status.
#include <fcntl.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "at_superstep.hpp"
#include "checkpoint.hpp"
#include "ckpt_cli.hpp"
#include "ghost/balance/policy.hpp"
#include "ghost/engine.hpp"
#include "help.hpp"
#include "hub.hpp"
#include "migd_client.hpp"
#include "migrate.hpp"
#include "multihost.hpp"
#include "output.hpp"
#include "printing.hpp"
#include "rollback.hpp"
#include "wire.hpp"

using namespace ghost;
using namespace ghost::bsp;

namespace {

std::string make_job_id() {
    std::random_device rd;
    return fmt::format("bsprun-{}-{:08x}", ::getpid(), rd());
}

int status_code(int st) {
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return 1;
}

void copy_out(int from, int to, bool& open) {
    const long n = relay_chunk(from, to);
    if (n == 0 || (n < 0 && errno != EINTR))
        open = false;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"bsprun - run a BSPlib program as P virtual processors (ghost bsp/)", "bsprun"};
    app.footer(kBsprunFooter);
    app.prefix_command(); // everything from PROGRAM on is the program's
    int nprocs = 0;
    std::string policy; // default: migbsp with --hosts, none on one host
    unsigned every = 0;
    bool verbose = false;
    std::string hosts;
    bool cluster = false;
    app.add_option("-n,--nprocs", nprocs,
                   "number of virtual processors P (at least 1); required but with --restart")
        ->check(CLI::Range(1, 4096));
    app.add_option("--policy", policy,
                   "the balance/ policy called at every barrier: none, migbsp, pub-global, "
                   "pub-simple, pub-conservative, pub-prediction, or another name balance/ "
                   "knows (e.g. ghost); default migbsp with --hosts, none on one host (see "
                   "BALANCING)");
    app.add_option("--migrate-every", every,
                   "testing: move one VP at every N-th barrier (see MIGRATION, HOSTS)");
    app.add_flag("-v,--verbose", verbose, "print every barrier's statistics on standard error");
    bool dry_run = false;
    app.add_flag("--dry-run", dry_run,
                 "with --hosts or --cluster: the policy decides at every barrier and each of its "
                 "moves is printed as 'would move', but no VP moves after its placement "
                 "(MigBSP's scenario ii: what the balancer itself costs; see BALANCING)");
    std::vector<std::string> at_specs;
    app.add_option("--at-superstep", at_specs,
                   "run the shell command COMMAND at the barrier before superstep S (S:COMMAND, "
                   "S >= 1; repeatable), while every VP waits there: e.g. start or stop external "
                   "load at the same superstep in every run (see LOAD PROFILES)")
        ->type_name("S:COMMAND")
        ->allow_extra_args(false); // one value per --at-superstep: PROGRAM follows
    std::string job_dir, migd_socket{migd_client::default_socket()}, migd_sockets, home,
        hub_address;
    app.add_option("--hosts", hosts,
                   "run VP i on host i mod N of this comma-separated list of migd host names "
                   "(see HOSTS)");
    app.add_flag("--cluster", cluster,
                 "as --hosts with every host of the migd cluster: this host, then the peers of "
                 "its migd's configuration (see HOSTS)");
    app.add_option("--job-dir", job_dir,
                   "with --hosts: the directory of the VPs' output files (default: a new "
                   "/tmp/bsprun-XXXXXX, removed at the end unless checkpointed); must be at the "
                   "same path on every host");
    app.add_option("--migd-socket", migd_socket,
                   "with --hosts: this host's migd control socket (default $GHOST_MIGD_SOCKET, "
                   "else /run/ghost/migd.sock)");
    app.add_option("--migd-sockets", migd_sockets,
                   "with --hosts: the control socket of another host's migd, with {host} for "
                   "its name (optional: without it a VP on another host is moved by gid "
                   "through this host's migd)");
    app.add_option("--home", home,
                   "with --hosts: this host's migd name (default $GHOST_CLUSTER_HOST, else the "
                   "host name)");
    app.add_option("--hub-address", hub_address,
                   "with --hosts: the IPv4 address the hub listens on for the other hosts' VPs "
                   "(default: the first address of an interface that is up, not loopback)");
    CkptOptions ck;
    add_checkpoint_options(app, ck);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    if (cluster && !hosts.empty()) {
        std::fprintf(stderr, "bsprun: --cluster and --hosts: give one of them\n");
        return 2;
    }
    const bool restarting = !ck.restart.empty();
    if (const int u = checkpoint_usage(ck, nprocs, !app.remaining().empty()); u != 0)
        return u;
    if (cluster) {
        auto all = cluster_hosts(migd_socket);
        if (!all) {
            std::fprintf(stderr, "bsprun: --cluster: %s\n", all.error().what().c_str());
            return 1;
        }
        hosts = *all;
    }
    std::vector<std::string> host_list = split_hosts(hosts);
    if (!hosts.empty() && host_list.empty()) {
        std::fprintf(stderr, "bsprun: --hosts '%s' names no host\n", hosts.c_str());
        return 2;
    }
    if (ck.every > 0 && host_list.empty() && !restarting) {
        std::fprintf(
            stderr, "bsprun: --checkpoint-every needs --hosts or --cluster (a checkpointed VP must "
                    "hold no pipe: its output goes to the job directory's files)\n");
        return 2;
    }
    if (restarting && host_list.empty())
        host_list.push_back(resolve_home(home));
    std::optional<Manifest> manifest;
    if (restarting) {
        int code = 0;
        manifest = restart_manifest(ck, migd_socket, job_dir, code);
        if (!manifest)
            return code;
        nprocs = manifest->nprocs;
        job_dir = manifest->job_dir;
    }
    const bool multi = !host_list.empty();
    if (!multi &&
        (!job_dir.empty() || !migd_sockets.empty() || !home.empty() || !hub_address.empty())) {
        std::fprintf(stderr, "bsprun: --job-dir, --migd-sockets, --home and --hub-address go "
                             "with --hosts\n");
        return 2;
    }
    if (dry_run && !multi) {
        std::fprintf(stderr, "bsprun: --dry-run goes with --hosts or --cluster\n");
        return 2;
    }
    if (policy.empty())
        policy = multi ? "migbsp" : "none";
    if (dry_run && policy == "none") {
        std::fprintf(stderr, "bsprun: --dry-run with --policy none: there is no decision to "
                             "print\n");
        return 2;
    }
    auto pol = balance::make_policy(policy, balance::Params{});
    if (!pol) {
        std::fprintf(stderr, "bsprun: --policy: %s\n", pol.error().what().c_str());
        return 2;
    }
    if (policy == "none")
        pol->reset();
    std::vector<SuperstepCommand> at_commands;
    for (const auto& spec : at_specs) {
        auto c = parse_at_superstep(spec);
        if (!c) {
            std::fprintf(stderr, "bsprun: %s\n", c.error().what().c_str());
            return 2;
        }
        at_commands.push_back(std::move(*c));
    }
    std::vector<std::string> cmd = restarting ? manifest->program : app.remaining();
    if (cmd.empty()) {
        std::fprintf(stderr, "bsprun: no PROGRAM given (bsprun --help)\n");
        return 2;
    }

    const std::string job = restarting ? manifest->job : make_job_id();
    auto listen = wire::listen_abstract(job);
    if (!listen) {
        std::fprintf(stderr, "bsprun: cannot start the hub: %s%s\n", listen.error().what().c_str(),
                     restarting ? " (is the job still running?)" : "");
        return 1;
    }
    std::optional<wire::Key> key;
    if (restarting) {
        auto k = wire::key_from_hex(manifest->key_hex);
        if (!k) {
            std::fprintf(stderr, "bsprun: --restart: the manifest's job key: %s\n",
                         k.error().what().c_str());
            return 1;
        }
        key = *k;
    }
    std::unique_ptr<Engine> engine;
    if (every > 0 && !multi) {
        auto e = Engine::open(EngineKind::Auto);
        if (!e) {
            std::fprintf(stderr, "bsprun: --migrate-every: no ghost engine: %s\n",
                         e.error().what().c_str());
            return 1;
        }
        engine = std::move(*e);
    }
    if (ck.every > 0 && !restarting) {
        if (auto c = check_server(migd_socket, ck.server); !c) {
            std::fprintf(stderr, "bsprun: --checkpoint-every: %s\n", c.error().what().c_str());
            return 1;
        }
    }
    std::optional<MultiHost> mh;
    if (multi) {
        auto m = MultiHost::make(host_list, home, migd_socket, migd_sockets, hub_address, job_dir,
                                 nprocs, key);
        if (!m) {
            std::fprintf(stderr, "bsprun: --hosts: %s\n", m.error().what().c_str());
            return 1;
        }
        mh.emplace(std::move(*m));
        if (ck.every > 0)
            mh->output().keep(true); // a checkpoint names it (none yet: see below)
    }
    int op[2], ep[2];
    if (::pipe2(op, O_CLOEXEC) != 0 || ::pipe2(ep, O_CLOEXEC) != 0) {
        std::fprintf(stderr, "bsprun: pipe: %s\n", std::strerror(errno));
        return 1;
    }
    UniqueFd out_r(op[0]), out_w(op[1]), err_r(ep[0]), err_w(ep[1]);
    std::unique_ptr<LocalMover> local;
    if (engine)
        local = std::make_unique<LocalMover>(std::move(engine), out_w.get(), err_w.get());

    // SIGCHLD through a signalfd: blocked before any thread exists.
    sigset_t chld, oldmask;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &oldmask);
    UniqueFd sfd(::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!sfd) {
        std::fprintf(stderr, "bsprun: signalfd: %s\n", std::strerror(errno));
        return 1;
    }

    char host[256] = "?";
    ::gethostname(host, sizeof host - 1);
    std::vector<pid_t> pids(static_cast<std::size_t>(nprocs), -1);
    std::vector<int> status(static_cast<std::size_t>(nprocs), -1);
    std::fflush(nullptr);
    const auto job_start = std::chrono::steady_clock::now();
    if (restarting) {
        auto r = restore_vps(mh->mover(), *manifest, ck.server, host_list);
        if (!r) {
            std::fprintf(stderr, "bsprun: --restart %s: %s\n", job.c_str(),
                         r.error().what().c_str());
            return 1;
        }
        pids = *r;
        std::fill(status.begin(), status.end(), 0); // they live under migd
    }
    for (int v = 0; v < nprocs && !restarting; ++v) {
        const pid_t c = ::fork();
        if (c < 0) {
            std::fprintf(stderr, "bsprun: fork of vp %d: %s\n", v, std::strerror(errno));
            for (pid_t p : pids)
                if (p > 0)
                    ::kill(p, SIGKILL);
            return 1;
        }
        if (c == 0) {
            sigprocmask(SIG_SETMASK, &oldmask, nullptr);
            if (mh) {
                if (!mh->redirect(v))
                    ::_exit(127);
            } else {
                ::dup2(out_w.get(), 1);
                ::dup2(err_w.get(), 2);
            }
            ::close_range(3, ~0U, 0); // a VP holds only what migration carries
            ::setenv("GHOST_BSP_JOB", job.c_str(), 1);
            ::setenv("GHOST_BSP_PID", std::to_string(v).c_str(), 1);
            ::setenv("GHOST_BSP_NPROCS", std::to_string(nprocs).c_str(), 1);
            if (mh)
                mh->set_env();
            std::vector<char*> av;
            for (auto& a : cmd)
                av.push_back(a.data());
            av.push_back(nullptr);
            ::execvp(av[0], av.data());
            std::fprintf(stderr, "bsprun: vp %d: cannot run %s: %s\n", v, av[0],
                         std::strerror(errno));
            ::_exit(127);
        }
        pids[static_cast<std::size_t>(v)] = c;
        std::fprintf(stderr, "bsprun: vp %d on %s pid %d\n", v, mh ? mh->home().c_str() : host, c);
    }

    Hub hub(std::move(*listen), job, nprocs);
    for (int v = 0; v < nprocs; ++v)
        hub.set_pid(v, pids[static_cast<std::size_t>(v)]);
    EveryNth every_nth(every, nprocs);
    std::unique_ptr<PrintingMover> mover;
    SuperstepCommands at_hook(mh ? mh->hook(std::move(*pol), every, verbose, dry_run)
                                 : static_cast<BarrierHook&>(every_nth),
                              at_commands, job);
    VerboseHook verbose_hook(at_hook, verbose);
    hub.set_hook(&verbose_hook);
    if (local) {
        mover = std::make_unique<PrintingMover>(*local, every);
        hub.set_mover(mover.get());
    }
    int alive = restarting ? 0 : nprocs; // bsprun's children still running
    std::unique_ptr<JobCheckpointer> ckpt;
    if (ck.every > 0) {
        Manifest base = restarting ? *manifest : Manifest{};
        base.job = job;
        base.key_hex = mh->key_hex();
        base.nprocs = nprocs;
        base.program = cmd;
        base.job_dir = mh->output().dir();
        base.home = mh->home();
        base.hub_address = mh->hub_address();
        base.hosts = host_list;
        ckpt = std::make_unique<JobCheckpointer>(mh->mover(), ck.server, ck.every, std::move(base));
        hub.set_checkpointer(ckpt.get());
        std::fprintf(stderr,
                     "bsprun: job %s: a checkpoint at every %u-th barrier on %s (bsprun --restart "
                     "%s --server %s)\n",
                     job.c_str(), ck.every, ck.server.c_str(), job.c_str(), ck.server.c_str());
    }
    if (mh) {
        mh->attach(hub, pids);
        mh->mover().on_child_left([&](int v) {
            status[static_cast<std::size_t>(v)] = 0; // it lives on under migd
            --alive;
        });
    }
    bool out_open = true, err_open = true;
    const auto reap = [&](bool tell_hub) {
        signalfd_siginfo si;
        while (::read(sfd.get(), &si, sizeof si) > 0) {
        }
        for (;;) {
            int st;
            const pid_t p = ::waitpid(-1, &st, WNOHANG);
            if (p <= 0)
                break;
            for (int v = 0; v < nprocs; ++v)
                if (hub.pid(v) == p && status[static_cast<std::size_t>(v)] < 0) {
                    status[static_cast<std::size_t>(v)] = st;
                    --alive;
                    if (tell_hub)
                        hub.process_exited(v, st);
                }
        }
    };
    hub.watch(out_r.get(), [&] {
        copy_out(out_r.get(), 1, out_open);
        if (!out_open)
            hub.unwatch(out_r.get());
    });
    hub.watch(err_r.get(), [&] {
        copy_out(err_r.get(), 2, err_open);
        if (!err_open)
            hub.unwatch(err_r.get());
    });
    hub.watch(sfd.get(), [&] { reap(true); });
    if (verbose)
        std::fprintf(stderr, "bsprun: job %s: %d VPs, hub @%s%s%s\n", job.c_str(), nprocs,
                     wire::socket_name(job).c_str() + 1, mh ? " and TLS on " : "",
                     mh ? mh->hub_address().c_str() : "");
    if (restarting) {
        hub.resume(manifest->hub);
        for (int v = 0; v < nprocs; ++v)
            if (auto w = mh->mover().wake(v, pids[static_cast<std::size_t>(v)]); !w) {
                hub.fail(v, w.error().what(), true);
                break;
            }
    }
    const Outcome outcome = hub.run();
    const double job_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - job_start).count();
    if (mh && policy != "none")
        std::fprintf(stderr, "%s\n", cost_summary(policy, mh->policy_cost(), job_seconds).c_str());
    if (!outcome.ok)
        std::fprintf(stderr, "bsprun: job failed: %s\n", outcome.why.c_str());
    if (ckpt && ckpt->last_complete() == 0)
        mh->output().keep(false); // no checkpoint names the job directory

    // Let the VPs finish (after bsp_end they may still run and print), and
    // copy their output to the end.
    local.reset();
    out_w.reset();
    err_w.reset();
    if (mh)
        mh->finish(outcome.ok); // VPs under migd: until they exited
    while (alive > 0 || out_open || err_open) {
        std::vector<pollfd> fds;
        if (out_open)
            fds.push_back({out_r.get(), POLLIN, 0});
        if (err_open)
            fds.push_back({err_r.get(), POLLIN, 0});
        if (alive > 0)
            fds.push_back({sfd.get(), POLLIN, 0});
        if (mh)
            fds.push_back({mh->output().timer(), POLLIN, 0});
        if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR)
            break;
        for (const auto& f : fds) {
            if (!(f.revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (f.fd == out_r.get())
                copy_out(out_r.get(), 1, out_open);
            else if (f.fd == err_r.get())
                copy_out(err_r.get(), 2, err_open);
            else if (mh && f.fd == mh->output().timer())
                mh->output().tick();
            else
                reap(false);
        }
    }
    if (mh) {
        mh->output().copy(); // the last bytes of bsprun's children
        // A VP that moved exited under a migd: its status is what that migd
        // reaped (unknown, e.g. after the migd restarted: taken as 0).
        for (int v = 0; v < nprocs; ++v)
            if (const int st = mh->mover().exit_status(v); st >= 0)
                status[static_cast<std::size_t>(v)] = st;
    }
    if (!outcome.ok && ck.on_failure == "rollback" && outcome.lost) {
        std::vector<std::string> pass_on = {"--migd-socket",
                                            migd_socket,
                                            "--checkpoint-every",
                                            std::to_string(ck.every),
                                            "--on-failure",
                                            "rollback",
                                            "--home",
                                            mh->home()};
        for (auto [opt, val] : {std::pair{"--migd-sockets", &migd_sockets},
                                {"--hub-address", &hub_address},
                                {"--policy", &policy}})
            if (!val->empty())
                pass_on.insert(pass_on.end(), {opt, *val});
        if (verbose)
            pass_on.push_back("--verbose");
        if (dry_run)
            pass_on.push_back("--dry-run");
        if (every > 0)
            pass_on.insert(pass_on.end(), {"--migrate-every", std::to_string(every)});
        for (const auto& spec : at_specs)
            pass_on.insert(pass_on.end(), {"--at-superstep", spec});
        rollback(mh->mover(), host_list, *ckpt, ck.server, outcome.why,
                 pass_on); // on failure: returns
    }
    if (!outcome.ok) {
        if (outcome.failed_vp >= 0) {
            const int st = status[static_cast<std::size_t>(outcome.failed_vp)];
            const int code = st >= 0 ? status_code(st) : 1;
            return code != 0 ? code : 1;
        }
        return 1;
    }
    for (int v = 0; v < nprocs; ++v)
        if (const int code = status_code(status[static_cast<std::size_t>(v)]); code != 0) {
            std::fprintf(stderr, "bsprun: vp %d %s %d\n", v,
                         WIFSIGNALED(status[static_cast<std::size_t>(v)]) ? "was killed by signal"
                                                                          : "exited with status",
                         WIFSIGNALED(status[static_cast<std::size_t>(v)])
                             ? WTERMSIG(status[static_cast<std::size_t>(v)])
                             : WEXITSTATUS(status[static_cast<std::size_t>(v)]));
            return code;
        }
    return 0;
}
