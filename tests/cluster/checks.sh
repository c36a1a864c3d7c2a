# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# tests/cluster/checks.sh: TAP output and the checks of the multi-host tests
# (migd_test, clear_test), sourced after lib.sh. The caller sets build,
# here, dir (cluster_dir), ghostctl and nobody before using them; a test
# ends with 'echo "1..$n"' and exits non-zero when $failed is.

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
fail() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() { # DESCRIPTION COMMAND...
	local d=$1
	shift
	if "$@"; then ok "$d"; else fail "$d"; fi
}
diag() { sed 's/^/# /' <<<"$*"; }

# ghostctl on HOST as root, or as nobody with 'as_nobody'.
gc() { local h=$1; shift; cluster exec "$h" "$ghostctl" "$@"; }
gc_nobody() {
	local h=$1
	shift
	cluster exec "$h" setpriv --reuid=$nobody --regid=$nobody --clear-groups -- "$ghostctl" "$@"
}

# A counter owned by nobody on HOST writing to FILE; prints its pid.
start_counter() { # HOST FILE
	: >"$2"
	chown $nobody:$nobody "$2"
	cluster exec "$1" setpriv --reuid=$nobody --regid=$nobody --clear-groups -- \
		sh -c '"$2" 10 </dev/null >>"$1" 2>&1 & echo $!' sh "$2" "$build/bin/ghost-counter"
}

# A process of MIB MiB of patterned memory on HOST (ghost-ckpt-workload);
# prints its pid. SIGUSR1 makes it (or its copy) check its memory.
start_big() { # HOST MIB DIR
	mkdir -p "$3"
	chown $nobody:$nobody "$3"
	cluster exec "$1" setpriv --reuid=$nobody --regid=$nobody --clear-groups -- \
		"$build/bin/ghost-ckpt-workload" --mib "$2" --dir "$3" >/dev/null
	cat "$3/pid"
}

last_count() { tail -n 1 "$1" | awk '{ print $1 }'; }
last_pid() { tail -n 1 "$1" | sed -n 's/.*pid=\([0-9]*\).*/\1/p'; }
counting() { # FILE: the count grows within 2 s
	local a b i
	a=$(last_count "$1")
	for i in $(seq 1 40); do
		sleep 0.05
		b=$(last_count "$1")
		[ -n "$b" ] && [ "$b" -gt "${a:--1}" ] && return 0
	done
	return 1
}
# No gap and no repeat in the counts of FILE.
continuous() { awk '{ if ($1 != NR - 1) exit 1 } END { exit NR == 0 }' "$1"; }
alive() { [ -d "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
state_of() { awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
host_of() { # PID: which host's cgroup holds it
	local h p
	while read -r h p; do
		[ "$p" = "$1" ] && { echo "$h"; return; }
	done < <(cluster pids --all)
	echo none
}
# Live processes named COMM on the cluster's hosts (pids).
live_named() {
	local h p
	while read -r h p; do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$1" ] && alive "$p" && echo "$p"
	done < <(cluster pids --all)
	true
}
journals_empty() {
	local h
	for h in h1 h2 h3; do
		[ -z "$(ls -A "$dir/$h/state/journal" 2>/dev/null)" ] || { diag "journal of $h: $(ls "$dir/$h/state/journal")"; return 1; }
	done
}
no_tmp_images() { ! find "$dir"/h*/images -name '.*.tmp' 2>/dev/null | grep -q .; }
# Waits up to 15 s for COMMAND to hold.
eventually() {
	local i
	for i in $(seq 1 150); do "$@" && return 0; sleep 0.1; done
	"$@"
}
exactly_one() { [ "$(live_named "$1" | wc -l)" = 1 ]; }
none_named() { [ -z "$(live_named "$1")" ]; }
# The ids of the images h3's checkpoint server holds, sorted.
image_ids() {
	gc h1 images --server h3 --json |
		python3 -c 'import json,sys; print("\n".join(sorted(i["id"] for i in json.load(sys.stdin)["images"])))'
}
not_stopped() { [ "$(state_of "$1")" != T ]; }

move_and_expect_one() { # DESCRIPTION FILE HOST_EXPECTED: after the failure, one counter, on HOST
	local d=$1 file=$2 want=$3 p
	check "$d: exactly one counter" eventually exactly_one ghost-counter ||
		diag "counters: $(for p in $(live_named ghost-counter); do echo "$p on $(host_of "$p") state $(state_of "$p")"; done)"
	p=$(live_named ghost-counter)
	check "$d: it runs on $want" test "$(host_of "$p")" = "$want"
	check "$d: it counts" eventually counting "$file"
	check "$d: no journal entry left" eventually journals_empty
	kill -KILL "$p"
}
