# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# The --help texts of tests/cluster/cluster (sourced by it).

help_main() {
	cat <<'EOF'
NAME
    cluster - a cluster of ghost hosts on one machine, for tests and demos

SYNOPSIS
    tests/cluster/cluster up --hosts N [--cpu P1,P2,...] [--name NAME]
                             [--engine user|kernel|auto] [--dir DIR]
    tests/cluster/cluster exec HOST CMD [ARGS...]
    tests/cluster/cluster pids HOST|--all
    tests/cluster/cluster usage HOST
    tests/cluster/cluster status [--name NAME]
    tests/cluster/cluster migd HOST start|stop|restart [VAR=VALUE...]
    tests/cluster/cluster link HOST up|down
    tests/cluster/cluster down [--name NAME]

DESCRIPTION
    Each host h1..hN is a network namespace (ghost-NAME-hI) whose eth0 is a
    veth pair to a bridge that lives in a namespace of its own
    (ghost-NAME-br): nothing is added to the root namespace's network. Host
    hI has the address 10.77.K.I/24, K derived from NAME (separate bridges:
    clusters never see each other). Each host has a cgroup of its own
    (ghost-cluster-NAME/hI under the cpu controller, and cpuacct under
    cgroup v1) with an optional CPU share, a directory DIR/hI with its
    migd.toml, state directory, checkpoint-server directory and log, and its
    own migd. Certificates of one cluster CA (tools/ghost-ca) are in DIR/ca.

    Commands other than up and down act on the cluster named by the
    environment variable GHOST_CLUSTER_NAME (default "ghost"); down and
    status also take --name. Run 'cluster COMMAND --help' for each.

    Must run as root. tests/cluster/lib.sh gives tests cluster_up, which
    takes the cluster down when the test exits, fails or is interrupted.

ENVIRONMENT
    GHOST_CLUSTER_NAME   the cluster exec, pids, usage, status, down act on
    GHOST_CLUSTER_MIGD   the migd binary (default BUILD/bin/migd), run as
                         'MIGD --config DIR/hI/migd.toml'
    GHOST_CLUSTER_TIMEOUT seconds up waits for the daemons (default 20)
    GHOST_BUILD          build directory (default <repo>/build)
    GHOST_CLUSTER_RUN    registry of running clusters (default /run/ghost-cluster)

EXIT STATUS
    0 success; 1 failure (the reason is printed); 2 usage error; exec
    returns CMD's status.
EOF
}

help_up() {
	cat <<'EOF'
NAME
    cluster up - make the hosts of a test cluster and start their migd

SYNOPSIS
    cluster up --hosts N [--cpu P1,P2,...] [--name NAME]
               [--engine user|kernel|auto] [--dir DIR] [--own-clocks]
               [--clear-images]

DESCRIPTION
    Makes hosts h1..hN (1 to 64): a network namespace each with lo up and
    eth0 = 10.77.K.I/24 on a bridge in the namespace ghost-NAME-br, a cgroup
    each, DIR/hI/ with migd.toml, state/, images/ (the checkpoint-server
    directory) and migd.log, certificates from one cluster CA in DIR/ca
    (ca.pem, hI.pem, hI.key; the host's address is in its certificate), and
    starts 'MIGD --config DIR/hI/migd.toml' on each host (in its namespace
    and cgroup; pid in DIR/hI/migd.pid). Returns once every migd answers
    {"op":"ping"} on its socket DIR/hI/migd.sock; if one exits or stays
    silent, prints the end of its log, removes everything and fails.

    Each migd.toml names its host (name hI, listen on its address, port
    7470), its socket and directories, the engine, the TLS files, every other
    host as a [[peer]], and allow_root = true ([limits]): tests run as root.

OPTIONS
    --hosts N        number of hosts (required)
    --cpu P1,P2,...  CPU share of each host in percent of one CPU (100 = one
                     whole CPU, 25 = a quarter, 200 = two CPUs), one value
                     per host or one for all. Cgroup v1: cpu.cfs_quota_us =
                     P*1000 with cpu.cfs_period_us = 100000; cgroup v2:
                     cpu.max "P*1000 100000". Default: no limit.
    --name NAME      cluster name (default $GHOST_CLUSTER_NAME or "ghost"):
                     1 to 32 letters, digits, '_', '-'. Clusters with
                     different names run side by side.
    --engine E       [engine] kind of every migd: user (default; the ptrace
                     engine, which runs on any kernel), kernel (ghost.ko), auto
    --dir DIR        the cluster's directory (default $TMPDIR/ghost-cluster-NAME,
                     TMPDIR defaulting to /tmp); must be new or empty, as
                     down removes it
    --own-clocks     give host hI a time namespace of its own whose
                     CLOCK_MONOTONIC and CLOCK_BOOTTIME read (I - 1) * 1000 s
                     more than the machine's, as hosts booted at different
                     times would (bound on /run/ghost-cluster/NAME.hI.time;
                     migd, exec and what they start run in it). A process
                     moved between hosts then sees another monotonic clock,
                     as between real machines. Wall-clock time stays shared.
    --clear-images   clear_images = true in every migd.toml ([tls]): images
                     cross the bridge outside TLS after the mutual-TLS
                     handshake, as on a trusted network (migd(8)).

ERRORS
    Not root; no cgroup cpu controller; a cluster NAME already up (or its
    namespaces or cgroups left over: 'cluster down --name NAME' removes
    them); DIR not empty; migd missing or not answering.
EOF
}

help_exec() {
	cat <<'EOF'
NAME
    cluster exec - run a command on a host of the cluster

SYNOPSIS
    cluster exec HOST [--] CMD [ARGS...]

DESCRIPTION
    Runs CMD in HOST's network namespace and cgroups (HOST is h1..hN of the
    cluster GHOST_CLUSTER_NAME, default "ghost"), with GHOST_MIGD_SOCKET set
    to HOST's migd socket (ghostctl talks to that migd), GHOST_CLUSTER_HOST
    to HOST and GHOST_CLUSTER_NAME to the cluster. Standard input, output and
    error are CMD's; CMD replaces the exec process (same pid). Processes CMD
    starts in the background stay on HOST after exec returns, until they
    exit or 'cluster down'. Only the network namespace changes: the file
    system, users and pids are the machine's.

EXAMPLES
    cluster exec h2 ghostctl ps
    cluster exec h1 sh -c 'ghost-counter 100 >/tmp/c.log & echo $!'
EOF
}

help_pids() {
	cat <<'EOF'
NAME
    cluster pids - list the processes of a host, or of every host

SYNOPSIS
    cluster pids HOST
    cluster pids --all

DESCRIPTION
    Prints, one per line, the pids in HOST's cgroups and in its network
    namespace (migd, and everything started with exec or restored there).
    With --all, every host's in one call, as lines "HOST PID" (h1 first):
    a test that checks where a process is and that no copy runs elsewhere
    needs one call instead of one per host.
EOF
}

help_usage() {
	cat <<'EOF'
NAME
    cluster usage - CPU time used on a host

SYNOPSIS
    cluster usage HOST

DESCRIPTION
    Prints the CPU time HOST's processes have used since up, in
    microseconds (cgroup v1 cpuacct.usage / 1000, cgroup v2 cpu.stat
    usage_usec). Two readings 1 s apart give the host's CPU share in use.
EOF
}

help_status() {
	cat <<'EOF'
NAME
    cluster status - show clusters and their hosts

SYNOPSIS
    cluster status [--name NAME]

DESCRIPTION
    For the cluster NAME (default: GHOST_CLUSTER_NAME if set, else every
    cluster up), prints its address range, engine, cgroup version and
    directory, and for each host its address, CPU share, migd pid and
    state: up (answers ping), running but not answering, or down.
EOF
}

help_down() {
	cat <<'EOF'
NAME
    cluster down - remove a test cluster

SYNOPSIS
    cluster down [--name NAME]

DESCRIPTION
    Kills every process of the cluster (SIGKILL to every pid in its cgroups
    and namespaces, repeated until none is left; never by process name),
    then removes its namespaces (hosts and bridge), cgroups, directory and
    registry entry. Removes whatever part exists, so a half-made or crashed
    cluster goes as well; a cluster that does not exist is not an error.
    When the registry entry is gone, the directory is removed if it is the
    default one ($TMPDIR/ghost-cluster-NAME) and holds a cluster's files.
    NAME defaults to GHOST_CLUSTER_NAME, else "ghost".
EOF
}

help_migd() {
	cat <<'EOF'
NAME
    cluster migd - stop, start or restart one host's migd

SYNOPSIS
    cluster migd HOST start|stop|restart [VAR=VALUE...]

DESCRIPTION
    stop sends the host's migd SIGTERM (SIGKILL after 5 s); start runs a
    new one with the host's migd.toml in its namespace and cgroup, its log
    appended to DIR/HOST/migd.log, and waits until it answers ping; restart
    does both. VAR=VALUE pairs go into the new migd's environment, e.g.
    MIGD_FAULT=dest-mid-stream for the failure tests
    (Documentation/migd-protocol.md, "Faults for tests"). A migd that
    exited on its own is simply started again.

EXIT STATUS
    0 success; 1 failure (the reason is printed); 2 usage error.
EOF
}

help_link() {
	cat <<'EOF'
NAME
    cluster link - cut or restore a host's network link

SYNOPSIS
    cluster link HOST up|down

DESCRIPTION
    Sets the host's eth0 (its veth to the bridge) down or up: with the link
    down the host reaches no other host and no other host reaches it; its
    processes and migd keep running.

EXIT STATUS
    0 success; 1 failure; 2 usage error.
EOF
}
