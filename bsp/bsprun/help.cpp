// SPDX-License-Identifier: GPL-2.0
// bsprun --help: the manual page's sections after the options.
#include "help.hpp"

namespace ghost::bsp {

const char* const kBsprunFooter = R"(SYNOPSIS
  bsprun -n P [--policy NAME] [--migrate-every N] [--verbose]
         [--at-superstep S:COMMAND]... PROGRAM [ARGS...]
  bsprun -n P --hosts H1,H2,... [--job-dir DIR] [--migd-socket PATH]
         [--migd-sockets PATTERN] [--home NAME] [--hub-address ADDR]
         [--routing hub|relay [--no-broadcast]]
         [--policy NAME [--dry-run]] [--migrate-every N] [--verbose]
         [--at-superstep S:COMMAND]...
         [--checkpoint-every N --server HOST [--on-failure rollback]]
         PROGRAM [ARGS...]
  bsprun --restart JOB --server HOST [--hosts H1,...] [--migd-socket PATH]
         [--migd-sockets PATTERN] [--home NAME] [--hub-address ADDR]
         [--routing hub|relay [--no-broadcast]]
         [--checkpoint-every N] [--on-failure fail|rollback] [--verbose]

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
  /tmp/bsprun-XXXXXX, removed at the end unless checkpointed). bsprun follows them and copies
  what they gain to its own stdout and stderr. DIR must be at the same path
  on every host (a shared filesystem on a real cluster).

  Every move is printed (superstep, vp, from HOST:PID, to HOST:PID, why);
  with --migrate-every N, VP (s mod P) moves on to the next host of the
  list. A VP moved by migd is no longer bsprun's child: its end comes
  through the protocol (bsp_end), and its exit status is the one the migd
  that restored it reaped (0 when that migd no longer knows it). A VP
  whose connection drops before bsp_end, or that exits while detached,
  fails the job; the other VPs are killed (here by pid, elsewhere through
  migd by gid). --cluster instead of --hosts takes the list from this
  host's migd ({"op":"hosts"}: this host, then its configured peers, in
  the order of its migd.toml).

ROUTING
  --routing hub (the default) carries every superstep's puts, gets and
  messages through the hub on the home host. --routing relay follows PUB: a
  relay (bsp-relay) runs on every host of the job and owns the job's socket
  there, so the host's VPs connect to it. It passes each VP's control
  frames to the hub, and sends the VP's puts and messages straight to the
  relay of the target's host, found in its link table (VP -> host); that
  relay puts them into the target's DELIVER. A relay starts here holding
  nothing and migd moves it to its host, as a VP is placed. After a move
  the hub gives the VP's new host to every relay, or with --no-broadcast
  only to the old and the new host's: the others' entries go stale, and
  the old host forwards what they still send there. At the end bsprun
  prints what the relays carried ("bsprun: routing: relays carried N DATA
  frames ..., F forwarded by a stale link-table entry, ..."). Large get
  replies (24 KiB or more per pair of VPs) go the same way: the relay of
  the VP read from sends them to the relay of the VP that asked. A relay
  that dies fails the job (and --on-failure rollback rolls it back).

BALANCING
  With --hosts, at every barrier after the first the hub's statistics
  become a balance::Observation and the policy (--policy, default migbsp)
  decides; each of its moves is carried out through migd to the host it
  chose among the --hosts and printed as
    end of superstep S: vp V moved from hA:PID to hB:PID (POLICY: WHY)
  and, with --verbose, the numbers behind it. Each host is its own Set with
  one processor. Measured, not configured: a VP's CPU share is its CPU time
  over its computation's wall time; a host's external load is 1 minus the
  median share of its VPs (a host without VPs keeps its last estimate, at
  first 0). A VP's instructions are counted in user mode with
  perf_event_open(2) where the kernel allows it (a hardware counter;
  perf_event_paranoid 2 or less), and a host's power is then its VPs'
  median count per CPU second; where it does not (no PMU, as in most VMs),
  a host's power is 1e9 instructions/s and a VP's instructions are its CPU
  seconds times that (--verbose says why, per VP). A VP's memory is
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

  At the end of a job with --hosts and a policy other than none, bsprun
  prints what the policy itself cost:
    policy NAME: N decisions took W s (CPU C s), X% of the job's J s
  N counts the barriers at which the policy was called; W is the wall time
  (CLOCK_MONOTONIC) bsprun spent there building the observation and
  deciding (the policy's own work and planning its moves), C the CPU time
  of that (CLOCK_THREAD_CPUTIME_ID, read at the first 16 decisions and
  then one in 16: W times their CPU per wall second); X = W / J, J the
  job's wall time from the start of the VPs to the last bsp_end. Every VP
  waits at the barrier while the policy decides, so X is the policy's
  direct share of the job (not counted: the statistics every VP sends with
  its SYNC, which the runtime gathers with any policy, and what moves
  cost).

  --record FILE writes what every VP reported at every barrier (with any
  policy, also none and on one host), one JSON line per barrier:
    {"superstep":S,"cpu":[...],"wall":[...],"memory":[...],"from":[[...]]}
  per VP its CPU and wall seconds of computation, its resident bytes (0
  where not sampled) and from[v][u], the bytes VP v received from VP u.
  ghost-sim --app replay --replay FILE --platform cluster:N runs the same
  job on a simulated platform that is these hosts as the policy sees them
  (bench/bsp_cluster_bench --sim). A rollback does not record.

LOAD PROFILES
  --at-superstep S:COMMAND runs /bin/sh -c COMMAND at the barrier that
  ends superstep S-1, after the hook (placement, policy) decided and
  before any VP gets its DELIVER, and waits for it to end: whatever it
  changes is in place before any VP begins superstep S, in every run of
  the same program (supersteps, not seconds). Superstep 0 is
  the one before the first bsp_sync. Commands for the same S run in the
  order given. COMMAND gets stdin /dev/null, stdout and stderr on bsprun's
  standard error, no other descriptor, bsprun's environment plus
  GHOST_BSP_JOB and GHOST_BSP_SUPERSTEP (S); it runs on the home host. Each
  is announced ("before superstep S: running 'COMMAND'"); one that fails is
  reported with its status and the job goes on. A COMMAND that starts
  something must return (background it, detached from bsprun's output).
  PUB's load profiles on the test cluster, load that comes and goes on h2:
    --at-superstep '20:tests/cluster/hog start h2 /tmp/hog.pid'
    --at-superstep '60:tests/cluster/hog stop /tmp/hog.pid'
  After --on-failure rollback the restarted job runs the commands of the
  supersteps it replays again.

CHECKPOINT AND ROLLBACK
  With --checkpoint-every N (which needs --hosts and --server), at every
  N-th barrier but the first, when the hub has every VP's SYNC and no
  message is in flight, the hub sends every VP DETACH (apply the DELIVER
  that follows, then detach) and its DELIVER; once all have closed their
  connections, bsprun asks the migd of each VP's host to checkpoint its VPs
  onto the checkpoint server --server HOST, leaving them running, then
  stores the job's manifest there (job id and key, P, program, superstep,
  tag size, job directory, hub address, one image id per VP) with migd's
  "manifest" op, readable only by its owner. The checkpoint is complete
  only once the manifest is stored; the previous checkpoint's images are
  removed only then. The VPs are woken (SIGUSR2) and the job goes on:
    bsprun: checkpoint C at superstep S: P images on HOST (BYTES bytes, MS ms)
  The job directory is kept (a restart reopens the VPs' files).

  --restart JOB --server HOST reads JOB's manifest from HOST, refuses if
  the job's hub still answers (with its key), kills the job's old
  processes that migd still knows, restarts VP v from its image on host
  v mod N of --hosts (default: this host), starts a hub with the same job
  id and key, writes its address to DIR/hub, and wakes the VPs: a VP that
  finds no abstract socket of its job re-reads DIR/hub (GHOST_BSP_HUBFILE)
  and connects there. The job finishes with the answer it would have had.
  The restarted VPs are migd's, not bsprun's children: as for any VP migd
  moved, their exit status is taken as 0 after bsp_end.

  --on-failure rollback (with --checkpoint-every): when a VP's connection
  drops before bsp_end, migd says a detached VP is gone, or a VP cannot be
  woken (its host's migd does not answer), bsprun kills what remains of
  the job and restarts it (as --restart) from the last complete
  checkpoint on the hosts of the run whose migd still answers, saying
  why; at most 3 times in a row. Without a complete checkpoint yet the job
  fails as with --on-failure fail (the default) and says so.

  When bsprun itself is lost (its host died, or it was killed), a guard
  rolls the job back: with --on-failure rollback and a --server other than
  this host, bsprun starts "bsprun --guard" here, migd moves it to the
  checkpoint server's host, and it holds a connection to the hub:
    bsprun: guard on HOST (pid N): if bsprun or its host is lost, it rolls
    the job back from there (its output: DIR/guard-R.log)
  bsprun releases it whenever it ends in control of the job (and leaves a
  rollback to the guard when the guard does not confirm the release). If
  the hub's connection is lost instead (TCP keepalive notices a dead host
  within about 5 s), the guard kills the lost run's relays and becomes
  "bsprun --restart JOB --hosts UP" on its host, UP being the run's hosts
  but this one whose migd answers; the job
  then finishes there, its output in DIR/guard-R.log (R: the rollbacks
  before this run). A home host cut off from the guard's looks dead from
  there, so bsprun stops the job itself (exit status 1, "lost the guard
  on HOST") as soon as the guard's connection goes silent, and the guard
  waits 4 s after the hub went silent before it rolls back: the job never
  runs twice. The same happens if the guard's host dies; bsprun then says
  how to --restart the job once that host is back. A guard that merely
  ended leaves the job running, unguarded (a warning). With a guard,
  SIGINT, SIGTERM and SIGHUP stop the job (every VP killed, the guard
  released) and bsprun exits with 128 + the signal: an interrupted job is
  not rolled back.

ENVIRONMENT
  GHOST_MIGD_SOCKET   this host's migd control socket (--migd-socket)
  GHOST_CLUSTER_HOST  this host's migd name (--home; set by tests/cluster)
  A VP gets GHOST_BSP_JOB, GHOST_BSP_PID, GHOST_BSP_NPROCS and, with
  --hosts, GHOST_BSP_HUB (ADDR:PORT), GHOST_BSP_HUBFILE (DIR/hub) and
  GHOST_BSP_KEY. GHOST_BSPRUN_ROLLBACKS counts the rollbacks in a row.

EXIT STATUS
  0 when every VP exited with status 0; otherwise the status of the VP that
  failed first (its exit status, or 128+N when signal N killed it); 1 for a
  job-wide error (e.g. registrations that differ between VPs, or a job
  stopped because its guard went silent); 2 for a usage error.

EXAMPLES
  bsprun -n 4 ./lu 512
  bsprun -n 3 --migrate-every 1 --verbose ./inner_product
  bsprun -n 6 --hosts h1,h2,h3 --job-dir /shared/job1 ./lu 2000
  bsprun -n 2 --hosts h1,h2,h3 --policy ghost --verbose ./lbm 64
  bsprun -n 3 --cluster --migrate-every 1 ./lu 64
  bsprun -n 3 --hosts h1,h2,h3 --policy migbsp --dry-run ./lbm 400 400 100
  bsprun -n 2 --hosts h1,h2,h3 --at-superstep '20:hog start h2 /tmp/p' \
         --at-superstep '60:hog stop /tmp/p' ./lbm 400 400 100
  bsprun -n 4 --hosts h1,h2 --checkpoint-every 2 --server h3 --on-failure rollback ./lu 64
  bsprun --restart bsprun-123-0a1b2c3d --server h3 --hosts h2,h3

SEE ALSO
  Documentation/bsp.md (process model, protocol, semantics, limits).)";

} // namespace ghost::bsp
