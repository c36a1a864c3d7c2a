// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-pipe: a reader blocked on a pipe whose write end is held outside
 * the process. The runner makes the pipe, writes "before\n" and starts the
 * workload with the read end as stdin; the workload reads that line, says
 * ready and blocks in read(2) — the checkpoint happens there. The restored
 * process must get the same pipe back (the runner hands it to the restorer:
 * ghostctl's own stdin, CRIU's --inherit-fd) and still be in its read, not
 * see a spurious EINTR or EOF, and read the "after\n" the runner writes once
 * the restore is done.
 */
#include <poll.h>

#include "oracle.h"

static char got[256];
static size_t ngot;
static ino_t pipe_ino;

static void check_fd0(void)
{
	struct stat st;

	if (fstat(0, &st) || !S_ISFIFO(st.st_mode) || st.st_ino != pipe_ino)
		oracle_fail("stdin is no longer the pipe (inode %lu, was %lu)",
			    (unsigned long)st.st_ino, (unsigned long)pipe_ino);
	if ((fcntl(0, F_GETFL) & (O_ACCMODE | O_NONBLOCK)) != O_RDONLY)
		oracle_fail("stdin flags are %#o", fcntl(0, F_GETFL));
}

/* One read(2) from the pipe; 0 on EOF, -1 on EINTR. */
static int read_some(void)
{
	ssize_t n = read(0, got + ngot, sizeof(got) - 1 - ngot);

	if (n > 0) {
		ngot += n;
		return 1;
	}
	if (n == 0) {
		oracle_fail("EOF on the pipe after %zu bytes", ngot);
		return 0;
	}
	if (errno != EINTR || !oracle_stop)
		oracle_fail("read from the pipe: %s", strerror(errno));
	return -1;
}

int main(int argc, char **argv)
{
	struct stat st;

	oracle_init(argc, argv);
	if (fstat(0, &st) || !S_ISFIFO(st.st_mode))
		oracle_die("stdin must be a pipe (the runner provides it)");
	pipe_ino = st.st_ino;
	while (!memchr(got, '\n', ngot))
		if (read_some() <= 0)
			oracle_die("no first line on the pipe");
	if (ngot != 7 || memcmp(got, "before\n", 7))
		oracle_fail("first line is '%.*s'", (int)ngot, got);

	check_fd0();
	oracle_ready();
	/* Blocked in read(2) from here until the runner writes or SIGTERM. */
	while (!oracle_stop && read_some() > 0)
		;
	oracle_phase = "final";
	check_fd0();
	/* SIGTERM may overtake the runner's line: wait for it a while. */
	while (ngot < 13) {
		struct pollfd p = { .fd = 0, .events = POLLIN };

		if (poll(&p, 1, 10000) != 1 || read_some() <= 0)
			break;
	}
	if (ngot != 13 || memcmp(got, "before\nafter\n", 13))
		oracle_fail("read '%.*s' in all, expected 'before\\nafter\\n'", (int)ngot, got);
	oracle_finish();
}
