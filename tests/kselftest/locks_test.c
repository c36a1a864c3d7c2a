// SPDX-License-Identifier: GPL-2.0
/*
 * Lock order, observed on a kernel without lockdep: each test stalls the
 * module at the point where it holds a lock, and checks that a task needing
 * the other lock of a former inversion still gets through.
 *  - A read of a memory ghost's image is stalled in its copy to user space
 *    (a userfaultfd page) while it holds the ghost's lock; an mmap() of the
 *    same ghost must not wait for that lock under its own mmap_lock.
 *  - An export into a full pipe is stalled in the pipe's write; it must not
 *    hold the exported process's mmap_lock there, or a writer of that mm
 *    (here /proc/PID/clear_refs, which takes mmap_lock for writing) waits
 *    for whoever drains the pipe.
 * Each scenario runs in a child with a deadline: a stuck child is killed and
 * the test fails instead of hanging.
 */
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>

#include "ghost_util.h"
#include "kselftest_harness.h"

#define PAGE 4096UL

/* Waits up to @ms for @pid; its exit status, or -1 (then it is killed). */
static int wait_deadline(pid_t pid, int ms)
{
	int st;

	for (int t = 0; t < ms; t += 10) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* ---- the ghost's lock against mmap_lock ------------------------------------ */

static int ghost_fd;
static char *stall_buf;
static volatile int mapped;	/* 1: mmap returned */

static void *reader(void *arg)
{
	(void)arg;
	lseek(ghost_fd, 0, SEEK_SET);
	if (read(ghost_fd, stall_buf, PAGE) < 0)
		return NULL;
	return NULL;
}

static void *mapper(void *arg)
{
	void *p = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, ghost_fd, 0);

	(void)arg;
	mapped = 1;
	if (p != MAP_FAILED)
		munmap(p, PAGE);
	return NULL;
}

/* In a child: 0 when the mmap got through while the read was stalled. */
static int mmap_during_stalled_read(void)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	struct uffdio_zeropage zero = { 0 };
	struct pollfd pfd;
	pthread_t r, m;
	int uffd, i;

	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api))
		return 10;
	stall_buf = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	reg.range.start = (unsigned long)stall_buf;
	reg.range.len = PAGE;
	if (stall_buf == MAP_FAILED || ioctl(uffd, UFFDIO_REGISTER, &reg))
		return 11;
	if (pthread_create(&r, NULL, reader, NULL))
		return 12;
	/* The reader is in its copy to user, inside the module's read. */
	pfd = (struct pollfd){ .fd = uffd, .events = POLLIN };
	if (poll(&pfd, 1, 5000) != 1)
		return 13;
	if (pthread_create(&m, NULL, mapper, NULL))
		return 14;
	for (i = 0; i < 300 && !mapped; i++)
		usleep(10000);
	if (!mapped)
		return 1;	/* stuck: the kernel side waits for the read */
	zero.range = reg.range;
	if (ioctl(uffd, UFFDIO_ZEROPAGE, &zero))
		return 15;
	pthread_join(r, NULL);
	pthread_join(m, NULL);
	return 0;
}

TEST(mmap_of_a_ghost_does_not_wait_for_a_stalled_read)
{
	struct ghost_export e;
	char c;
	pid_t pid = spawn(work_idle, &c, 1), child;

	ASSERT_LT(0, pid);
	ghost_fd = ghost_new_mem();
	ASSERT_LE(0, ghost_fd);
	ASSERT_EQ(0, ghost_do_export(ghost_fd, pid, GHOST_EXPORT_KILL, &e)) TH_LOG("%s", e.reason);
	waitpid(pid, NULL, 0);

	child = fork();
	if (child == 0)
		_exit(mmap_during_stalled_read());
	ASSERT_LT(0, child);
	EXPECT_EQ(0, wait_deadline(child, 15000))
		TH_LOG("1: mmap waited for the stalled read; -1: the child hung; else a setup step");
	close(ghost_fd);
}

/* ---- an export stalled on a full pipe against the target's mmap_lock ------- */

/* Dirties 8 MiB: an image far larger than a pipe's buffer. */
static void work_dirty(int fd)
{
	char *p = mmap(NULL, 8 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		_exit(80);
	memset(p, 0x5a, 8 << 20);
	work_idle_bare(fd);
}

static void clear_refs(pid_t pid)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/clear_refs", pid);
	fd = open(path, O_WRONLY);
	/* 4: clear soft-dirty bits, done under mmap_lock held for writing */
	_exit(fd >= 0 && write(fd, "4", 1) == 1 ? 0 : 2);
}

TEST(export_stalled_on_a_full_pipe_holds_no_mmap_lock)
{
	char c, buf[65536];
	int p[2], st = -1, rc;
	pid_t pid = spawn(work_dirty, &c, 1), exporter, writer;

	ASSERT_LT(0, pid);
	ASSERT_EQ(0, pipe(p));
	exporter = fork();
	if (exporter == 0) {
		struct ghost_export e;
		int g = ghost_new();

		close(p[0]);
		if (g < 0 || ghost_plug(g, GHOST_RES_FILE, p[1]))
			_exit(20);
		_exit(ghost_do_export(g, pid, GHOST_EXPORT_RUN, &e) ? 21 : 0);
	}
	ASSERT_LT(0, exporter);
	close(p[1]);
	usleep(500000);		/* the pipe (64 KiB) is full long before 8 MiB */

	writer = fork();
	if (writer == 0)
		clear_refs(pid);
	ASSERT_LT(0, writer);
	rc = wait_deadline(writer, 5000);

	/* Drain the pipe: the export finishes either way. */
	while (read(p[0], buf, sizeof(buf)) > 0)
		;
	close(p[0]);
	waitpid(exporter, &st, 0);
	EXPECT_EQ(0, rc) TH_LOG("-1: the mm's writer waited for the pipe's reader");
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) TH_LOG("exporter status %#x", st);
	EXPECT_EQ(0, kill(pid, 0));
	reap(pid);
}

TEST_HARNESS_MAIN
