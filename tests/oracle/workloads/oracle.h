/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The oracle workloads' protocol, in CRIU's zdtm style:
 *
 *   oracle-NAME DIR
 *
 * oracle_init() detaches the program (new session, stdout/stderr appended
 * to DIR/log, every descriptor but 0-2 closed: the runner's pipes must not
 * leak into an image), and arms SIGTERM. The workload sets up its state,
 * verifies it once, then oracle_ready() writes DIR/pid. From then on it
 * keeps verifying until SIGTERM (which the runner sends after the restore),
 * then runs a final, complete verification and oracle_finish() writes DIR/out:
 * "PASS" or "FAIL: <first failed check>", and exits.
 *
 * Between oracle_ready() and SIGTERM a workload must not change its mappings
 * or descriptors: the runner compares /proc/PID/maps and the fd table before
 * the checkpoint and after the restore.
 *
 * Each workload is one translation unit that includes this header once.
 */
#ifndef ORACLE_H
#define ORACLE_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL

static const char *oracle_dir;
static volatile sig_atomic_t oracle_stop;
static char oracle_failure[512];
static const char *oracle_phase = "setup";
static int oracle_nfail;

static inline void oracle_on_term(int sig)
{
	(void)sig;
	oracle_stop = 1;
}

/* Records a failed check (the first one is what the runner reports). */
__attribute__((format(printf, 1, 2)))
static inline void oracle_fail(const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (oracle_nfail++ < 20)	/* a steady-state loop repeats itself */
		dprintf(2, "FAIL (%s): %s\n", oracle_phase, msg);
	if (!oracle_failure[0])
		snprintf(oracle_failure, sizeof(oracle_failure), "%s: %s",
			 oracle_phase, msg);
}

static inline int oracle_failed(void)
{
	return oracle_failure[0] != 0;
}

/* Setup that cannot go on: report it and exit (the runner sees FAIL). */
static inline void oracle_finish(void);

__attribute__((noreturn, format(printf, 1, 2)))
static inline void oracle_die(const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	oracle_fail("%s (errno: %s)", msg, strerror(errno));
	oracle_finish();
	_exit(1);
}

/* DIR/name into @buf. */
static inline const char *oracle_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", oracle_dir, name);
	return buf;
}

static inline void oracle_write_file(const char *name, const char *text)
{
	char tmp[4096], path[4096];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", oracle_dir, name);
	oracle_path(path, sizeof(path), name);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
	    close(fd) || rename(tmp, path)) {
		dprintf(2, "cannot write %s: %s\n", path, strerror(errno));
		_exit(2);
	}
}

static inline void oracle_init(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = oracle_on_term };
	char path[4096];
	int fd;

	if (argc < 2 || argv[1][0] != '/') {
		fprintf(stderr, "usage: %s DIR (absolute)\n", argv[0]);
		exit(2);
	}
	oracle_dir = argv[1];
	fd = open(oracle_path(path, sizeof(path), "log"),
		  O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0 || dup2(fd, 1) != 1 || dup2(fd, 2) != 2) {
		perror(path);
		exit(2);
	}
	close(fd);
	/* Whatever else the starter left open is not the workload's state. */
	for (fd = 3; fd < 1024; fd++)
		close(fd);
	/*
	 * Detached like a zdtm test: CRIU wants the session leader in the tree.
	 * (A job-control shell makes a program started by hand a group leader,
	 * which cannot setsid; the runner never does.)
	 */
	if (getsid(0) != getpid() && setsid() < 0)
		perror("setsid");
	/* No SA_RESTART: a workload blocked in a system call sees EINTR. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	setvbuf(stdout, NULL, _IONBF, 0);
}

/* Says ready: DIR/pid appears, atomically, with this process's pid. */
static inline void oracle_ready(void)
{
	char pid[32];

	snprintf(pid, sizeof(pid), "%d\n", getpid());
	oracle_write_file("pid", pid);
	oracle_phase = "after ready";
}

/* Sleeps about @ms milliseconds; returns early on SIGTERM. */
static inline void oracle_nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The steady-state loop: @check every @ms until SIGTERM. */
static inline void oracle_wait(void (*check)(void), long ms)
{
	while (!oracle_stop) {
		if (check)
			check();
		oracle_nap(ms);
	}
	oracle_phase = "final";
}

static inline void oracle_finish(void)
{
	char out[600];

	snprintf(out, sizeof(out), oracle_failed() ? "FAIL: %s\n" : "PASS\n",
		 oracle_failure);
	oracle_write_file("out", out);
	exit(oracle_failed());
}

/* ---- memory patterns ------------------------------------------------------ */

/* A 64-bit word that depends on where it lives and on a seed. */
static inline uint64_t oracle_pat(uintptr_t addr, uint64_t seed)
{
	uint64_t x = (addr ^ seed) * 0x9E3779B97F4A7C15ULL;

	return x ^ (x >> 29) ^ 0x5A5A5A5A5A5A5A5AULL;
}

static inline void oracle_fill(void *p, size_t len, uint64_t seed)
{
	uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = oracle_pat((uintptr_t)&w[i], seed);
}

/* Offset of the first word of [p, p+len) off the pattern, or -1. */
static inline long oracle_check_fill(const void *p, size_t len, uint64_t seed)
{
	const uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i] != oracle_pat((uintptr_t)&w[i], seed))
			return (long)(i * 8);
	return -1;
}

/* 1 if [p, p+len) is all zero bytes. */
static inline int oracle_is_zero(const void *p, size_t len)
{
	const uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i])
			return 0;
	return 1;
}

static inline void *oracle_mmap(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		oracle_die("mmap %zu bytes", len);
	return p;
}

/* Whole contents of a (small) file into @buf, NUL-terminated; length or -1. */
static inline ssize_t oracle_slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t r;

	if (fd < 0)
		return -1;
	while (n < len - 1 && (r = read(fd, buf + n, len - 1 - n)) > 0)
		n += r;
	close(fd);
	buf[n] = 0;
	return n;
}

#endif /* ORACLE_H */
