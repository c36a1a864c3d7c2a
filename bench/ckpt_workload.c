// SPDX-License-Identifier: GPL-2.0
/*
 * ghost-ckpt-workload: the process ghost_bench_vs_criu checkpoints and
 * restarts, with ghost and with CRIU alike.
 *
 *   ghost-ckpt-workload --mib N --dir DIR
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

static void usage(FILE *out)
{
	fprintf(out, "Usage: ghost-ckpt-workload --mib N --dir DIR\n"
		     "\n"
		     "Start a daemon holding N MiB of patterned anonymous memory; its pid\n"
		     "goes to DIR/pid. On SIGUSR1 it writes DIR/alive, checks its memory and\n"
		     "writes DIR/verify (OK or BAD). Exit status: 0 the daemon is ready,\n"
		     "1 it failed to start, 2 usage error.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mib", required_argument, NULL, 'm' },
		{ "dir", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = NULL;
	unsigned long mib = 0;
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
