// SPDX-License-Identifier: GPL-2.0
/*
 * libghost's C API (ghost/ghost.h) against the real module: checkpoint to a
 * descriptor, restart as a new child, duplicate, and the error contract
 * (-1, errno, a reason; the caller unharmed).
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "ghost/ghost.h"
#include "ghost_util.h"
#include "kselftest_harness.h"

#define LOG "/tmp/ghost_capi_test.log"
#define BUF_PAGES 64

static volatile sig_atomic_t poked;

static void on_usr1(int sig)
{
	(void)sig;
	poked = 1;
}

/*
 * Holds a patterned buffer; on each SIGUSR1 checks it and appends
 * "OK|BAD pid n" to LOG, reopened by path after a restart.
 */
static void work_report(int fd)
{
	__u64 *buf = malloc(BUF_PAGES * 4096);
	unsigned long i, n = 0;
	int log = open(LOG, O_WRONLY | O_APPEND | O_CREAT, 0600);

	if (!buf || log < 0)
		_exit(91);
	for (i = 0; i < BUF_PAGES * 512; i++)
		buf[i] = pattern((unsigned long)&buf[i]);
	sigset_t usr1, others;

	signal(SIGUSR1, on_usr1);
	/* SIGUSR1 only arrives inside sigsuspend(): a poke sent while the
	 * process is being restored waits for it instead of being missed.
	 */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, &others);
	ready(fd, "R", 1);
	for (;;) {
		int good = 1;

		while (!poked)
			sigsuspend(&others);
		poked = 0;
		for (i = 0; i < BUF_PAGES * 512; i++)
			good &= buf[i] == pattern((unsigned long)&buf[i]);
		dprintf(log, "%s %d %lu\n", good ? "OK" : "BAD", getpid(), ++n);
	}
}

/*
 * work_report with one more page that a fork does not copy
 * (MADV_DONTFORK): no copy-on-write snapshot can be made of it.
 */
static void work_report_dontfork(int fd)
{
	void *q = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (q == MAP_FAILED || madvise(q, 4096, MADV_DONTFORK))
		_exit(93);
	work_report(fd);
}

/* Reports of @pid in LOG so far; *last gets the newest one's count. */
static int reports(pid_t pid, long *last)
{
	char line[128], want[32];
	FILE *f = fopen(LOG, "r");
	int n = 0;

	snprintf(want, sizeof(want), " %d ", pid);
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "OK ", 3) == 0 && strstr(line, want)) {
			*last = strtol(strrchr(line, ' ') + 1, NULL, 10);
			n++;
		}
	}
	if (f)
		fclose(f);
	return n;
}

/* Pokes @pid and waits for its new report line; returns its count, or -1. */
static long poke(pid_t pid)
{
	long last = -1;
	int before = reports(pid, &last), tries;

	kill(pid, SIGUSR1);
	for (tries = 0; tries < 200; tries++) {
		if (reports(pid, &last) > before)
			return last;
		usleep(50000);
	}
	return -1;
}

FIXTURE(capi) {
	pid_t worker;
};

FIXTURE_SETUP(capi)
{
	char c;

	unlink(LOG);
	self->worker = spawn(work_report, &c, 1);
	ASSERT_GT(self->worker, 0);
}

FIXTURE_TEARDOWN(capi)
{
	reap(self->worker);
	unlink(LOG);
}

TEST_F(capi, features)
{
	struct ghost_error err;
	uint64_t f = 0;

	ASSERT_EQ(0, ghost_get_features(&f, &err)) TH_LOG("%s", err.reason);
	EXPECT_EQ(GHOST_FEAT_EXPORT | GHOST_FEAT_IMPORT,
		  f & (GHOST_FEAT_EXPORT | GHOST_FEAT_IMPORT));
	EXPECT_EQ(0, err.code);
	EXPECT_NE(NULL, strchr(ghost_library_version(), '.'));
}

TEST_F(capi, checkpoint_then_restart_continues)
{
	struct ghost_error err;
	int fd = open("/tmp", O_TMPFILE | O_RDWR, 0600);
	pid_t restored;
	long before;

	ASSERT_LE(0, fd);
	before = poke(self->worker);
	ASSERT_EQ(1, before);
	ASSERT_EQ(0, ghost_checkpoint_fd(self->worker, fd, GHOST_CKPT_KILL, &err))
		TH_LOG("%s", err.reason);
	/* killed only after the image was complete; reaped by us, its parent */
	ASSERT_EQ(self->worker, waitpid(self->worker, NULL, 0));
	ASSERT_EQ(0, lseek(fd, 0, SEEK_SET));
	ASSERT_EQ(0, ghost_restart_fd(fd, &restored, &err)) TH_LOG("%s", err.reason);
	close(fd);
	self->worker = restored;	/* the teardown reaps it */
	/* same memory, same count: the next report says 2 */
	EXPECT_EQ(2, poke(restored));
}

TEST_F(capi, compressed_checkpoint_leaves_running)
{
	struct ghost_error err;
	int fd = open("/tmp", O_TMPFILE | O_RDWR, 0600);
	unsigned char magic[4];
	pid_t restored;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ghost_checkpoint_fd(self->worker, fd,
					 GHOST_CKPT_LEAVE_RUNNING | GHOST_CKPT_COMPRESS, &err))
		TH_LOG("%s", err.reason);
	EXPECT_EQ(1, poke(self->worker));
	ASSERT_EQ(4, pread(fd, magic, 4, 0));
	EXPECT_EQ(0x28, magic[0]);
	EXPECT_EQ(0xfd, magic[3]);
	ASSERT_EQ(0, lseek(fd, 0, SEEK_SET));
	ASSERT_EQ(0, ghost_restart_fd(fd, &restored, &err)) TH_LOG("%s", err.reason);
	close(fd);
	EXPECT_EQ(1, poke(restored));	/* the image was taken before the poke */
	reap(restored);
}

/*
 * A process that cannot be forked whole is checkpointed the plain way,
 * held for the whole export: still running afterwards, its image whole.
 */
TEST(leave_running_without_a_snapshot_falls_back)
{
	struct ghost_error err;
	pid_t worker, restored;
	char c;
	int fd;

	unlink(LOG);
	worker = spawn(work_report_dontfork, &c, 1);
	ASSERT_GT(worker, 0);
	fd = open("/tmp", O_TMPFILE | O_RDWR, 0600);	/* not the worker's */
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ghost_checkpoint_fd(worker, fd, GHOST_CKPT_LEAVE_RUNNING, &err))
		TH_LOG("%s", err.reason);
	EXPECT_EQ(1, poke(worker));
	ASSERT_EQ(0, lseek(fd, 0, SEEK_SET));
	ASSERT_EQ(0, ghost_restart_fd(fd, &restored, &err)) TH_LOG("%s", err.reason);
	close(fd);
	EXPECT_EQ(1, poke(restored));	/* the image was taken before the poke */
	reap(restored);
	reap(worker);
	unlink(LOG);
}

TEST_F(capi, duplicate_is_independent)
{
	struct ghost_error err;
	pid_t copy;

	ASSERT_EQ(0, ghost_duplicate(self->worker, &copy, &err)) TH_LOG("%s", err.reason);
	ASSERT_NE(self->worker, copy);
	EXPECT_EQ(1, poke(copy));
	EXPECT_EQ(2, poke(copy));
	EXPECT_EQ(1, poke(self->worker));	/* its own count, untouched by the copy's */
	reap(copy);
}

TEST_F(capi, errors_leave_the_caller_unharmed)
{
	struct ghost_error err;
	char junk[8192];
	pid_t pid;
	int fd;

	EXPECT_EQ(-1, ghost_checkpoint_fd(999999, 1, 0, &err));
	EXPECT_EQ(ESRCH, errno);
	EXPECT_EQ(ESRCH, err.code);
	EXPECT_NE(NULL, strstr(err.reason, "no process"));

	EXPECT_EQ(-1, ghost_checkpoint_fd(self->worker, 1, 0x80, &err));
	EXPECT_EQ(EINVAL, err.code);
	EXPECT_EQ(-1, ghost_checkpoint_fd(self->worker, 1, 0x3, NULL));
	EXPECT_EQ(EINVAL, errno);

	fd = open("/tmp", O_TMPFILE | O_RDWR, 0600);
	ASSERT_LE(0, fd);
	memset(junk, 0x5a, sizeof(junk));
	ASSERT_EQ((ssize_t)sizeof(junk), pwrite(fd, junk, sizeof(junk), 0));
	EXPECT_EQ(-1, ghost_restart_fd(fd, &pid, &err));
	EXPECT_NE(NULL, strstr(err.reason, "not a ghost image")) TH_LOG("%s", err.reason);
	EXPECT_EQ(-1, ghost_restart_self_fd(fd, &err));
	EXPECT_NE(NULL, strstr(err.reason, "not a ghost image")) TH_LOG("%s", err.reason);
	close(fd);
	/* still here, and the worker too */
	EXPECT_EQ(1, poke(self->worker));
}

TEST_HARNESS_MAIN
