// SPDX-License-Identifier: GPL-2.0
/*
 * Mapping attributes carried by a checkpoint and restart, with each engine
 * ($GHOST_VMATTRS_ENGINES, default "kernel user"; the kernel engine only
 * where /dev/ghost exists). A workload holds one mapping per attribute
 * (mlock, lock-on-fault, MAP_NORESERVE, MADV_DONTDUMP, WIPEONFORK,
 * DONTFORK, MERGEABLE, HUGEPAGE, NOHUGEPAGE, SEQUENTIAL, RANDOM) and a
 * read-only MAP_SHARED mapping of a file it opened read-write; it notes
 * its smaps VmFlags and VmLck, and once restored (its pid changed) checks
 * them again from inside, makes the shared mapping writable and writes
 * through it, and reports in LOG. Restarts refused before the point of no
 * return: locked memory above RLIMIT_MEMLOCK, a file that cannot be opened
 * read-write any more.
 */
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "ghost/ghost.h"
#include "ghost_util.h"
#include "kselftest_harness.h"

#define LOG "/tmp/ghost_vmattrs_test.log"
#define SHARED_FILE "/tmp/ghost_vmattrs_test.shared"
#define LEN (4 * 4096UL)
#define NMAPS 13

struct wmap {
	const char *name;
	int advice;		/* madvise, or -1 */
	char *at;
	char before[160];
	bool skipped;
};

static struct wmap maps[NMAPS] = {
	{ .name = "locked", .advice = -1 },
	{ .name = "lockonfault", .advice = -1 },
	{ .name = "noreserve", .advice = -1 },
	{ .name = "dontdump", .advice = MADV_DONTDUMP },
	{ .name = "wipeonfork", .advice = MADV_WIPEONFORK },
	{ .name = "dontfork", .advice = MADV_DONTFORK },
	{ .name = "mergeable", .advice = MADV_MERGEABLE },
	{ .name = "hugepage", .advice = MADV_HUGEPAGE },
	{ .name = "nohugepage", .advice = MADV_NOHUGEPAGE },
	{ .name = "sequential", .advice = MADV_SEQUENTIAL },
	{ .name = "random", .advice = MADV_RANDOM },
	{ .name = "shared", .advice = -1 },
	{ .name = "plain", .advice = -1 },
};

/* The VmFlags of the mapping at @at, sorted words, into @out. */
static void vmflags(const char *at, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512], *w[64];
	unsigned long start, end;
	bool in = false;
	int n = 0, i, j;

	out[0] = 0;
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = start == (unsigned long)at;
		else if (in && !strncmp(line, "VmFlags:", 8))
			break;
	}
	if (f)
		fclose(f);
	if (!in)
		return;
	for (char *t = strtok(line + 8, " \n"); t && n < 64; t = strtok(NULL, " \n"))
		w[n++] = t;
	for (i = 0; i < n; i++)		/* sorted: the order is the kernel's, keep it stable */
		for (j = i + 1; j < n; j++)
			if (strcmp(w[j], w[i]) < 0) {
				char *x = w[i];

				w[i] = w[j];
				w[j] = x;
			}
	for (i = 0; i < n; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? " " : "", w[i]);
}

static long vmlck(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/* Clears @caps (bits of the first word) from the effective set. */
static int drop_effective(__u32 caps)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[0].effective &= ~caps;
	return (int)syscall(SYS_capset, &h, d);
}

static void work_attrs(int fd)
{
	long lck0, lck;
	pid_t pid0 = getpid();
	int i, bad = 0, log, file;

	for (i = 0; i < NMAPS; i++) {
		struct wmap *m = &maps[i];
		int flags = MAP_PRIVATE | MAP_ANONYMOUS;

		if (!strcmp(m->name, "noreserve"))
			flags |= MAP_NORESERVE;
		if (!strcmp(m->name, "shared")) {
			file = open(SHARED_FILE, O_RDWR | O_CREAT | O_TRUNC, 0644);
			if (file < 0 || ftruncate(file, LEN))
				_exit(80);
			m->at = mmap(NULL, LEN, PROT_READ, MAP_SHARED, file, 0);
			close(file);
		} else {
			m->at = mmap(NULL, LEN, PROT_READ | PROT_WRITE, flags, -1, 0);
		}
		if (m->at == MAP_FAILED)
			_exit(81);
		if (m->advice >= 0 && madvise(m->at, LEN, m->advice)) {
			if (errno != EINVAL)
				_exit(82);
			m->skipped = true;	/* no KSM, no THP: said in LOG */
		}
		if (!strcmp(m->name, "locked") && mlock(m->at, LEN))
			_exit(83);
		if (!strcmp(m->name, "lockonfault") && mlock2(m->at, LEN, MLOCK_ONFAULT))
			_exit(84);
		if (strcmp(m->name, "shared"))
			m->at[0] = 'x';		/* a page to carry */
	}
	for (i = 0; i < NMAPS; i++)
		vmflags(maps[i].at, maps[i].before, sizeof(maps[i].before));
	lck0 = vmlck();
	/*
	 * An image runs with its own capabilities (CREDS): without these, as
	 * the restarters of the refusal tests below, whose refusals are the
	 * attributes' and not the credentials'.
	 */
	if (drop_effective((1u << CAP_IPC_LOCK) | (1u << CAP_DAC_OVERRIDE)))
		_exit(86);
	ready(fd, "R", 1);
	for (i = 3; i < 1024; i++)
		close(i);
	while (getpid() == pid0)
		usleep(10000);

	/* Restored. */
	log = open(LOG, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (log < 0)
		_exit(85);
	for (i = 0; i < NMAPS; i++) {
		char now[160];

		vmflags(maps[i].at, now, sizeof(now));
		if (maps[i].skipped) {
			dprintf(log, "SKIP %s: madvise refused by this kernel\n", maps[i].name);
		} else if (strcmp(now, maps[i].before) || !now[0]) {
			dprintf(log, "BAD %s: VmFlags \"%s\", were \"%s\"\n", maps[i].name, now,
				maps[i].before);
			bad = 1;
		} else {
			dprintf(log, "OK %s: %s\n", maps[i].name, now);
		}
	}
	lck = vmlck();
	dprintf(log, "%s VmLck %ld kB, was %ld kB\n", lck == lck0 && lck > 0 ? "OK" : "BAD", lck,
		lck0);
	bad |= lck != lck0 || lck <= 0;
	if (mprotect(maps[11].at, LEN, PROT_READ | PROT_WRITE)) {
		dprintf(log, "BAD shared: mprotect(PROT_WRITE): %s\n", strerror(errno));
		bad = 1;
	} else {
		memcpy(maps[11].at, "restored", 8);
		msync(maps[11].at, LEN, MS_SYNC);
		dprintf(log, "OK shared: writable\n");
	}
	close(log);
	_exit(bad);
}

/* Forks @fn and waits for its "ready" (it closes every other descriptor). */
static pid_t start(void (*fn)(int))
{
	char c;

	unlink(LOG);
	return spawn(fn, &c, 1);
}

static void show_log(struct __test_metadata *_metadata)
{
	char line[256];
	FILE *f = fopen(LOG, "r");

	while (f && fgets(line, sizeof(line), f))
		TH_LOG("%s", strtok(line, "\n"));
	if (f)
		fclose(f);
}

/* Checkpoint @pid (killed) with @engine into a temporary file. */
static int checkpoint(pid_t pid, struct ghost_error *err)
{
	int fd = open("/tmp", O_TMPFILE | O_RDWR, 0600);

	if (fd < 0 || ghost_checkpoint_fd(pid, fd, GHOST_CKPT_KILL, err)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	waitpid(pid, NULL, 0);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static bool engine_here(const char *engine)
{
	const char *want = getenv("GHOST_VMATTRS_ENGINES");

	if (want && !strstr(want, engine))
		return false;
	return strcmp(engine, "kernel") || access("/dev/ghost", F_OK) == 0;
}

FIXTURE(vmattrs) {
	pid_t worker;
};

FIXTURE_VARIANT(vmattrs) {
	const char *engine;
};

FIXTURE_VARIANT_ADD(vmattrs, kernel) { .engine = "kernel" };
FIXTURE_VARIANT_ADD(vmattrs, user) { .engine = "user" };

FIXTURE_SETUP(vmattrs)
{
	if (!engine_here(variant->engine))
		SKIP(return, "no %s engine here", variant->engine);
	setenv("GHOST_ENGINE", variant->engine, 1);
	self->worker = start(work_attrs);
	ASSERT_LT(0, self->worker);
}

/* The harness runs a test body after a SKIP in its setup: skip it again. */
#define NEED_WORKER() do { \
	if (!self->worker) \
		SKIP(return, "no %s engine here", variant->engine); \
} while (0)

FIXTURE_TEARDOWN(vmattrs)
{
	if (self->worker > 0)
		reap(self->worker);
	unlink(SHARED_FILE);
}

TEST_F(vmattrs, carried_and_checked_from_inside)
{
	struct ghost_error err;
	pid_t restored;
	char buf[9] = { 0 };
	int fd, st, file;

	NEED_WORKER();

	fd = checkpoint(self->worker, &err);
	ASSERT_LE(0, fd) TH_LOG("%s", err.reason);
	self->worker = 0;
	ASSERT_EQ(0, ghost_restart_fd(fd, &restored, &err)) TH_LOG("%s", err.reason);
	close(fd);
	ASSERT_EQ(restored, waitpid(restored, &st, 0));
	show_log(_metadata);
	ASSERT_TRUE(WIFEXITED(st)) TH_LOG("killed by signal %d", WTERMSIG(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	file = open(SHARED_FILE, O_RDONLY);
	ASSERT_LE(0, file);
	ASSERT_EQ(8, pread(file, buf, 8, 0));
	close(file);
	EXPECT_STREQ("restored", buf);
}

/*
 * In a child: without CAP_IPC_LOCK and CAP_DAC_OVERRIDE, with @memlock as
 * RLIMIT_MEMLOCK (if not 0), restart the image; 0 when refused with a reason
 * holding @want and the child still itself.
 */
static int refused_restart(int fd, rlim_t memlock, const char *want)
{
	struct ghost_error err;
	pid_t pid = fork(), restored;
	int st;

	if (pid == 0) {
		struct rlimit rl;

		if (drop_effective((1u << CAP_IPC_LOCK) | (1u << CAP_DAC_OVERRIDE)))
			_exit(70);
		getrlimit(RLIMIT_MEMLOCK, &rl);
		rl.rlim_cur = memlock;
		if (memlock && setrlimit(RLIMIT_MEMLOCK, &rl))
			_exit(71);
		if (ghost_restart_fd(fd, &restored, &err) == 0) {
			waitpid(restored, NULL, 0);
			_exit(72);
		}
		fprintf(stderr, "# refused: %s\n", err.reason);
		_exit(strstr(err.reason, want) ? 0 : 73);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST_F(vmattrs, locked_memory_above_the_restarters_limit_is_refused)
{
	struct ghost_error err;
	int fd;

	NEED_WORKER();
	fd = checkpoint(self->worker, &err);

	ASSERT_LE(0, fd) TH_LOG("%s", err.reason);
	self->worker = 0;
	EXPECT_EQ(0, refused_restart(fd, 4096, "RLIMIT_MEMLOCK"));
	close(fd);
}

TEST_F(vmattrs, shared_file_no_longer_writable_is_refused)
{
	struct ghost_error err;
	int fd;

	NEED_WORKER();
	fd = checkpoint(self->worker, &err);

	ASSERT_LE(0, fd) TH_LOG("%s", err.reason);
	self->worker = 0;
	ASSERT_EQ(0, chmod(SHARED_FILE, 0444));
	EXPECT_EQ(0, refused_restart(fd, 0, "read-write for its shared mapping"));
	close(fd);
}

TEST_HARNESS_MAIN
