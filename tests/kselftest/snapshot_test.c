// SPDX-License-Identifier: GPL-2.0
/*
 * GHOST_EXPORT_SNAPSHOT and GHOST_EXPORT_FINISH: a copy-on-write export
 * reads the process in the caller's ptrace stop and its pages from a fork of
 * it, so the process runs on while they are written. Runs as root in the VM.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "ghost_util.h"
#include "kselftest_harness.h"

#define PAGE 4096UL
#define NPAGES 4
#define MAX_SECS 4096
#define RUN_SNAPSHOT (GHOST_EXPORT_RUN | GHOST_EXPORT_SNAPSHOT)

struct forked {
	__u64 *p;	/* NPAGES of pattern in the fork, page 0 rewritten since */
	pid_t child;
};

static void fork_child(int fd)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close(fd);
	for (;;)
		pause();
}

/*
 * Fills NPAGES with the pattern, forks (the child only waits), then
 * rewrites page 0 in itself: the fork keeps the pattern. With @dontfork,
 * one more page is marked MADV_DONTFORK first.
 */
static void work_fork(int fd, int dontfork)
{
	struct forked f;
	size_t words = NPAGES * PAGE / 8;

	f.p = mmap(NULL, NPAGES * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (f.p == MAP_FAILED)
		_exit(92);
	for (size_t i = 0; i < words; i++)
		f.p[i] = pattern((unsigned long)&f.p[i]);
	if (dontfork) {
		void *q = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (q == MAP_FAILED || madvise(q, PAGE, MADV_DONTFORK))
			_exit(93);
	}
	f.child = fork();
	if (f.child == 0)
		fork_child(fd);
	for (size_t i = 0; i < PAGE / 8; i++)
		f.p[i] = ~pattern((unsigned long)&f.p[i]);
	ready(fd, &f, sizeof(f));
	for (;;)
		pause();
}

static void work_fork_plain(int fd)
{
	work_fork(fd, 0);
}

static void work_fork_dontfork(int fd)
{
	work_fork(fd, 1);
}

/*
 * Forks (the child only waits), says ready with the child's pid, then
 * loads known values into r12-r15 and xmm0/xmm1 and spins.
 */
static void work_fork_regs(int fd)
{
	pid_t child = fork();

	if (child == 0)
		fork_child(fd);
	ready(fd, &child, sizeof(child));
	spin_with_known_regs();
}

/* Stops @pid under ptrace by this thread. */
static int seize(pid_t pid)
{
	int st;

	if (ptrace(PTRACE_SEIZE, pid, 0, 0) ||
	    ptrace(PTRACE_INTERRUPT, pid, 0, 0))
		return -1;
	if (waitpid(pid, &st, __WALL) != pid || !WIFSTOPPED(st))
		return -1;
	return 0;
}

static int finish(int g, struct ghost_export *e)
{
	memset(e, 0, sizeof(*e));
	e->size = sizeof(*e);
	e->flags = GHOST_EXPORT_FINISH;
	return ioctl(g, GHOST_IOC_EXPORT, e);
}

TEST(finish_without_snapshot_is_enoent)
{
	struct ghost_export e;
	int g = ghost_new_mem();

	ASSERT_LE(0, g);
	EXPECT_EQ(-1, finish(g, &e));
	EXPECT_EQ(ENOENT, errno);
	EXPECT_NE(NULL, strstr(e.reason, "GHOST_EXPORT_SNAPSHOT"));
	close(g);
}

/* A process that has forked, and a memory ghost. */
FIXTURE(forked) {
	struct forked f;
	pid_t pid;
	int g;
};

FIXTURE_SETUP(forked)
{
	self->pid = spawn(work_fork_plain, &self->f, sizeof(self->f));
	self->g = ghost_new_mem();
	ASSERT_LT(0, self->pid);
	ASSERT_LE(0, self->g);
}

FIXTURE_TEARDOWN(forked)
{
	if (self->pid > 0)
		reap(self->pid);
	if (self->g >= 0)
		close(self->g);
}

TEST_F(forked, snapshot_goes_with_run_only)
{
	struct ghost_export e;

	EXPECT_EQ(-1, ghost_do_export_snap(self->g, self->pid, self->f.child,
					   GHOST_EXPORT_KILL | GHOST_EXPORT_SNAPSHOT,
					   &e));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, kill(self->pid, 0));
}

TEST_F(forked, snapshot_needs_the_callers_ptrace_stop)
{
	struct ghost_export e;

	EXPECT_EQ(-1, ghost_do_export_snap(self->g, self->pid, self->f.child,
					   RUN_SNAPSHOT, &e));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_NE(NULL, strstr(e.reason, "ptrace")) TH_LOG("%s", e.reason);

	/* the process held, its fork not */
	ASSERT_EQ(0, seize(self->pid));
	EXPECT_EQ(-1, ghost_do_export_snap(self->g, self->pid, self->f.child,
					   RUN_SNAPSHOT, &e));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_NE(NULL, strstr(e.reason, "snapshot")) TH_LOG("%s", e.reason);
}

TEST_F(forked, snapshot_must_be_a_fork_of_the_process)
{
	struct ghost_export e;
	char c;
	pid_t other = spawn(work_idle, &c, 1);

	ASSERT_LT(0, other);
	ASSERT_EQ(0, seize(self->pid));
	ASSERT_EQ(0, seize(other));
	EXPECT_EQ(-1, ghost_do_export_snap(self->g, self->pid, other,
					   RUN_SNAPSHOT, &e));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_NE(NULL, strstr(e.reason, "not a child")) TH_LOG("%s", e.reason);
	reap(other);
}

TEST(dontfork_memory_is_refused)
{
	struct ghost_export e;
	struct forked f;
	pid_t pid = spawn(work_fork_dontfork, &f, sizeof(f));
	int g = ghost_new_mem();

	ASSERT_LT(0, pid);
	ASSERT_LE(0, g);
	ASSERT_EQ(0, seize(pid));
	ASSERT_EQ(0, seize(f.child));
	EXPECT_EQ(-1, ghost_do_export_snap(g, pid, f.child, RUN_SNAPSHOT, &e));
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_NE(NULL, strstr(e.reason, "MADV_DONTFORK")) TH_LOG("%s", e.reason);
	EXPECT_EQ(-1, finish(g, &e));
	EXPECT_EQ(ENOENT, errno);
	reap(pid);
	close(g);
}

/*
 * The image is the process's (its pid, its mappings), its page contents
 * the fork's, and it is written after the process was let go.
 */
TEST_F(forked, pages_come_from_the_fork_after_the_process_went_on)
{
	static struct image_sec secs[MAX_SECS];
	const struct ghost_image_header *h;
	struct ghost_export e;
	pid_t pid = self->pid;
	int n, st;
	void *img;
	size_t len;

	ASSERT_EQ(0, seize(pid));
	ASSERT_EQ(0, seize(self->f.child));
	ASSERT_EQ(0, ghost_do_export_snap(self->g, pid, self->f.child,
					  RUN_SNAPSHOT, &e)) TH_LOG("%s", e.reason);
	EXPECT_EQ(0, e.bytes);
	/* Nothing written yet: the image is the second call's. */
	img = ghost_read_image(self->g, &len);
	EXPECT_EQ(0, len);
	free(img);

	ASSERT_EQ(0, ptrace(PTRACE_DETACH, pid, 0, 0));
	/* It runs: a signal is handled at once, not held. */
	ASSERT_EQ(0, kill(pid, SIGSTOP));
	ASSERT_EQ(pid, waitpid(pid, &st, WUNTRACED));
	EXPECT_TRUE(WIFSTOPPED(st));
	ASSERT_EQ(0, kill(pid, SIGCONT));

	ASSERT_EQ(0, finish(self->g, &e)) TH_LOG("%s", e.reason);
	img = ghost_read_image(self->g, &len);
	ASSERT_NE(NULL, img);
	EXPECT_EQ(e.bytes, len);
	n = image_walk(img, len, secs, MAX_SECS);
	ASSERT_LT(0, n) TH_LOG("image_walk: %d", n);
	h = img;
	EXPECT_EQ(pid, (pid_t)h->pid);
	for (unsigned long pg = 0; pg < NPAGES; pg++) {
		unsigned long a = (unsigned long)self->f.p + pg * PAGE;
		const __u64 *w = image_page(secs, n, a);

		ASSERT_NE(NULL, w) TH_LOG("page %#lx missing", a);
		for (unsigned int i = 0; i < PAGE / 8; i++)
			ASSERT_EQ(pattern(a + i * 8), w[i]);
	}
	/* one image per snapshot */
	EXPECT_EQ(-1, finish(self->g, &e));
	EXPECT_EQ(ENOENT, errno);
	free(img);
}

/* A snapshot not yet written is dropped by a new export on the ghost. */
TEST_F(forked, a_plain_export_drops_the_snapshot)
{
	struct ghost_export e;
	char c;
	pid_t other = spawn(work_idle_bare, &c, 1);	/* not holding the ghost */

	ASSERT_LT(0, other);
	ASSERT_EQ(0, seize(self->pid));
	ASSERT_EQ(0, seize(self->f.child));
	ASSERT_EQ(0, ghost_do_export_snap(self->g, self->pid, self->f.child,
					  RUN_SNAPSHOT, &e)) TH_LOG("%s", e.reason);
	ASSERT_EQ(0, ghost_do_export(self->g, other, GHOST_EXPORT_RUN, &e))
		TH_LOG("%s", e.reason);
	EXPECT_LT(0, e.bytes);
	EXPECT_EQ(-1, finish(self->g, &e));
	EXPECT_EQ(ENOENT, errno);
	reap(other);
}

/* Registers and FPU state are the process's, read in the caller's stop. */
TEST(registers_come_from_the_process)
{
	static struct image_sec secs[MAX_SECS];
	const struct ghost_xstate *xs;
	const struct ghost_regs *r;
	struct ghost_export e;
	pid_t child, pid = spawn(work_fork_regs, &child, sizeof(child));
	int g = ghost_new_mem(), n, i;
	void *img;
	size_t len;

	ASSERT_LT(0, pid);
	ASSERT_LE(0, g);
	usleep(100000);		/* let it reach the spin loop */
	ASSERT_EQ(0, seize(pid));
	ASSERT_EQ(0, seize(child));
	ASSERT_EQ(0, ghost_do_export_snap(g, pid, child, RUN_SNAPSHOT, &e))
		TH_LOG("%s", e.reason);
	ASSERT_EQ(0, ptrace(PTRACE_DETACH, pid, 0, 0));
	ASSERT_EQ(0, finish(g, &e)) TH_LOG("%s", e.reason);
	img = ghost_read_image(g, &len);
	ASSERT_NE(NULL, img);
	n = image_walk(img, len, secs, MAX_SECS);
	ASSERT_LT(0, n) TH_LOG("image_walk: %d", n);
	i = image_find(secs, n, GHOST_SEC_REGS, 0);
	ASSERT_LE(0, i);
	r = secs[i].payload;
	EXPECT_EQ(0x1111111111111111ULL, r->r12);
	EXPECT_EQ(0x2222222222222222ULL, r->r13);
	EXPECT_EQ(0x3333333333333333ULL, r->r14);
	EXPECT_EQ(0x4444444444444444ULL, r->r15);
	/* the loop is "jmp 1b": eb fe at ip (the child's text is ours) */
	EXPECT_EQ(0xfeeb, *(const __u16 *)r->ip);
	i = image_find(secs, n, GHOST_SEC_XSTATE, 0);
	ASSERT_LE(0, i);
	xs = secs[i].payload;
	ASSERT_LE(512 + 64, xs->size);
	EXPECT_EQ(0, memcmp((const __u8 *)(xs + 1) + 160, vec_pat, 32));
	free(img);
	reap(pid);
	close(g);
}

TEST_HARNESS_MAIN
