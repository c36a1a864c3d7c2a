// SPDX-License-Identifier: GPL-2.0
/*
 * Who may export and import, checked by the kernel's own rules:
 *  - an export names its target by pidfd and proves the right to it with a
 *    descriptor of the target's /proc/PID/mem, whose open ran the kernel's
 *    ptrace check (LSMs and Yama included); an execve after that open fails
 *    the export;
 *  - an image staged by GHOST_IMPORT_PREPARE belongs to the process that
 *    prepared it, and its hard limits are checked again against that
 *    process's on the last call;
 *  - the full ioctl command (type, number, direction, size) is checked.
 */
#include <sys/resource.h>
#include <sys/syscall.h>

#include "ghost/c/restore_self.h"
#include "ghost_util.h"
#include "kselftest_harness.h"

#define YAMA "/proc/sys/kernel/yama/ptrace_scope"

static int pidfd_of(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int mem_of(pid_t pid, const char *file)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
	return open(path, O_RDONLY | O_CLOEXEC);
}

static int raw_export(int g, int pidfd, int mem, struct ghost_export *e)
{
	memset(e, 0, sizeof(*e));
	e->size = sizeof(*e);
	e->flags = GHOST_EXPORT_RUN;
	e->pidfd = pidfd;
	e->mem_fd = mem;
	return ioctl(g, GHOST_IOC_EXPORT, e);
}

/* ---- the export's target and the right to it ------------------------------- */

TEST(mem_fd_must_be_the_targets_proc_mem)
{
	struct ghost_export e;
	char c;
	pid_t a = spawn(work_idle, &c, 1), b = spawn(work_idle, &c, 1);
	int g = ghost_new_mem(), pa = pidfd_of(a), null = open("/dev/null", O_RDONLY);
	int mem_b = mem_of(b, "mem"), env_a = mem_of(a, "environ"), mem_a = mem_of(a, "mem");

	ASSERT_LT(0, a);
	ASSERT_LT(0, b);
	ASSERT_LE(0, g);
	ASSERT_LE(0, pa);
	ASSERT_LE(0, mem_a);

	/* another process's memory */
	EXPECT_EQ(-1, raw_export(g, pa, mem_b, &e));
	EXPECT_EQ(ESTALE, errno);
	EXPECT_NE(NULL, strstr(e.reason, "is not the memory of pid")) TH_LOG("%s", e.reason);
	/* the right process, the wrong file: environ also holds its mm */
	EXPECT_EQ(-1, raw_export(g, pa, env_a, &e));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_NE(NULL, strstr(e.reason, "/proc/PID/mem")) TH_LOG("%s", e.reason);
	EXPECT_EQ(-1, raw_export(g, pa, null, &e));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, raw_export(g, pa, 4000, &e));
	EXPECT_EQ(EBADF, errno);
	/* not a pidfd */
	EXPECT_EQ(-1, raw_export(g, null, mem_a, &e));
	EXPECT_EQ(ESRCH, errno);
	EXPECT_NE(NULL, strstr(e.reason, "is not a pidfd")) TH_LOG("%s", e.reason);
	/* and the right pair works, leaving both alive */
	EXPECT_EQ(0, raw_export(g, pa, mem_a, &e)) TH_LOG("%s", e.reason);
	EXPECT_EQ(0, kill(a, 0));
	EXPECT_EQ(0, kill(b, 0));
	reap(a);
	reap(b);
	close(g);
}

TEST(pidfd_of_an_exited_process_is_esrch)
{
	struct ghost_export e;
	char c;
	pid_t a = spawn(work_idle, &c, 1);
	int g = ghost_new_mem(), pa = pidfd_of(a), mem_a = mem_of(a, "mem");

	ASSERT_LE(0, pa);
	reap(a);
	EXPECT_EQ(-1, raw_export(g, pa, mem_a, &e));
	EXPECT_EQ(ESRCH, errno);
	close(g);
}

/* Waits for "go", then becomes /bin/sleep: a new memory and program. */
static int go_pipe[2];
static void work_exec(int fd)
{
	char go;

	ready(fd, "R", 1);
	if (read(go_pipe[0], &go, 1) != 1)
		_exit(91);
	execl("/bin/sleep", "sleep", "600", (char *)NULL);
	_exit(92);
}

TEST(execve_after_the_mem_open_fails_the_export)
{
	struct ghost_export e;
	char c, comm[64] = "";
	pid_t pid;
	int g = ghost_new_mem(), pidfd, mem;

	ASSERT_EQ(0, pipe(go_pipe));
	pid = spawn(work_exec, &c, 1);
	ASSERT_LT(0, pid);
	pidfd = pidfd_of(pid);
	mem = mem_of(pid, "mem");
	ASSERT_LE(0, mem);
	ASSERT_EQ(1, write(go_pipe[1], "g", 1));
	for (int i = 0; i < 200 && !strstr(comm, "sleep"); i++) {
		char path[64];
		int fd;
		ssize_t n;

		usleep(10000);
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		fd = open(path, O_RDONLY);
		n = fd >= 0 ? read(fd, comm, sizeof(comm) - 1) : -1;
		comm[n > 0 ? n : 0] = 0;
		if (fd >= 0)
			close(fd);
	}
	ASSERT_NE(NULL, strstr(comm, "sleep"));
	EXPECT_EQ(-1, raw_export(g, pidfd, mem, &e));
	EXPECT_EQ(ESTALE, errno);
	EXPECT_NE(NULL, strstr(e.reason, "execve")) TH_LOG("%s", e.reason);
	EXPECT_EQ(0, kill(pid, 0));	/* refused: left running */
	reap(pid);
	close(g);
}

static int yama_set(const char *v)
{
	int fd = open(YAMA, O_WRONLY);
	int ok = fd >= 0 && write(fd, v, 1) == 1;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/*
 * As user nobody, export nobody's own child through @g: the ptrace rules
 * of the kernel decide. Returns the export's errno (0 if it worked).
 */
static int export_as_nobody(int g)
{
	int st = -1;
	pid_t pid = fork();

	if (pid == 0) {
		struct ghost_export e;
		char c;
		pid_t child;

		if (setgid(65534) || setuid(65534))
			_exit(200);
		prctl(PR_SET_DUMPABLE, 1);	/* setuid cleared it */
		child = spawn(work_idle_bare, &c, 1);
		if (child < 0)
			_exit(201);
		if (ghost_do_export(g, child, GHOST_EXPORT_RUN, &e))
			_exit(errno & 0x7f);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

/*
 * The old access check re-implemented ptrace's rule without Yama: with
 * ptrace_scope 2 (admin only) a user could still export its own child.
 */
TEST(yama_admin_only_stops_a_users_export)
{
	int g = ghost_new_mem(), r;

	ASSERT_LE(0, g);
	if (access(YAMA, W_OK))
		SKIP(return, "Yama is not in this kernel");
	ASSERT_EQ(0, yama_set("0"));
	r = export_as_nobody(g);
	EXPECT_EQ(0, r) TH_LOG("scope 0: errno %d", r);
	ASSERT_EQ(0, yama_set("2"));
	r = export_as_nobody(g);
	EXPECT_EQ(0, yama_set("0"));
	EXPECT_TRUE(r == EPERM || r == EACCES) TH_LOG("scope 2: errno %d", r);
	close(g);
}

/* ---- a prepared import belongs to its preparer ---------------------------- */

TEST(a_prepared_image_is_refused_to_another_process)
{
	struct ghost_import im;
	struct ghost_export e;
	char c;
	pid_t pid = spawn(work_idle, &c, 1), other;
	int g = ghost_new_mem(), st = -1;

	ASSERT_LT(0, pid);
	ASSERT_EQ(0, ghost_do_export(g, pid, GHOST_EXPORT_KILL, &e)) TH_LOG("%s", e.reason);
	waitpid(pid, NULL, 0);
	ASSERT_EQ(0, ghost_prepare_import(g, &im)) TH_LOG("%s", im.reason);

	/* Another process, through the same ghost descriptor. */
	other = fork();
	if (other == 0) {
		drop_shared_anon();
		memset(&im, 0, sizeof(im));
		im.size = sizeof(im);
		if (ioctl(g, GHOST_IOC_IMPORT, &im) == 0)
			_exit(1);
		if (errno != EPERM || !strstr(im.reason, "only that process"))
			_exit(2);
		_exit(0);	/* refused, and alive to say so */
	}
	ASSERT_LT(0, other);
	waitpid(other, &st, 0);
	EXPECT_TRUE(WIFEXITED(st)) TH_LOG("the other importer died: status %#x", st);
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(g);
}

/*
 * A hard limit the preparer lowers between PREPARE and the import is not
 * raised back to the image's: the import is refused, the caller alive.
 */
TEST(a_hard_limit_lowered_after_prepare_is_not_raised_back)
{
	struct ghost_import im;
	struct ghost_export e;
	struct rlimit rl;
	char c;
	pid_t pid = spawn(work_idle, &c, 1), importer;
	int g = ghost_new_mem(), st = -1, i;

	ASSERT_LT(0, pid);
	ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &rl));
	if (rl.rlim_max <= 64)
		SKIP(return, "the file limit is already 64 or less");
	ASSERT_EQ(0, ghost_do_export(g, pid, GHOST_EXPORT_KILL, &e)) TH_LOG("%s", e.reason);
	waitpid(pid, NULL, 0);
	importer = fork();
	if (importer == 0) {
		drop_shared_anon();
		if (ghost_prepare_import(g, &im))
			_exit(3);
		rl.rlim_cur = 64;
		rl.rlim_max = 64;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			_exit(4);
		memset(&im, 0, sizeof(im));
		im.size = sizeof(im);
		if (ioctl(g, GHOST_IOC_IMPORT, &im) == 0)
			_exit(1);	/* not reached: it would be the image */
		if (errno != EPERM || !strstr(im.reason, "lowered since PREPARE"))
			_exit(2);
		_exit(0);	/* refused, and alive to say so */
	}
	ASSERT_LT(0, importer);
	/* Restored, it would be the idle worker: never ends by itself. */
	for (i = 0; i < 1000 && waitpid(importer, &st, WNOHANG) == 0; i++)
		usleep(10000);
	if (i == 1000) {
		kill(importer, SIGKILL);
		waitpid(importer, &st, 0);
	}
	EXPECT_TRUE(WIFEXITED(st))
		TH_LOG("restored with the higher limit (status %#x)", st);
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(g);
}

/* ---- the whole ioctl command ---------------------------------------------- */

TEST(ioctl_direction_size_and_magic_are_checked)
{
	struct ghost_version v = { .size = sizeof(v) };
	int dev = open(GHOST_DEV, O_RDWR | O_CLOEXEC);

	ASSERT_LE(0, dev);
	ASSERT_EQ(0, ioctl(dev, GHOST_IOC_VERSION, &v));
	/* the right number, the wrong direction */
	EXPECT_EQ(-1, ioctl(dev, _IOR(GHOST_IOC_MAGIC, 0x00, struct ghost_version), &v));
	EXPECT_EQ(ENOTTY, errno);
	EXPECT_EQ(-1, ioctl(dev, _IO(GHOST_IOC_MAGIC, 0x00), &v));
	EXPECT_EQ(ENOTTY, errno);
	/* the size bits must be the struct's size field */
	v.size = GHOST_VERSION_SIZE_VER0;
	EXPECT_EQ(-1, ioctl(dev, _IOWR(GHOST_IOC_MAGIC, 0x00, char[72]), &v));
	EXPECT_EQ(EINVAL, errno);
	/* 0xB8 belongs to MSHV_IOCTL; ghost no longer answers it */
	EXPECT_EQ(-1, ioctl(dev, _IOWR(0xB8, 0x00, struct ghost_version), &v));
	EXPECT_EQ(ENOTTY, errno);
	EXPECT_EQ(0xBC, GHOST_IOC_MAGIC);
	close(dev);
}

TEST_HARNESS_MAIN
