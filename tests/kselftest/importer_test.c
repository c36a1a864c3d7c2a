// SPDX-License-Identifier: GPL-2.0
/*
 * What an import refuses before its point of no return, leaving the caller
 * alive: an importer that shares its memory or descriptor table, a 32-bit
 * caller, descriptors no RLIMIT_NOFILE admits, file mappings vm_mmap()
 * would refuse (a directory, /dev/null, an offset past the largest file),
 * more mappings than vm.max_map_count, a mapping larger than memory and
 * swap under vm.overcommit_memory 0. And what it restores exactly: a
 * process that lowered RLIMIT_NOFILE below descriptors it kept;
 * descriptors at 100 and 200 and nothing else. And
 * GHOST_IMPORT_STOPPED: the restored process stops before it runs, until
 * SIGCONT; SIGKILL then leaves nothing.
 */
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>

#include "ghost/c/restore_self.h"
#include "ghost_util.h"
#include "kselftest_harness.h"

#define PAGE 4096UL
#define MAPFILE "/tmp/ghost-mapped"

static int ctl[2];		/* test -> workload: "go" */

static int export_kill(pid_t pid, int g)
{
	struct ghost_export e;
	int err = ghost_do_export(g, pid, GHOST_EXPORT_KILL, &e);

	if (err)
		fprintf(stderr, "export: %s\n", e.reason);
	else
		waitpid(pid, NULL, 0);
	return err;
}

/* An exported idle process in a memory ghost, or -1. */
static int idle_image(void)
{
	char c;
	pid_t pid = spawn(work_idle, &c, 1);
	int g = ghost_new_mem();

	if (pid < 0 || g < 0 || export_kill(pid, g))
		return -1;
	return g;
}

/* ---- importers that share what a restore replaces ------------------------ */

static int shared_g;
static volatile int shared_result;

static int import_in_clone(void *arg)
{
	struct ghost_import im;

	(void)arg;
	shared_result = ghost_prepare_import(shared_g, &im) ? errno : 0;
	return shared_result == EBUSY ? 0 : 1;
}

/* A clone() child with @flags prepares an import; 0 if refused with EBUSY. */
static int import_from_clone(int flags)
{
	static char stack[256 << 10] __attribute__((aligned(16)));
	int st = -1;
	pid_t pid = clone(import_in_clone, stack + sizeof(stack), flags | SIGCHLD, NULL);

	if (pid < 0)
		return -1;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

TEST(importer_sharing_memory_or_descriptors_is_refused)
{
	struct ghost_import im;
	pid_t pid;
	int st = -1;

	shared_g = idle_image();
	ASSERT_LE(0, shared_g);
	EXPECT_EQ(0, import_from_clone(CLONE_FILES)) TH_LOG("CLONE_FILES: errno %d", shared_result);
	EXPECT_EQ(0, import_from_clone(CLONE_VM)) TH_LOG("CLONE_VM: errno %d", shared_result);

	pid = vfork();
	if (pid == 0) {
		int r = ghost_prepare_import(shared_g, &im) ? errno : 0;

		_exit(r == EBUSY ? 0 : 1);
	}
	ASSERT_LT(0, pid);
	waitpid(pid, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) TH_LOG("vfork: status %#x", st);
	close(shared_g);
}

/* ioctl(2) through the 32-bit entry (int $0x80 works from a 64-bit process). */
static long ioctl32(int fd, unsigned int cmd, void *arg)
{
	long ret;

	asm volatile("int $0x80"
		     : "=a"(ret)
		     : "a"(54L), "b"((long)fd), "c"((long)cmd), "d"(arg)
		     : "memory", "r8", "r9", "r10", "r11");
	return ret;
}

TEST(a_32bit_importer_is_refused)
{
	struct ghost_import *im;
	int g = idle_image();

	ASSERT_LE(0, g);
	im = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT,
		  -1, 0);
	ASSERT_NE(MAP_FAILED, im);
	memset(im, 0, sizeof(*im));
	im->size = sizeof(*im);
	im->flags = GHOST_IMPORT_PREPARE;
	EXPECT_EQ(-EOPNOTSUPP, ioctl32(g, GHOST_IOC_IMPORT, im));
	EXPECT_NE(NULL, strstr(im->reason, "32-bit")) TH_LOG("%s", im->reason);
	close(g);
}

/* ---- limits and descriptors ----------------------------------------------- */

/* Holds a file at fd 100 and lowers RLIMIT_NOFILE to 64 below it. */
static void work_low_nofile(int fd)
{
	struct rlimit rl = { .rlim_cur = 64, .rlim_max = 64 };
	int f = open("/tmp/ghost-nofile", O_RDWR | O_CREAT | O_TRUNC, 0600);
	char go[2];

	if (f < 0 || dup2(f, 100) != 100 || setrlimit(RLIMIT_NOFILE, &rl))
		_exit(60);
	close(f);
	ready(fd, "R", 1);
	if (read(ctl[0], go, 2) != 2)
		_exit(61);
	if (fcntl(100, F_GETFD) < 0)
		_exit(62);
	getrlimit(RLIMIT_NOFILE, &rl);
	_exit(rl.rlim_cur == 64 && rl.rlim_max == 64 ? 0 : 63);
}

static pid_t importer(int g, rlim_t nofile)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct rlimit rl = { .rlim_cur = nofile, .rlim_max = nofile };
		struct ghost_import im;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		drop_shared_anon();
		if (nofile && setrlimit(RLIMIT_NOFILE, &rl))
			_exit(101);
		ghost_restore_self(g, &im);
		fprintf(stderr, "import refused: %s (%s)\n", strerror(errno), im.reason);
		_exit(errno == EMFILE ? 102 : 100);
	}
	return pid;
}

TEST(a_fd_above_the_images_nofile_limit_restores)
{
	char c;
	pid_t pid, imp;
	int g, st = -1;

	ASSERT_EQ(0, pipe(ctl));
	pid = spawn(work_low_nofile, &c, 1);
	ASSERT_LT(0, pid);
	g = ghost_new_mem();	/* after the spawn: not inherited */
	ASSERT_EQ(0, export_kill(pid, g));

	/* Under the importer's limit (1024 here) fd 100 goes in. */
	imp = importer(g, 0);
	ASSERT_LT(0, imp);
	usleep(300000);
	ASSERT_EQ(2, write(ctl[1], "go", 2));
	waitpid(imp, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) TH_LOG("status %#x", st);

	/* Under no limit that admits it, refused with the importer alive. */
	imp = importer(g, 50);
	ASSERT_LT(0, imp);
	waitpid(imp, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 102) TH_LOG("status %#x", st);
	close(g);
}

/* fds 100 and 200 are two files; everything else it had came from spawn(). */
static void work_high_fds(int fd)
{
	int a = open("/tmp/ghost-fd100", O_RDWR | O_CREAT | O_TRUNC, 0600);
	int b = open("/tmp/ghost-fd200", O_RDWR | O_CREAT | O_TRUNC, 0600);
	char go[2];

	if (a < 0 || b < 0 || dup2(a, 100) != 100 || dup2(b, 200) != 200)
		_exit(70);
	close(a);
	close(b);
	ready(fd, "R", 1);
	if (read(ctl[0], go, 2) != 2)
		_exit(71);
	_exit(0);
}

/* The numbers in /proc/PID/fd, as " 0 1 2 ... " in ascending order. */
static void fd_list(pid_t pid, char *out, size_t len)
{
	char path[64];
	size_t n = 0;

	out[0] = 0;
	for (int fd = 0; fd < 1024; fd++) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
		if (!access(path, F_OK) && n < len)
			n += snprintf(out + n, len - n, " %d", fd);
	}
}

TEST(placeholder_descriptors_are_closed)
{
	char c, before[4096], after[4096] = "", image[] = "/tmp/ghost-hifd.img";
	int out, st = -1;
	pid_t pid, imp;

	ASSERT_EQ(0, pipe(ctl));
	pid = spawn(work_high_fds, &c, 1);
	ASSERT_LT(0, pid);
	fd_list(pid, before, sizeof(before));
	ASSERT_NE(NULL, strstr(before, " 100 200"));
	out = open(image, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, out);
	{
		int g = ghost_new();

		ASSERT_EQ(0, ghost_plug(g, GHOST_RES_FILE, out));
		ASSERT_EQ(0, export_kill(pid, g));
		close(g);
	}
	close(out);

	/* Through the restore stub, with the test's pipes inherited. */
	imp = fork();
	if (imp == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		drop_shared_anon();
		execlp("ghost-restore", "ghost-restore", image, (char *)NULL);
		_exit(120);
	}
	ASSERT_LT(0, imp);
	for (int i = 0; i < 300 && strcmp(before, after); i++) {
		usleep(20000);
		fd_list(imp, after, sizeof(after));
	}
	EXPECT_STREQ(before, after);
	ASSERT_EQ(2, write(ctl[1], "go", 2));
	waitpid(imp, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) TH_LOG("status %#x", st);
	unlink(image);
}

/* ---- file mappings vm_mmap() would refuse --------------------------------- */

static void work_mapped(int fd)
{
	int f = open(MAPFILE, O_RDWR | O_CREAT | O_TRUNC, 0600);
	char *m;

	if (f < 0 || ftruncate(f, PAGE))
		_exit(75);
	m = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE, f, 0);
	close(f);
	if (m == MAP_FAILED)
		_exit(76);
	ready(fd, "R", 1);
	for (;;)
		pause();
}

/* Imports @g in a child; 0 if refused with @want and the child lived on. */
static int refused_with(int g, int want, char *reason)
{
	int p[2], st = -1;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct ghost_import im;

		drop_shared_anon();
		ghost_restore_self(g, &im);
		if (write(p[1], im.reason, sizeof(im.reason)) < 0)
			_exit(2);
		_exit(errno == want ? 0 : 1);
	}
	close(p[1]);
	reason[0] = 0;
	if (read(p[0], reason, GHOST_REASON_LEN) < 0)
		reason[0] = 0;
	close(p[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

TEST(mapping_a_directory_or_dev_null_is_refused)
{
	char c, reason[GHOST_REASON_LEN];
	pid_t pid = spawn(work_mapped, &c, 1);
	int g = ghost_new_mem();

	ASSERT_LT(0, pid);
	ASSERT_EQ(0, export_kill(pid, g));

	/* The mapped file became a directory... */
	ASSERT_EQ(0, unlink(MAPFILE));
	ASSERT_EQ(0, mkdir(MAPFILE, 0700));
	EXPECT_EQ(0, refused_with(g, ENODEV, reason)) TH_LOG("%s", reason);
	EXPECT_NE(NULL, strstr(reason, "cannot be mapped")) TH_LOG("%s", reason);
	/* ...or /dev/null. */
	ASSERT_EQ(0, rmdir(MAPFILE));
	ASSERT_EQ(0, symlink("/dev/null", MAPFILE));
	EXPECT_EQ(0, refused_with(g, ENODEV, reason)) TH_LOG("%s", reason);
	/* ...or a FIFO: refused before an open that would wait for a writer. */
	ASSERT_EQ(0, unlink(MAPFILE));
	ASSERT_EQ(0, mkfifo(MAPFILE, 0600));
	EXPECT_EQ(0, refused_with(g, ENODEV, reason)) TH_LOG("%s", reason);
	EXPECT_NE(NULL, strstr(reason, "not a regular file")) TH_LOG("%s", reason);
	unlink(MAPFILE);
	close(g);
}

#define OPENFILE "/tmp/ghost-opened"

static void work_open_file(int fd)
{
	int f = open(OPENFILE, O_RDONLY | O_CREAT, 0600);

	if (f < 0)
		_exit(75);
	ready(fd, "R", 1);
	for (;;)
		pause();
}

/*
 * A descriptor's file that became a FIFO is refused before it is opened
 * again: the open would wait for a writer (or wake one).
 */
TEST(a_reopened_file_that_became_a_fifo_is_refused_without_opening_it)
{
	char c, reason[GHOST_REASON_LEN];
	pid_t pid;
	int g;

	unlink(OPENFILE);
	pid = spawn(work_open_file, &c, 1);
	g = ghost_new_mem();	/* not inherited by the worker */
	ASSERT_LT(0, pid);
	ASSERT_EQ(0, export_kill(pid, g));
	ASSERT_EQ(0, unlink(OPENFILE));
	ASSERT_EQ(0, mkfifo(OPENFILE, 0600));
	EXPECT_EQ(0, refused_with(g, EBADMSG, reason)) TH_LOG("%s", reason);
	EXPECT_NE(NULL, strstr(reason, "no longer the same kind of file")) TH_LOG("%s", reason);
	unlink(OPENFILE);
	close(g);
}

TEST(a_file_offset_past_the_largest_file_is_refused)
{
	static struct image_sec secs[4096];
	char c, reason[GHOST_REASON_LEN];
	pid_t pid = spawn(work_mapped, &c, 1);
	int g = ghost_new_mem(), n, i, g2;
	struct ghost_end *end;
	struct ghost_vma *v;
	size_t len;
	char *img;

	ASSERT_LT(0, pid);
	ASSERT_EQ(0, export_kill(pid, g));
	img = ghost_read_image(g, &len);
	close(g);
	n = image_walk(img, len, secs, 4096);
	ASSERT_LT(0, n);
	for (i = 0; i < n; i++) {
		v = (struct ghost_vma *)secs[i].payload;
		if (secs[i].hdr->type == GHOST_SEC_VMA && (v->flags & GHOST_VMA_FILE) &&
		    !memcmp(v + 1, MAPFILE, strlen(MAPFILE)))
			break;
	}
	ASSERT_LT(i, n);
	v->pgoff = (~0ULL >> 1) >> 12;	/* offset + length wraps past 2^63 */
	end = (struct ghost_end *)secs[n - 1].payload;
	image_set_sum(img, secs[n - 1].off, end);
	ASSERT_EQ(n, image_walk(img, len, secs, 4096));

	g2 = ghost_new_mem();
	ASSERT_EQ((ssize_t)len, write(g2, img, len));
	EXPECT_EQ(0, refused_with(g2, EBADMSG, reason)) TH_LOG("%s", reason);
	close(g2);
	free(img);
	unlink(MAPFILE);
}

/* ---- more mappings than vm.max_map_count ---------------------------------- */

#define MANY_MAPS 300
#define MAX_MAP_COUNT "/proc/sys/vm/max_map_count"

/* A read-only area with every other page inaccessible: a mapping a page. */
static void work_many_maps(int fd)
{
	char *m = mmap(NULL, 2 * MANY_MAPS * PAGE, PROT_READ,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int i;

	if (m == MAP_FAILED)
		_exit(75);
	for (i = 0; i < MANY_MAPS; i++)
		if (mprotect(m + (2 * i + 1) * PAGE, PAGE, PROT_NONE))
			_exit(76);
	ready(fd, "R", 1);
	for (;;)
		pause();
}

/*
 * Where vm.max_map_count is lower than the image's mappings (the source's
 * limit was higher), the import is refused before its point of no return:
 * vm_mmap() past the limit would fail with the caller's memory gone.
 */
TEST(more_mappings_than_vm_max_map_count_are_refused)
{
	static struct image_sec secs[4096];
	char c, reason[GHOST_REASON_LEN], want[128], old[32] = "", low[32];
	pid_t pid = spawn(work_many_maps, &c, 1);
	int g = ghost_new_mem(), n, i, maps = 0, f, rc, g2;
	size_t len;
	char *img;

	ASSERT_LT(0, pid);
	ASSERT_EQ(0, export_kill(pid, g));
	img = ghost_read_image(g, &len);
	close(g);
	ASSERT_NE(NULL, img);
	n = image_walk(img, len, secs, 4096);
	ASSERT_LT(0, n);
	for (i = 0; i < n; i++)
		maps += secs[i].hdr->type == GHOST_SEC_VMA;
	ASSERT_LT(MANY_MAPS, maps);
	g2 = ghost_new_mem();
	ASSERT_EQ((ssize_t)len, write(g2, img, len));
	free(img);

	f = open(MAX_MAP_COUNT, O_RDONLY);
	ASSERT_LE(0, f);
	ASSERT_LT(0, read(f, old, sizeof(old) - 1));
	close(f);
	snprintf(low, sizeof(low), "%d", maps - 1);
	ASSERT_EQ(0, write_text(MAX_MAP_COUNT, low));
	rc = refused_with(g2, ENOMEM, reason);
	ASSERT_EQ(0, write_text(MAX_MAP_COUNT, old));
	EXPECT_EQ(0, rc) TH_LOG("%s", reason);
	snprintf(want, sizeof(want),
		 "the image has %d mappings, more than vm.max_map_count (%d)",
		 maps, maps - 1);
	EXPECT_NE(NULL, strstr(reason, want)) TH_LOG("%s", reason);
	close(g2);
}

/* ---- a mapping larger than memory and swap --------------------------------- */

#define OVERCOMMIT "/proc/sys/vm/overcommit_memory"

static unsigned long big_len;	/* memory and swap, and 1 GiB more */

/* One private writable mapping of @big_len, made under overcommit 1. */
static void work_big_mapping(int fd)
{
	if (mmap(NULL, big_len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
		_exit(75);
	ready(fd, "R", 1);
	for (;;)
		pause();
}

/*
 * Under vm.overcommit_memory 0 one private writable mapping larger than
 * memory and swap together is refused by mmap(); a source under 1 (or with
 * more memory) could hold one. The import is refused before its point of no
 * return, the caller alive, rather than killed by the vm_mmap() after it.
 */
TEST(a_mapping_larger_than_memory_and_swap_is_refused_under_overcommit_0)
{
	char c, reason[GHOST_REASON_LEN], want[160], old[16] = "";
	struct sysinfo si;
	unsigned long long kib;
	pid_t pid;
	int g, f, rc;

	ASSERT_EQ(0, sysinfo(&si));
	kib = ((unsigned long long)si.totalram + si.totalswap) * si.mem_unit >> 10;
	big_len = (kib + (1UL << 20)) << 10;
	f = open(OVERCOMMIT, O_RDONLY);
	ASSERT_LE(0, f);
	ASSERT_LT(0, read(f, old, sizeof(old) - 1));
	close(f);
	ASSERT_EQ(0, write_text(OVERCOMMIT, "1"));
	pid = spawn(work_big_mapping, &c, 1);
	ASSERT_EQ(0, write_text(OVERCOMMIT, "0"));
	ASSERT_LT(0, pid);
	g = ghost_new_mem();
	ASSERT_EQ(0, export_kill(pid, g));
	rc = refused_with(g, ENOMEM, reason);
	ASSERT_EQ(0, write_text(OVERCOMMIT, old));
	EXPECT_EQ(0, rc) TH_LOG("%s", reason);
	snprintf(want, sizeof(want),
		 " (%llu KiB) exceeds RAM+swap (%llu KiB), vm.overcommit_memory 0",
		 kib + (1ULL << 20), kib);
	EXPECT_NE(NULL, strstr(reason, want)) TH_LOG("%s", reason);
	close(g);
}

/* ---- GHOST_IMPORT_STOPPED ---------------------------------------------------- */

#define TICK_FD 50

/* Writes a byte to TICK_FD (a pipe) every 10 ms. */
static void work_ticker(int fd)
{
	ready(fd, "R", 1);
	for (;;) {
		if (write(TICK_FD, "t", 1) != 1)
			_exit(70);
		usleep(10000);
	}
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512], *paren;
	int f, n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = open(path, O_RDONLY);
	if (f < 0)
		return '?';
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	if (n <= 0)
		return '?';
	buf[n] = 0;
	paren = strrchr(buf, ')');
	return paren && paren[1] && paren[2] ? paren[2] : '?';
}

/* Bytes waiting on @fd (non-blocking), drained; -1 at its end (EOF). */
static int drain_ticks(int fd)
{
	char b[4096];
	int total = 0;
	ssize_t n;

	while ((n = read(fd, b, sizeof(b))) > 0)
		total += n;
	return n == 0 ? -1 : total;
}

/*
 * A ticker exported into a memory ghost, then imported with
 * GHOST_IMPORT_STOPPED by a child of ours: its pid once it is stopped (as
 * waitpid(WUNTRACED) reports it), or -1. *rd: the ticks' read end.
 */
static pid_t stopped_ticker(struct __test_metadata *_metadata, int *rd)
{
	int tick[2], g, st = 0;
	pid_t pid, imp;
	char c;

	if (pipe(tick) || dup2(tick[1], TICK_FD) != TICK_FD)
		return -1;
	close(tick[1]);
	fcntl(tick[0], F_SETFL, O_NONBLOCK);
	*rd = tick[0];
	pid = spawn(work_ticker, &c, 1);
	g = ghost_new_mem();
	if (pid < 0 || g < 0 || export_kill(pid, g))
		return -1;
	drain_ticks(tick[0]);
	imp = fork();
	if (imp == 0) {
		struct ghost_import im;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		drop_shared_anon();
		ghost_restore_self_flags(g, &im, GHOST_IMPORT_STOPPED);
		fprintf(stderr, "import refused: %s (%s)\n", strerror(errno), im.reason);
		_exit(100);
	}
	close(g);
	close(TICK_FD);		/* the restored process holds the only writer */
	if (imp < 0 || waitpid(imp, &st, WUNTRACED) != imp)
		return -1;
	EXPECT_TRUE(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP) TH_LOG("status %#x", st);
	if (!WIFSTOPPED(st))
		return -1;
	return imp;
}

TEST(stopped_import_runs_only_after_sigcont)
{
	struct pollfd p;
	int rd = -1, st = 0;
	pid_t imp = stopped_ticker(_metadata, &rd);

	ASSERT_LT(0, imp);
	EXPECT_EQ('T', proc_state(imp));
	usleep(300000);
	EXPECT_EQ(0, drain_ticks(rd)) TH_LOG("the stopped process ran");
	EXPECT_EQ('T', proc_state(imp));

	ASSERT_EQ(0, kill(imp, SIGCONT));
	p.fd = rd;
	p.events = POLLIN;
	EXPECT_EQ(1, poll(&p, 1, 5000)) TH_LOG("no tick after SIGCONT");
	usleep(100000);
	EXPECT_LT(0, drain_ticks(rd));
	kill(imp, SIGKILL);
	waitpid(imp, &st, 0);
	EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) TH_LOG("status %#x", st);
	close(rd);
}

TEST(stopped_import_killed_leaves_nothing)
{
	int rd = -1, st = 0;
	pid_t imp = stopped_ticker(_metadata, &rd);

	ASSERT_LT(0, imp);
	usleep(100000);
	EXPECT_EQ(0, drain_ticks(rd)) TH_LOG("the stopped process ran");
	ASSERT_EQ(0, kill(imp, SIGKILL));
	ASSERT_EQ(imp, waitpid(imp, &st, 0));
	EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) TH_LOG("status %#x", st);
	/* Its end of the pipe, the last writer, is gone with it; no child is left. */
	EXPECT_EQ(-1, drain_ticks(rd));
	EXPECT_EQ(-1, waitpid(-1, NULL, WNOHANG));
	EXPECT_EQ(ECHILD, errno);
	close(rd);
}

/* ---- the caller's descriptors, checked again in the final call ------------- */

/*
 * An inherited descriptor (the ticker's pipe at TICK_FD) open when the
 * import was prepared but closed before the final call: refused then, the
 * caller alive, not restored without it (its first write failed).
 */
TEST(an_inherited_descriptor_closed_after_prepare_is_refused)
{
	char c, reason[GHOST_REASON_LEN] = "";
	int tick[2], p[2], g, st = -1;
	pid_t pid, imp;

	ASSERT_EQ(0, pipe(tick));
	ASSERT_EQ(TICK_FD, dup2(tick[1], TICK_FD));
	close(tick[1]);
	pid = spawn(work_ticker, &c, 1);
	ASSERT_LT(0, pid);
	g = ghost_new_mem();
	ASSERT_EQ(0, export_kill(pid, g));
	ASSERT_EQ(0, pipe(p));
	imp = fork();
	ASSERT_LE(0, imp);
	if (imp == 0) {
		struct ghost_import im;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		drop_shared_anon();
		close(p[0]);
		if (ghost_prepare_import(g, &im))
			_exit(2);
		close(TICK_FD);
		im.flags = 0;
		ioctl(g, GHOST_IOC_IMPORT, &im);	/* returns only if refused */
		if (write(p[1], im.reason, sizeof(im.reason)) < 0)
			_exit(3);
		_exit(errno == EBADF ? 0 : 1);
	}
	close(p[1]);
	if (read(p[0], reason, sizeof(reason) - 1) < 0)
		reason[0] = 0;
	close(p[0]);
	ASSERT_EQ(imp, waitpid(imp, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		TH_LOG("status %#x (70: restored without its descriptor): %s", st, reason);
	EXPECT_NE(NULL, strstr(reason, "fd 50 must be inherited but is closed")) TH_LOG("%s", reason);
	close(TICK_FD);
	close(tick[0]);
	close(g);
}

TEST_HARNESS_MAIN
