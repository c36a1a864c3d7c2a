// SPDX-License-Identifier: GPL-2.0
/*
 * ghost-ckpt-workload: the process ghost_bench_vs_criu checkpoints and
 * restarts, with ghost and with CRIU alike.
 *
 *   ghost-ckpt-workload --mib N --dir DIR [--write-kib-per-s R]
 *
 * Maps N MiB of private anonymous memory and fills every 64-bit word with a
 * non-zero value derived from its index, so that every page is present,
 * distinct and must be carried by the image (neither tool may skip zero or
 * untouched pages). Then it becomes a daemon the way a fair CRIU user's
 * workload would be one: its own session, stdio on /dev/null, cwd /, no
 * descriptor left open, so `criu dump` needs no --shell-job and ghost needs
 * no inherited descriptor.
 *
 * The command returns (status 0) once the daemon is ready; the daemon's pid
 * is then in DIR/pid. On SIGUSR1 the daemon (the original or a restored
 * copy) first writes DIR/alive (its pid), then checks every word of the
 * mapping and writes DIR/verify: "OK <words>" or "BAD <wrong words>". The
 * benchmark stops its clock at "alive" and requires "OK" afterwards, so it
 * times a restored process that runs, and only counts restores that were
 * correct. Files are written under a temporary name and renamed, so a reader
 * never sees them half written.
 *
 * With --write-kib-per-s R it keeps writing R KiB a second, every 10 ms,
 * page after page round the mapping: each page rewritten gets the next
 * generation (kept in a separate array, itself memory the tools carry),
 * and its words become pattern ^ generation, so a page restored from an
 * older copy fails the check. It also notes the longest time between two
 * of its 10 ms ticks since the last check (CLOCK_MONOTONIC, one clock for
 * all hosts of a test cluster), which a migration's downtime lengthens:
 * "OK <words> <longest gap in us>".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t poked;

static void on_usr1(int sig)
{
	(void)sig;
	poked = 1;
}

/* Never zero (the low bit is set), different for every word. */
static uint64_t pattern(uint64_t i)
{
	uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull;

	x ^= x >> 29;
	return x | 1;
}

/* DIR/NAME := text, atomically (write DIR/.NAME, rename). */
static int put_file(const char *dir, const char *name, const char *text)
{
	char tmp[4096], path[4096];
	size_t len = strlen(text);
	int fd;

	snprintf(tmp, sizeof(tmp), "%s/.%s", dir, name);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	if (close(fd))
		return -1;
	return rename(tmp, path);
}

static uint64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

#define WORDS_PER_PAGE 512

/* The word pattern of a page at generation gen (0: as first filled). */
static uint64_t stamped(uint64_t i, uint32_t gen)
{
	return pattern(i) ^ ((uint64_t)gen * 0xD6E8FEB86659FD93ull);
}

/* --write-kib-per-s: rewrite rate KiB a second, every 10 ms; check on SIGUSR1. */
static void write_forever(const char *dir, uint64_t *mem, uint64_t words, unsigned long rate)
{
	uint64_t pages = words / WORDS_PER_PAGE, next = 0, per_tick, last, gap = 0;
	uint32_t *gens = mmap(NULL, pages * sizeof(*gens), PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	sigset_t none;
	char buf[128];

	if (gens == MAP_FAILED)
		_exit(1);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	per_tick = (rate * 1024 / 100 + 4095) / 4096;
	last = now_us();
	for (;;) {
		uint64_t t, k, i, bad = 0;

		nanosleep(&tick, NULL);
		t = now_us();
		if (t - last > gap)
			gap = t - last;
		last = t;
		for (k = 0; k < per_tick; k++, next = (next + 1) % pages) {
			uint64_t *w = mem + next * WORDS_PER_PAGE;

			gens[next]++;
			for (i = 0; i < WORDS_PER_PAGE; i++)
				w[i] = stamped(next * WORDS_PER_PAGE + i, gens[next]);
		}
		if (!poked)
			continue;
		poked = 0;
		snprintf(buf, sizeof(buf), "%d\n", getpid());
		put_file(dir, "alive", buf);
		for (i = 0; i < words; i++)
			bad += mem[i] != stamped(i, gens[i / WORDS_PER_PAGE]);
		if (bad)
			snprintf(buf, sizeof(buf), "BAD %llu %llu\n", (unsigned long long)bad,
				 (unsigned long long)gap);
		else
			snprintf(buf, sizeof(buf), "OK %llu %llu\n", (unsigned long long)words,
				 (unsigned long long)gap);
		put_file(dir, "verify", buf);
		gap = 0;
		last = now_us();
	}
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: ghost-ckpt-workload --mib N --dir DIR [--write-kib-per-s R]\n"
		     "\n"
		     "Start a daemon holding N MiB of patterned anonymous memory; its pid\n"
		     "goes to DIR/pid. On SIGUSR1 it writes DIR/alive, checks its memory and\n"
		     "writes DIR/verify (OK or BAD). With --write-kib-per-s it keeps\n"
		     "rewriting R KiB a second (every 10 ms) and DIR/verify also gives the\n"
		     "longest gap between its ticks since the last check, in microseconds.\n"
		     "Exit status: 0 the daemon is ready, 1 it failed to start, 2 usage error.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mib", required_argument, NULL, 'm' },
		{ "dir", required_argument, NULL, 'd' },
		{ "write-kib-per-s", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = NULL;
	unsigned long mib = 0, rate = 0;
	int opt, ready[2], devnull;
	uint64_t *mem, words, i;
	struct sigaction sa;
	sigset_t usr1, old;
	char buf[128], *end;
	pid_t pid;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			mib = strtoul(optarg, &end, 10);
			if (*end || !mib) {
				fprintf(stderr, "ghost-ckpt-workload: --mib takes a positive number\n");
				return 2;
			}
			break;
		case 'd':
			dir = optarg;
			break;
		case 'w':
			rate = strtoul(optarg, &end, 10);
			if (*end) {
				fprintf(stderr, "ghost-ckpt-workload: --write-kib-per-s takes a number\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!dir || !mib || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (dir[0] != '/') {
		/* The daemon moves to / (and a restored copy may start anywhere). */
		fprintf(stderr, "ghost-ckpt-workload: --dir must be an absolute path\n");
		return 2;
	}

	/*
	 * The parent returns when the daemon closes its end of the pipe: by
	 * then the pipe is gone from the daemon's descriptor table, so neither
	 * tool sees it.
	 */
	if (pipe2(ready, O_CLOEXEC)) {
		perror("ghost-ckpt-workload: pipe");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("ghost-ckpt-workload: fork");
		return 1;
	}
	if (pid > 0) {
		char c, path[4096];

		close(ready[1]);
		while (read(ready[0], &c, 1) < 0 && errno == EINTR)
			;
		snprintf(path, sizeof(path), "%s/pid", dir);
		return access(path, F_OK) ? 1 : 0;
	}
	/* A daemon keeps no descriptor of whoever started it but its pipe. */
	close(ready[0]);
	if (ready[1] > 3)
		close_range(3, ready[1] - 1, 0);
	close_range(ready[1] + 1, ~0U, 0);
	if (setsid() < 0) {
		perror("ghost-ckpt-workload: setsid");
		_exit(1);
	}

	words = (uint64_t)mib << 17; /* 2^20 / 8 words per MiB */
	mem = mmap(NULL, words * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("ghost-ckpt-workload: mmap");
		_exit(1);
	}
	for (i = 0; i < words; i++)
		mem[i] = pattern(i);

	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, &old);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);

	devnull = open("/dev/null", O_RDWR);
	if (devnull < 0 || chdir("/")) {
		perror("ghost-ckpt-workload: /dev/null or /");
		_exit(1);
	}
	snprintf(buf, sizeof(buf), "%d\n", getpid());
	if (put_file(dir, "pid", buf)) {
		perror("ghost-ckpt-workload: pid file");
		_exit(1);
	}
	dup2(devnull, 0);
	dup2(devnull, 1);
	dup2(devnull, 2);
	if (devnull > 2)
		close(devnull);
	close(ready[1]);

	if (rate)
		write_forever(dir, mem, words, rate);
	for (;;) {
		uint64_t bad = 0;

		/* SIGUSR1 is blocked but here, so no poke is lost between checks. */
		while (!poked)
			sigsuspend(&old);
		poked = 0;
		snprintf(buf, sizeof(buf), "%d\n", getpid());
		put_file(dir, "alive", buf);
		for (i = 0; i < words; i++)
			bad += mem[i] != pattern(i);
		if (bad)
			snprintf(buf, sizeof(buf), "BAD %llu\n", (unsigned long long)bad);
		else
			snprintf(buf, sizeof(buf), "OK %llu\n", (unsigned long long)words);
		put_file(dir, "verify", buf);
	}
}
