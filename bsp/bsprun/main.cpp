// SPDX-License-Identifier: GPL-2.0
// bsprun: starts a BSP job of P virtual processors on this host, runs its
// hub, relays the VPs' output, and exits with the job's status.
#include <fcntl.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "ghost/balance/policy.hpp"
#include "ghost/engine.hpp"
#include "hub.hpp"
#include "migd_client.hpp"
#include "migrate.hpp"
#include "multihost.hpp"
#include "output.hpp"
#include "wire.hpp"

using namespace ghost;
using namespace ghost::bsp;

namespace {

constexpr const char* kFooter = R"(SYNOPSIS
  bsprun -n P [--policy NAME] [--migrate-every N] [--verbose] PROGRAM [ARGS...]
  bsprun -n P --hosts H1,H2,... [--job-dir DIR] [--migd-socket PATH]
         [--migd-sockets PATTERN] [--home NAME] [--hub-address ADDR]
         [--policy NAME] [--migrate-every N] [--verbose] PROGRAM [ARGS...]

DESCRIPTION
  bsprun makes a job id, listens on the job's abstract Unix socket
  "@ghost-bsp/<job>" (the hub), and starts P virtual processors (VPs): P
  processes running PROGRAM ARGS with GHOST_BSP_JOB, GHOST_BSP_PID (0..P-1)
  and GHOST_BSP_NPROCS in their environment. The program's bsp_begin()
  connects to the hub; every bsp_sync() is a barrier the hub completes.
  Where each VP runs (vp, host, pid) is printed on standard error. The VPs'
  standard output and error go through pipes that bsprun copies to its own,
  so they keep reaching it after a VP moved.

  A VP that calls bsp_abort(), misuses the library (the message names the
  call and the problem), or dies before bsp_end() ends the job: bsprun kills
  the other VPs (by pid) and prints which VP failed and why.

MIGRATION
  Without --hosts, --migrate-every N moves VP number (s mod P) at barrier s+1 whenever s+1 is
  a multiple of N (s: the superstep that ends there): the hub sends it
  DETACH, the VP closes its socket and waits in sigsuspend() for SIGUSR2,
  bsprun checkpoints it with libghost (the user engine without ghost.ko)
  into a pipe while restarting the copy from the other end, kills the
  original only once the copy exists, and wakes the copy, which reconnects.
  Every move is printed: superstep, vp, old pid -> new pid, why. bsp_pid()
  stays the same; the process id changes. Programs must leave SIGUSR2 to
  the runtime.

HOSTS
  With --hosts, bsprun (the hub) stays on this host, the home host, and the
  VPs start here too; at the first barrier, before its first DELIVER, VP i
  is moved to host H(i mod N) of the list (one already there stays) through
  migd: DETACH, the VP closes its connection, bsprun asks migd to move it
  ({"op":"migrate"}: by pid to this host's --migd-socket for a VP here; for
  a VP on another host by its gid to this host's migd, which forwards the
  request to the host where the VP runs, or by pid to that host's socket
  when --migd-sockets names it), then wakes the copy with SIGUSR2 through
  migd's kill by gid. A VP on another host finds no hub of its job there and
  connects to the home hub over TCP (--hub-address, an ephemeral port) with
  TLS 1.3 authenticated and encrypted by a pre-shared key: 32 random bytes
  bsprun makes per job and gives the VPs in GHOST_BSP_KEY, which the
  library removes from the environment at bsp_begin. A connection without
  the key is refused and the hub says why on standard error.

  A process that holds a pipe or a terminal cannot move, so each VP's stdin
  is /dev/null and its stdout and stderr are the files DIR/vpN.out and
  DIR/vpN.err of the job directory (--job-dir; default a new
  /tmp/bsprun-XXXXXX, removed at the end). bsprun follows them and copies
  what they gain to its own stdout and stderr. DIR must be at the same path
  on every host (a shared filesystem on a real cluster).

  Every move is printed (superstep, vp, from HOST:PID, to HOST:PID, why);
  with --migrate-every N, VP (s mod P) moves on to the next host of the
  list. A VP moved by migd is no longer bsprun's child: its end comes
  through the protocol (bsp_end), and its exit status is taken as 0. A VP
  whose connection drops before bsp_end, or that exits while detached,
  fails the job; the other VPs are killed (here by pid, elsewhere through
  migd by gid). --cluster instead of --hosts takes the list from this
  host's migd ({"op":"hosts"}: this host, then its configured peers, in
  the order of its migd.toml).

BALANCING
  With --hosts, at every barrier after the first the hub's statistics
  become a balance::Observation and the policy (--policy, default migbsp)
  decides; each of its moves is carried out through migd to the host it
  chose among the --hosts and printed as
    end of superstep S: vp V moved from hA:PID to hB:PID (POLICY: WHY)
  and, with --verbose, the numbers behind it. Each host is its own Set with
  one processor. Measured, not configured: a VP's CPU share is its CPU time
  over its computation's wall time; a host's power is 1e9 instructions/s
  times the median share of its VPs (a host without VPs keeps its last
  estimate, at first 1e9), its external load 1 - that share. A VP's
  instructions are its CPU seconds x 1e9 (no perf_event_open), its memory
  its resident size at bsp_sync (64 MiB if unknown), its bytes per Set
  those the hub routed to it (puts, messages, get replies) by the source's
  host. The network: 1e-8 s per byte between different hosts (100 MB/s),
  none within one; a migration costs 0.2 s. On one host a policy has no
  other host to choose and bsprun runs without it. With --dry-run the
  policy is called as usual but its moves are only printed,
    end of superstep S: vp V would move from hA to hB (POLICY: WHY; --dry-run)
  and the VPs stay where they were placed: MigBSP's scenario ii, whose
  time against --policy none (scenario i) is the balancer's own cost, and
  against the same policy without --dry-run (scenario iii) its gain.

ENVIRONMENT
  GHOST_MIGD_SOCKET   this host's migd control socket (--migd-socket)
  GHOST_CLUSTER_HOST  this host's migd name (--home; set by tests/cluster)
  A VP gets GHOST_BSP_JOB, GHOST_BSP_PID, GHOST_BSP_NPROCS and, with
  --hosts, GHOST_BSP_HUB (ADDR:PORT) and GHOST_BSP_KEY.

EXIT STATUS
  0 when every VP exited with status 0; otherwise the status of the VP that
  failed first (its exit status, or 128+N when signal N killed it); 1 for a
  job-wide error (e.g. registrations that differ between VPs); 2 for a
  usage error.

EXAMPLES
  bsprun -n 4 ./lu 512
  bsprun -n 3 --migrate-every 1 --verbose ./inner_product
  bsprun -n 6 --hosts h1,h2,h3 --job-dir /shared/job1 ./lu 2000
  bsprun -n 2 --hosts h1,h2,h3 --policy ghost --verbose ./lbm 64
  bsprun -n 3 --cluster --migrate-every 1 ./lu 64
  bsprun -n 3 --hosts h1,h2,h3 --policy migbsp --dry-run ./lbm 400 400 100

SEE ALSO
  Documentation/bsp.md (process model, protocol, semantics, limits).)";

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

class PrintingMover final : public Mover {
  public:
    PrintingMover(LocalMover& m, unsigned every) : m_(m), every_(every) {}
    Result<pid_t> move(int vp, pid_t pid, std::uint64_t superstep) override {
        auto r = m_.move(vp, pid, superstep);
        if (r)
            std::fprintf(stderr,
                         "bsprun: end of superstep %llu: vp %d moved, pid %d -> %d "
                         "(forced: --migrate-every %u)\n",
                         static_cast<unsigned long long>(superstep), vp, pid, *r, every_);
        else
            std::fprintf(stderr,
                         "bsprun: end of superstep %llu: moving vp %d (pid %d) failed: %s; it "
                         "continues where it is\n",
                         static_cast<unsigned long long>(superstep), vp, pid,
                         r.error().what().c_str());
        return r;
    }

  private:
    LocalMover& m_;
    unsigned every_;
};

// --verbose: every barrier's statistics, then the moves of the inner hook.
class VerboseHook final : public BarrierHook {
  public:
    VerboseHook(BarrierHook& inner, bool verbose) : inner_(inner), verbose_(verbose) {}
    std::vector<int> barrier(std::uint64_t superstep, std::span<const VpStats> stats) override {
        if (verbose_)
            for (const auto& s : stats)
                std::fprintf(stderr,
                             "bsprun: superstep %llu: vp %d pid %d computed %.6f s "
                             "(cpu %.6f s), sent %llu bytes\n",
                             static_cast<unsigned long long>(superstep), s.vp, s.pid, s.comp_wall,
                             s.comp_cpu, static_cast<unsigned long long>(s.bytes_sent));
        return inner_.barrier(superstep, stats);
    }

  private:
    BarrierHook& inner_;
    bool verbose_;
};

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"bsprun - run a BSPlib program as P virtual processors (ghost bsp/)", "bsprun"};
    app.footer(kFooter);
    app.prefix_command(); // everything from PROGRAM on is the program's
    int nprocs = 0;
    std::string policy; // default: migbsp with --hosts, none on one host
    unsigned every = 0;
    bool verbose = false;
    std::string hosts;
    bool cluster = false;
    app.add_option("-n,--nprocs", nprocs, "number of virtual processors P (at least 1)")
        ->required()
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
                   "/tmp/bsprun-XXXXXX, removed at the end); must be at the same path on every "
                   "host");
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
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    if (cluster && !hosts.empty()) {
        std::fprintf(stderr, "bsprun: --cluster and --hosts: give one of them\n");
        return 2;
    }
    if (cluster) {
        auto all = cluster_hosts(migd_socket);
        if (!all) {
            std::fprintf(stderr, "bsprun: --cluster: %s\n", all.error().what().c_str());
            return 1;
        }
        hosts = *all;
    }
    const std::vector<std::string> host_list = split_hosts(hosts);
    if (!hosts.empty() && host_list.empty()) {
        std::fprintf(stderr, "bsprun: --hosts '%s' names no host\n", hosts.c_str());
        return 2;
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
    std::vector<std::string> cmd = app.remaining();
    if (cmd.empty()) {
        std::fprintf(stderr, "bsprun: no PROGRAM given (bsprun --help)\n");
        return 2;
    }

    const std::string job = make_job_id();
    auto listen = wire::listen_abstract(job);
    if (!listen) {
        std::fprintf(stderr, "bsprun: cannot start the hub: %s\n", listen.error().what().c_str());
        return 1;
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
    std::optional<MultiHost> mh;
    if (multi) {
        auto m = MultiHost::make(host_list, home, migd_socket, migd_sockets, hub_address, job_dir,
                                 nprocs);
        if (!m) {
            std::fprintf(stderr, "bsprun: --hosts: %s\n", m.error().what().c_str());
            return 1;
        }
        mh.emplace(std::move(*m));
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
    for (int v = 0; v < nprocs; ++v) {
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
    VerboseHook verbose_hook(mh ? mh->hook(std::move(*pol), every, verbose, dry_run)
                                : static_cast<BarrierHook&>(every_nth),
                             verbose);
    hub.set_hook(&verbose_hook);
    if (local) {
        mover = std::make_unique<PrintingMover>(*local, every);
        hub.set_mover(mover.get());
    }
    int alive = nprocs; // bsprun's children still running
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
    const Outcome outcome = hub.run();
    if (!outcome.ok)
        std::fprintf(stderr, "bsprun: job failed: %s\n", outcome.why.c_str());

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
    if (mh)
        mh->output().copy(); // the last bytes of bsprun's children
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
