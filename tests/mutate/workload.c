// SPDX-License-Identifier: GPL-2.0
/*
 * ghost-mutate-workload: a small static process to export, for the kernel
 * mutated-image test (mutate_test.cpp) and the fuzz corpus (tests/fuzz/).
 * Static, so that its image is small and holds no shared library.
 *
 * Usage: ghost-mutate-workload [idle | state | serve]
 *   idle   nothing set up: says "R" on stdout, then pause()s forever
 *   state  sets up the state below, says "R" on stdout, pause()s
 *   serve  sets up the state, says "R" on fd 4, then answers every byte read
 *          from fd 3 with one line on fd 4 (exits 0 at EOF on fd 3):
 *            "ok CRC COUNT\n"  the state is intact; CRC covers every page of
 *                              it, COUNT is the number of requests so far
 *            "bad N\n"         check N failed
 *
 * The state: a handler for SIGUSR1 and an alternate signal stack, SIGUSR2
 * blocked, patterns in .data, on the heap, in an anonymous mapping and in a
 * copied-on-write page of a private mapping of this program's file, this
 * program open as fd 5 at offset 100, cwd /tmp, umask 027, a lower
 * RLIMIT_NOFILE, and the name "ghost-mutate".
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096
#define SELF_FD 5

static unsigned char data_pat[3 * PAGE] = { 1 }; /* .data, not .bss */
static unsigned char *heap_pat, *anon_pat, *file_pat;
static char altstack[4 * PAGE];
static volatile sig_atomic_t usr1;
static unsigned long requests;

static void on_usr1(int sig)
{
	(void)sig;
	usr1++;
}

static void fill(unsigned char *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(i * 31 + seed);
}

static uint32_t crc(uint32_t c, const unsigned char *p, size_t n)
{
	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xEDB88320u & -(c & 1));
	}
	return c;
}

static void setup(void)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) };
	struct rlimit rl;
	sigset_t block;
	int fd;

	fill(data_pat, sizeof(data_pat), 1);
	heap_pat = malloc(2 * PAGE);
	fill(heap_pat, 2 * PAGE, 2);
	anon_pat = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (anon_pat == MAP_FAILED)
		_exit(70);
	fill(anon_pat, 2 * PAGE, 3);

	fd = open("/proc/self/exe", O_RDONLY);
	if (fd < 0)
		_exit(71);
	file_pat = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (file_pat == MAP_FAILED)
		_exit(72);
	fill(file_pat + PAGE, PAGE, 4);	/* page 1 copied on write, page 0 not */
	if (fd != SELF_FD) {
		if (dup2(fd, SELF_FD) != SELF_FD)
			_exit(73);
		close(fd);
	}
	if (lseek(SELF_FD, 100, SEEK_SET) != 100)
		_exit(73);

	sigaction(SIGUSR1, &sa, NULL);
	sigaltstack(&ss, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGUSR2);
	sigprocmask(SIG_BLOCK, &block, NULL);
	if (chdir("/tmp"))
		_exit(74);
	umask(027);
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max < 200 ? rl.rlim_max : 200;
	setrlimit(RLIMIT_NOFILE, &rl);
	prctl(PR_SET_NAME, "ghost-mutate");
}

/* 0 when the state is intact, else the number of the first failed check. */
static int check(uint32_t *sum)
{
	struct sigaction sa;
	sigset_t cur;
	stack_t ss;
	char cwd[64];
	mode_t m;

	*sum = crc(~0u, data_pat, sizeof(data_pat));
	*sum = crc(*sum, heap_pat, 2 * PAGE);
	*sum = crc(*sum, anon_pat, 2 * PAGE);
	*sum = crc(*sum, file_pat, 2 * PAGE);
	if (sigaction(SIGUSR1, NULL, &sa) || sa.sa_handler != on_usr1)
		return 1;
	if (sigprocmask(SIG_BLOCK, NULL, &cur) || !sigismember(&cur, SIGUSR2))
		return 2;
	if (sigaltstack(NULL, &ss) || ss.ss_sp != altstack)
		return 3;
	if (lseek(SELF_FD, 0, SEEK_CUR) != 100)
		return 4;
	if (!getcwd(cwd, sizeof(cwd)) || strcmp(cwd, "/tmp"))
		return 5;
	m = umask(027);
	if (m != 027)
		return 6;
	raise(SIGUSR1);
	if (usr1 != 1)
		return 7;
	usr1 = 0;
	return 0;
}

static void say(int fd, const char *s)
{
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		_exit(75);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "idle";
	char line[64], c;
	uint32_t sum;
	int bad;

	if (strcmp(mode, "idle")) {
		setup();
		if (check(&sum))
			_exit(76);
	}
	if (strcmp(mode, "serve")) {
		say(1, "R");
		for (;;)
			pause();
	}
	say(4, "R");
	while (read(3, &c, 1) == 1) {
		requests++;
		bad = check(&sum);
		if (bad)
			snprintf(line, sizeof(line), "bad %d\n", bad);
		else
			snprintf(line, sizeof(line), "ok %08x %lu\n", sum, requests);
		say(4, line);
	}
	return 0;
}
