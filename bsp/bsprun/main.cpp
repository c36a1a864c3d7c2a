// SPDX-License-Identifier: GPL-2.0
// bsprun: starts a BSP job of P virtual processors on this host, runs its
// hub, relays the VPs' output, and exits with the job's status.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
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

#include <fmt/format.h>

#include "checkpoint.hpp"
#include "ghost/engine.hpp"
#include "guard.hpp"
#include "hub.hpp"
#include "migrate.hpp"
#include "multihost.hpp"
#include "options.hpp"
#include "output.hpp"
#include "printing.hpp"
#include "record.hpp"
#include "relays.hpp"
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
    if (argc == 2 && std::strcmp(argv[1], "--guard") == 0)
        return guard_main();
    int code = 0;
    auto plan = make_plan(argc, argv, code);
    if (!plan)
        return code;
    const Options& o = plan->o;
    const CkptOptions& ck = o.ck;
    const int nprocs = o.nprocs;
    const unsigned every = o.every;
    const bool restarting = plan->restarting, multi = plan->multi();
    const std::optional<Manifest>& manifest = plan->manifest;
    const std::vector<std::string>& host_list = plan->host_list;
    std::vector<std::string>& cmd = plan->cmd;

    const std::string job = restarting ? manifest->job : make_job_id();
    // With relays, the job's socket on each host is its relay's.
    const bool relayed = multi && o.routing == "relay";
    auto listen = relayed ? Result<UniqueFd>(UniqueFd()) : wire::listen_abstract(job);
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
        if (auto c = check_server(o.migd_socket, ck.server); !c) {
            std::fprintf(stderr, "bsprun: --checkpoint-every: %s\n", c.error().what().c_str());
            return 1;
        }
    }
    std::optional<RecordHook> record;
    if (!o.record.empty()) {
        auto r = RecordHook::open(o.record);
        if (!r) {
            std::fprintf(stderr, "bsprun: %s\n", r.error().what().c_str());
            return 1;
        }
        record.emplace(std::move(*r));
    }
    std::optional<MultiHost> mh;
    if (multi) {
        auto m = MultiHost::make(host_list, o.home, o.migd_socket, o.migd_sockets, o.hub_address,
                                 o.job_dir, nprocs, key);
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

    // A guard on the checkpoint server rolls the job back if bsprun itself
    // is lost; an interrupted bsprun must then stop it (guard.hpp).
    const std::string guard_on =
        mh && ck.on_failure == "rollback" ? guard_host(mh->home(), ck.server) : "";
    // SIGCHLD (and with a guard SIGINT, SIGTERM, SIGHUP) through a
    // signalfd: blocked before any thread exists.
    sigset_t chld, oldmask;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    if (!guard_on.empty())
        for (int sig : {SIGINT, SIGTERM, SIGHUP})
            sigaddset(&chld, sig);
    sigprocmask(SIG_BLOCK, &chld, &oldmask);
    UniqueFd sfd(::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!sfd) {
        std::fprintf(stderr, "bsprun: signalfd: %s\n", std::strerror(errno));
        return 1;
    }

    std::optional<Relays> relays;
    if (relayed) {
        auto r = Relays::start(Relays::hosts_of(mh->home(), host_list), mh->mover(),
                               mh->output().dir(), job, mh->key_hex(), mh->hub_address());
        if (!r) {
            std::fprintf(stderr, "bsprun: --routing relay: %s\n", r.error().what().c_str());
            return 1;
        }
        relays.emplace(std::move(*r));
        if (auto ready = relays->wait_home_listening(job); !ready) {
            std::fprintf(stderr, "bsprun: --routing relay: %s\n", ready.error().what().c_str());
            return 1;
        }
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
    const pid_t self = ::getpid();
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
            // A VP that never left bsprun ends with it, even while it waits
            // detached with no socket to lose (bsprun stopped by its guard's
            // fence, or killed); moved copies are migd's and the rollback's.
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != self)
                ::_exit(127);
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
    SuperstepCommands at_hook(mh ? mh->hook(std::move(plan->policy), every, o.verbose, o.dry_run)
                                 : static_cast<BarrierHook&>(every_nth),
                              plan->at_commands, job);
    VerboseHook verbose_hook(at_hook, o.verbose);
    if (record)
        record->wrap(verbose_hook);
    hub.set_hook(record ? static_cast<BarrierHook*>(&*record) : &verbose_hook);
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
    if (relays)
        hub.set_relays(relays->hosts(), !o.no_broadcast,
                       [&](int v) { return mh->mover().place(v).host; });
    if (mh) {
        mh->attach(hub, pids);
        mh->mover().on_child_left([&](int v) {
            status[static_cast<std::size_t>(v)] = 0; // it lives on under migd
            --alive;
        });
    }
    bool out_open = true, err_open = true;
    int interrupted = 0; // the signal that stopped the job (with a guard)
    const auto reap = [&](bool tell_hub) {
        signalfd_siginfo si;
        while (::read(sfd.get(), &si, sizeof si) > 0)
            if (si.ssi_signo != SIGCHLD && !interrupted) {
                interrupted = static_cast<int>(si.ssi_signo);
                hub.fail(-1, fmt::format("bsprun was interrupted by SIG{}: the job is "
                                         "stopped, not rolled back",
                                         sigabbrev_np(interrupted)));
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
    if (o.verbose)
        std::fprintf(stderr, "bsprun: job %s: %d VPs, %s @%s%s%s\n", job.c_str(), nprocs,
                     relays ? "relays" : "hub", wire::socket_name(job).c_str() + 1,
                     mh ? (relays ? ", hub on TLS " : " and TLS on ") : "",
                     mh ? mh->hub_address().c_str() : "");
    if (restarting) {
        hub.resume(manifest->hub);
        for (int v = 0; v < nprocs; ++v)
            if (auto w = mh->mover().wake(v, pids[static_cast<std::size_t>(v)]); !w) {
                hub.fail(v, w.error().what(), true);
                break;
            }
    }
    std::optional<Guard> guard;
    if (!guard_on.empty()) {
        GuardPlan gp;
        gp.host = guard_on;
        gp.job = job;
        gp.key_hex = mh->key_hex();
        gp.hub = mh->hub_address();
        gp.home = mh->home();
        gp.hosts = host_list;
        gp.sockets = o.migd_sockets;
        gp.restart = guard_restart_options(o, guard_on);
        if (relays)
            gp.helpers = relays->gids();
        gp.log = fmt::format("{}/guard-{}.log", mh->output().dir(),
                             std::getenv("GHOST_BSPRUN_ROLLBACKS") ?: "0");
        auto g = Guard::start(mh->mover(), std::move(gp));
        if (g && hub.wait_for_guard(std::chrono::seconds(10))) {
            guard.emplace(std::move(*g));
            std::fprintf(stderr,
                         "bsprun: guard on %s (pid %d): if bsprun or its host is lost, it rolls "
                         "the job back from there (its output: %s)\n",
                         guard_on.c_str(), guard->proc().pid, guard->log().c_str());
        } else {
            if (g)
                (void)migd_kill(mh->mover().home_socket(), g->proc().gid, SIGKILL);
            std::fprintf(stderr,
                         "bsprun: warning: no guard on %s (%s): the job is rolled back after a "
                         "lost VP or host, but not if bsprun itself is lost\n",
                         guard_on.c_str(),
                         g ? "it did not connect to the hub in 10 s" : g.error().what().c_str());
        }
    }
    const Outcome outcome = hub.run();
    // From here bsprun is in control to the end (done, failed, interrupted,
    // or rolled back by bsprun itself): the guard stands down.
    const bool guard_released = hub.release_guard();
    if (guard && guard_released)
        guard->finish();
    else if (guard)
        std::fprintf(stderr,
                     "bsprun: the guard on %s did not confirm that it stands down (its host "
                     "unreachable?): it rolls the job back if it lost this bsprun, and bsprun "
                     "leaves that to it (its output: %s)\n",
                     guard_on.c_str(), guard->log().c_str());
    const double job_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - job_start).count();
    if (mh && o.policy != "none")
        std::fprintf(stderr, "%s\n",
                     cost_summary(o.policy, mh->policy_cost(), job_seconds).c_str());
    if (!outcome.ok)
        std::fprintf(stderr, "bsprun: job failed: %s\n", outcome.why.c_str());
    if (relays) {
        if (outcome.ok)
            std::fprintf(stderr, "%s\n",
                         routing_summary(hub.relay_totals(), !o.no_broadcast).c_str());
        else
            relays->kill_all();
        relays->finish();
    }
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
    if (interrupted)
        return 128 + interrupted;
    if (!outcome.ok && ck.on_failure == "rollback" && outcome.lost && (!guard || guard_released)) {
        rollback(mh->mover(), host_list, *ckpt, ck.server, outcome.why,
                 rollback_options(o, mh->home())); // on failure: returns
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
