# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# tests/cluster/lib.sh: sourced by multi-host tests (bash, set -euo pipefail).
#
#   . "$(dirname "$0")/lib.sh"
#   cluster_up --hosts 3 --cpu 100,50,25   # name: a new one unless --name
#   cluster exec h1 ghostctl ...           # acts on the last cluster_up
#
# cluster_up takes every cluster it made down when the test exits: at its
# end, on a failed command (set -e), on Ctrl-C (SIGINT), SIGTERM and SIGHUP.
# A test that needs its own cleanup defines cluster_cleanup_hook, which runs
# first. The last cluster made is the default of cluster exec/pids/usage/down
# (GHOST_CLUSTER_NAME); 'cluster_use NAME' switches between several.

GHOST_CLUSTER=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cluster
_cluster_names=()

cluster() { "$GHOST_CLUSTER" "$@"; }

_cluster_cleanup() {
	local rc=$? n
	trap - EXIT INT TERM HUP
	set +e
	if declare -F cluster_cleanup_hook >/dev/null; then cluster_cleanup_hook; fi
	for n in "${_cluster_names[@]}"; do
		"$GHOST_CLUSTER" down --name "$n" || echo "lib.sh: 'cluster down --name $n' failed" >&2
	done
	exit "$rc"
}

# cluster_up [--name NAME] ARGS...: 'cluster up' with a trap that takes the
# cluster down on exit; without --name, the name is c<pid>[-<n>], unique
# among tests running at once.
cluster_up() {
	local n= a
	local prev=
	for a in "$@"; do
		[ "$prev" = --name ] && n=$a
		prev=$a
	done
	local extra=()
	if [ -z "$n" ]; then
		n=c$$
		[ "${#_cluster_names[@]}" -gt 0 ] && n=c$$-${#_cluster_names[@]}
		extra=(--name "$n")
	fi
	# Registered first: a failing up also leaves nothing behind.
	_cluster_names+=("$n")
	trap _cluster_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	"$GHOST_CLUSTER" up "$@" "${extra[@]}"
	export GHOST_CLUSTER_NAME=$n
}

cluster_use() { export GHOST_CLUSTER_NAME=$1; }

# cluster_down [NAME]: takes a cluster down now (default: the current one).
cluster_down() {
	local n=${1:-$GHOST_CLUSTER_NAME} i keep=()
	"$GHOST_CLUSTER" down --name "$n"
	for i in "${_cluster_names[@]}"; do [ "$i" = "$n" ] || keep+=("$i"); done
	_cluster_names=("${keep[@]+"${keep[@]}"}")
}

# cluster_addr HOST: the host's address (h2 -> 10.77.K.2).
cluster_addr() {
	local prefix
	prefix=$(. "${GHOST_CLUSTER_RUN:-/run/ghost-cluster}/$GHOST_CLUSTER_NAME.env" && echo "$prefix")
	echo "$prefix.${1#h}"
}

# cluster_dir: the cluster's directory (DIR/hI/migd.toml, ...).
cluster_dir() {
	(. "${GHOST_CLUSTER_RUN:-/run/ghost-cluster}/$GHOST_CLUSTER_NAME.env" && echo "$dir")
}

# cluster_close_inherited_fds: closes the calling shell's descriptors but
# 0, 1, 2 and bash's own 255. One inherited from whoever ran the test (a
# pipe) would reach every process the test starts, and a process holding a
# pipe cannot move to another host.
cluster_close_inherited_fds() {
	local fd self=$BASHPID # (inside $(...) it would be the subshell's)
	for fd in $(ls "/proc/$self/fd"); do
		case $fd in 0 | 1 | 2 | 255) ;; *) eval "exec $fd>&-" 2>/dev/null || true ;; esac
	done
}
