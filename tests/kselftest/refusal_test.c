// SPDX-License-Identifier: GPL-2.0
/*
 * One policy, two engines: for each state ghost v1 refuses, a child holding
 * that state alone is exported through libghost's C API with the kernel
 * engine and with the user engine. Each must refuse with the errno and the
 * sentence of the table below (pid, address, descriptor filled in), so both
 * give the same reason, and the child must come out of each refusal
 * running, not stopped, not traced, its blocking read not broken and its
 * memory and signal mask as they were. The first row, a child with nothing
 * unusual, must export with both: the refusals are the state's, not the
 * child's.
 *
 * $GHOST_REFUSAL_ENGINES picks the engines ("kernel,user", the default, in
 * the VM; "user" for the native ctest, where the module cannot load).
 */
#include <errno.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "ghost/ghost.h"
#include "kselftest_harness.h"
#include "refusal_states.h"

enum parent_act { NONE, STOP, TRACE };

enum row_id {
	R_nothing,
	R_thread,
	R_traced,
	R_stopped,
	R_itimer,
	R_posix_timer,
	R_sysv_sem,
	R_io_uring,
	R_rt_signal,
	R_shared_anon,
	R_sysv_shm,
	R_memfd_map,
	R_deleted_private,
	R_deleted_shared,
	R_hugetlb,
	R_deleted_fd,
	R_memfd_fd,
	R_socket,
	R_eventfd,
	R_epoll,
	R_signalfd,
	R_timerfd,
	R_inotify,
	R_pidfd,
	R_pty,
	R_chardev,
	R_deleted_cwd,
	R_child,
	R_zombie_child,
	R_deleted_devnode,
	R_deleted_fifo,
	R_dead_proc_file,
	R_own_proc_file,
	R_opath_symlink,
	R_aio_ring,
	R_guard_pages,
	R_lease,
	R_pipe_flock,
	R_seccomp_filter,
	R_seccomp_strict,
	R_time_ns_children,
	R_in_time_ns,
	R_in_user_ns,
	R_chroot,
	R_shared_mm,
	R_shared_files,
	NROWS
};

struct row {
	const char *name;
	int (*set)(struct state *s);
	enum parent_act act;
	int err;		/* 0: the export must succeed */
	/*
	 * %P pid, %A address, %F descriptor, %D device major:minor, %O the
	 * other process's pid
	 */
	const char *reason;
	bool strict;		/* the child enters seccomp strict mode */
};

/*
 * Another kernel's vDSO is refused at import, not export: the image side
 * (tests/unit/user_engine_test.cpp BadImport, import_test.c) covers it.
 * A device mapping (VM_IO/VM_PFNMAP) has no device every machine can map.
 */
static const struct row rows[NROWS] = {
	[R_nothing] = { "nothing", set_nothing, NONE, 0, NULL },
	[R_thread] = { "thread", set_thread, NONE, EOPNOTSUPP,
	  "pid %P has 2 threads: multi-threaded export is not supported" },
	[R_traced] = { "traced", set_traceable, TRACE, EBUSY, "pid %P is being traced" },
	[R_stopped] = { "stopped", set_nothing, STOP, EBUSY,
	  "pid %P is stopped: continue it (SIGCONT) first" },
	[R_itimer] = { "itimer", set_itimer, NONE, EOPNOTSUPP,
	  "pid %P has an armed interval timer: not supported" },
	[R_posix_timer] = { "posix_timer", set_posix_timer, NONE, EOPNOTSUPP,
	  "pid %P has POSIX timers: not supported" },
	[R_sysv_sem] = { "sysv_sem", set_sysv_sem, NONE, EOPNOTSUPP,
	  "pid %P holds SysV semaphore state: not supported" },
	[R_io_uring] = { "io_uring", set_io_uring, NONE, EOPNOTSUPP,
	  "pid %P uses io_uring: not supported" },
	[R_rt_signal] = { "rt_signal", set_rt_signal, NONE, EOPNOTSUPP,
	  "pid %P has queued real-time signals: not supported" },
	[R_shared_anon] = { "shared_anon", set_shared_anon, NONE, EOPNOTSUPP,
	  "shared anonymous memory at %A is not supported" },
	[R_sysv_shm] = { "sysv_shm", set_sysv_shm, NONE, EOPNOTSUPP,
	  "SysV shared memory at %A is not supported" },
	[R_memfd_map] = { "memfd_map", set_memfd_map, NONE, EOPNOTSUPP,
	  "memfd mapping at %A is not supported" },
	[R_deleted_private] = { "deleted_private", set_deleted_private, NONE, EOPNOTSUPP,
	  "mapping of a deleted file at %A is not supported" },
	[R_deleted_shared] = { "deleted_shared", set_deleted_shared, NONE, EOPNOTSUPP,
	  "mapping of a deleted file at %A is not supported" },
	[R_hugetlb] = { "hugetlb", set_hugetlb, NONE, EOPNOTSUPP,
	  "hugetlbfs mapping at %A is not supported" },
	[R_deleted_fd] = { "deleted_fd", set_deleted_fd, NONE, EOPNOTSUPP,
	  "fd %F refers to a deleted file: not supported" },
	[R_memfd_fd] = { "memfd_fd", set_memfd_fd, NONE, EOPNOTSUPP,
	  "fd %F is a memfd: not supported" },
	[R_socket] = { "socket", set_socket, NONE, EOPNOTSUPP,
	  "fd %F is a socket: sockets are not supported" },
	[R_eventfd] = { "eventfd", set_eventfd, NONE, EOPNOTSUPP,
	  "fd %F (anon_inode:[eventfd]) is not supported" },
	[R_epoll] = { "epoll", set_epoll, NONE, EOPNOTSUPP,
	  "fd %F (anon_inode:[eventpoll]) is not supported" },
	[R_signalfd] = { "signalfd", set_signalfd, NONE, EOPNOTSUPP,
	  "fd %F (anon_inode:[signalfd]) is not supported" },
	[R_timerfd] = { "timerfd", set_timerfd, NONE, EOPNOTSUPP,
	  "fd %F (anon_inode:[timerfd]) is not supported" },
	[R_inotify] = { "inotify", set_inotify, NONE, EOPNOTSUPP,
	  "fd %F (anon_inode:inotify) is not supported" },
	[R_pidfd] = { "pidfd", set_pidfd, NONE, EOPNOTSUPP,
	  "fd %F (anon_inode:[pidfd]) is not supported" },
	[R_pty] = { "pty", set_pty, NONE, EOPNOTSUPP,
	  "fd %F is a pseudo-terminal: not supported" },
	[R_chardev] = { "chardev", set_chardev, NONE, EOPNOTSUPP,
	  "fd %F is a character device (%D): not supported" },
	[R_deleted_cwd] = { "deleted_cwd", set_deleted_cwd, NONE, EOPNOTSUPP,
	  "the working directory of pid %P is a deleted directory: not supported" },
	[R_child] = { "child", set_child, NONE, EOPNOTSUPP,
	  "pid %P has children: process trees are not supported" },
	[R_zombie_child] = { "zombie_child", set_zombie_child, NONE, EOPNOTSUPP,
	  "pid %P has children: process trees are not supported" },
	[R_deleted_devnode] = { "deleted_devnode", set_deleted_devnode, NONE, EOPNOTSUPP,
	  "fd %F is a deleted device node: not supported" },
	[R_deleted_fifo] = { "deleted_fifo", set_deleted_fifo, NONE, EOPNOTSUPP,
	  "fd %F is a deleted FIFO: not supported" },
	[R_dead_proc_file] = { "dead_proc_file", set_dead_proc_file, NONE, EOPNOTSUPP,
	  "fd %F is /proc/%O/status of a process that no longer exists" },
	[R_own_proc_file] = { "own_proc_file", set_own_proc_file, NONE, EOPNOTSUPP,
	  "fd %F is /proc/%P/status of the process itself, which a restart could not open again: not supported" },
	[R_opath_symlink] = { "opath_symlink", set_opath_symlink, NONE, EOPNOTSUPP,
	  "fd %F is an O_PATH descriptor of a symbolic link: not supported" },
	[R_aio_ring] = { "aio_ring", set_aio_ring, NONE, EOPNOTSUPP,
	  "AIO ring (io_setup) at %A is not supported" },
	[R_guard_pages] = { "guard_pages", set_guard_pages, NONE, EOPNOTSUPP,
	  "guard pages (MADV_GUARD_INSTALL) at %A are not supported" },
	[R_lease] = { "lease", set_lease, NONE, EOPNOTSUPP,
	  "fd %F holds a lease (F_SETLEASE): leases are not supported" },
	[R_pipe_flock] = { "pipe_flock", set_pipe_flock, NONE, EOPNOTSUPP,
	  "fd %F holds a flock lock on an inherited file: not supported" },
	[R_seccomp_filter] = { "seccomp_filter", set_seccomp_filter, NONE, EOPNOTSUPP,
	  "pid %P has a seccomp filter, which a restart would drop: not supported" },
	[R_seccomp_strict] = { "seccomp_strict", set_seccomp_strict, NONE, EOPNOTSUPP,
	  "pid %P is in seccomp strict mode, which a restart would drop: not supported",
	  true },
	[R_time_ns_children] = { "time_ns_children", set_time_ns_children, NONE,
	  EOPNOTSUPP,
	  "pid %P made a time namespace for its children (unshare(CLONE_NEWTIME)): not supported" },
	[R_in_time_ns] = { "in_time_ns", set_in_time_ns, NONE, EOPNOTSUPP,
	  "pid %P is in another time namespace than the exporter: not supported" },
	[R_in_user_ns] = { "in_user_ns", set_in_user_ns, NONE, EOPNOTSUPP,
	  "pid %P is in another user namespace than the exporter: not supported" },
	[R_chroot] = { "chroot", set_chroot, NONE, EOPNOTSUPP,
	  "pid %P has a root directory of its own (chroot), which a restart would drop: not supported" },
	[R_shared_mm] = { "shared_mm", set_shared_mm, NONE, EOPNOTSUPP,
	  "pid %P shares its memory with another process (clone(CLONE_VM)): it cannot be exported alone" },
	[R_shared_files] = { "shared_files", set_shared_files, NONE, EOPNOTSUPP,
	  "pid %P shares its descriptor table with another process (clone(CLONE_FILES)): it cannot be exported alone" },
};

/* What the child reports once its state is set: 0, or -1 to skip. */
struct report {
	int status;
	struct state s;
};

#define PATTERN_PAGES 4

/*
 * The child: sets the row's state, reports, then answers each 'c' on @cmd
 * with 'y' if its memory, signal mask and blocking read survived, until
 * @cmd closes.
 */
static void child(const struct row *r, int cmd, int rep)
{
	unsigned long *mem = malloc(PATTERN_PAGES * 4096);
	struct report out = { 0 };
	sigset_t set, now;
	unsigned long i;
	char c;

	if (!mem)
		_exit(1);
	for (i = 0; i < PATTERN_PAGES * 512; i++)
		mem[i] = i * 0x9e3779b97f4a7c15ul;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	sigprocmask(SIG_BLOCK, &set, NULL);
	out.s.fd = -1;
	out.status = r->set(&out.s);
	/* The kernel fills 8 of the 128 bytes of a sigset_t. */
	memset(&set, 0, sizeof(set));
	sigprocmask(SIG_BLOCK, NULL, &set);
	/* only read and write from here, before the report: the mask stays */
	if (r->strict && prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0))
		out.status = -1;
	if (write(rep, &out, sizeof(out)) != sizeof(out))
		_exit(1);
	for (;;) {
		ssize_t n = read(cmd, &c, 1);
		int good = n == 1;

		if (n == 0)
			_exit(0);
		for (i = 0; good && i < PATTERN_PAGES * 512; i++)
			good = mem[i] == i * 0x9e3779b97f4a7c15ul;
		memset(&now, 0, sizeof(now));
		if (r->strict)
			now = set;
		else
			sigprocmask(SIG_BLOCK, NULL, &now);
		good = good && !memcmp(&set, &now, sizeof(set));
		c = good ? 'y' : 'n';	/* 'n' too after a read broken by EINTR */
		if (write(rep, &c, 1) != 1)
			_exit(1);
	}
}

/*
 * The child runs in a fresh image of this program (exec'd from the fork):
 * a forked test would carry the harness's shared memory and descriptors.
 * $GHOST_REFUSAL_CHILD is "ROW CMD REP".
 */
__attribute__((constructor)) static void child_main(void)
{
	const char *env = getenv("GHOST_REFUSAL_CHILD");
	int row, cmd, rep;

	if (!env)
		return;
	if (sscanf(env, "%d %d %d", &row, &cmd, &rep) != 3 || row < 0 ||
	    row >= NROWS)
		_exit(1);
	unsetenv("GHOST_REFUSAL_CHILD");
	child(&rows[row], cmd, rep);
}

/* @t with %P, %A, %F, %D, %O filled in. */
static void expand(char *out, size_t len, const char *t, pid_t pid,
		   const struct state *s)
{
	size_t n = 0;

	for (; *t && n + 1 < len; t++) {
		if (t[0] != '%' || !t[1]) {
			out[n++] = *t;
			continue;
		}
		t++;
		if (*t == 'P')
			n += snprintf(out + n, len - n, "%d", pid);
		else if (*t == 'A')
			n += snprintf(out + n, len - n, "%#lx", s->addr);
		else if (*t == 'F')
			n += snprintf(out + n, len - n, "%d", s->fd);
		else if (*t == 'D')
			n += snprintf(out + n, len - n, "%s", s->dev);
		else if (*t == 'O')
			n += snprintf(out + n, len - n, "%d", s->other);
		if (n >= len)
			n = len - 1;
	}
	out[n] = '\0';
}

/* The State letter and TracerPid of /proc/PID/status. */
static void proc_state(pid_t pid, char *state, int *tracer)
{
	char path[64], line[256];
	FILE *f;

	*state = '?';
	*tracer = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "State: %c", state);
		sscanf(line, "TracerPid: %d", tracer);
	}
	fclose(f);
}

FIXTURE(refusal) {
	pid_t pid, tracer;
	int cmd, rep;
	struct report rpt;
};

FIXTURE_VARIANT(refusal) {
	int row;
};

#define ROW(n) FIXTURE_VARIANT_ADD(refusal, n) { .row = R_##n }
ROW(nothing);
ROW(thread);
ROW(traced);
ROW(stopped);
ROW(itimer);
ROW(posix_timer);
ROW(sysv_sem);
ROW(io_uring);
ROW(rt_signal);
ROW(shared_anon);
ROW(sysv_shm);
ROW(memfd_map);
ROW(deleted_private);
ROW(deleted_shared);
ROW(hugetlb);
ROW(deleted_fd);
ROW(memfd_fd);
ROW(socket);
ROW(eventfd);
ROW(epoll);
ROW(signalfd);
ROW(timerfd);
ROW(inotify);
ROW(pidfd);
ROW(pty);
ROW(chardev);
ROW(deleted_cwd);
ROW(child);
ROW(zombie_child);
ROW(deleted_devnode);
ROW(deleted_fifo);
ROW(dead_proc_file);
ROW(own_proc_file);
ROW(opath_symlink);
ROW(aio_ring);
ROW(guard_pages);
ROW(lease);
ROW(pipe_flock);
ROW(seccomp_filter);
ROW(seccomp_strict);
ROW(time_ns_children);
ROW(in_time_ns);
ROW(in_user_ns);
ROW(chroot);
ROW(shared_mm);
ROW(shared_files);

FIXTURE_SETUP(refusal)
{
	const struct row *r = &rows[variant->row];
	int c[2], p[2];

	self->tracer = -1;
	ASSERT_EQ(pipe(c), 0);
	ASSERT_EQ(pipe(p), 0);
	self->pid = fork();
	ASSERT_GE(self->pid, 0);
	if (self->pid == 0) {
		close(c[1]);
		close(p[0]);
		char env[64];

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		snprintf(env, sizeof(env), "%d %d %d", variant->row, c[0], p[1]);
		setenv("GHOST_REFUSAL_CHILD", env, 1);
		execl("/proc/self/exe", "ghost_refusal_child", (char *)NULL);
		_exit(1);
	}
	close(c[0]);
	close(p[1]);
	self->cmd = c[1];
	self->rep = p[0];
	ASSERT_EQ(read(self->rep, &self->rpt, sizeof(self->rpt)),
		  sizeof(self->rpt));
	if (r->act == STOP) {
		int st;

		ASSERT_EQ(kill(self->pid, SIGSTOP), 0);
		ASSERT_EQ(waitpid(self->pid, &st, WUNTRACED), self->pid);
	} else if (r->act == TRACE) {
		int k[2];
		char ok = 0;

		ASSERT_EQ(pipe(k), 0);
		self->tracer = fork();
		ASSERT_GE(self->tracer, 0);
		if (self->tracer == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			ok = ptrace(PTRACE_SEIZE, self->pid, 0, 0) ? 'n' : 'y';
			if (write(k[1], &ok, 1) != 1)
				_exit(1);
			for (;;)
				pause();
		}
		ASSERT_EQ(read(k[0], &ok, 1), 1);
		close(k[0]);
		close(k[1]);
		ASSERT_EQ(ok, 'y');
	}
}

FIXTURE_TEARDOWN(refusal)
{
	if (self->tracer > 0) {
		kill(self->tracer, SIGKILL);
		waitpid(self->tracer, NULL, 0);
	}
	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, 0);
	close(self->cmd);
	close(self->rep);
}

/* The child is running (or still stopped), and untouched. */
static void child_ok(struct __test_metadata *_metadata,
		     FIXTURE_DATA(refusal) *self, const struct row *r)
{
	char state, c = 'c';
	int tracer;

	proc_state(self->pid, &state, &tracer);
	EXPECT_TRUE(r->act == STOP ? state == 'T' : state == 'S' || state == 'R');
	EXPECT_EQ(tracer, r->act == TRACE ? self->tracer : 0);
	if (r->act == STOP)
		kill(self->pid, SIGCONT);
	EXPECT_EQ(write(self->cmd, &c, 1), 1);
	EXPECT_EQ(read(self->rep, &c, 1), 1);
	EXPECT_EQ(c, 'y');
	if (r->act == STOP) {
		int st;

		kill(self->pid, SIGSTOP);
		waitpid(self->pid, &st, WUNTRACED);
	}
}

/* An unnamed file for the image (the VM's /tmp may not do O_TMPFILE). */
static int image_file(void)
{
	char path[] = "/tmp/ghost-refusal-img-XXXXXX";
	int fd = mkstemp(path);

	if (fd >= 0)
		unlink(path);
	return fd;
}

TEST_F(refusal, refused)
{
	const struct row *r = &rows[variant->row];
	const char *engines = getenv("GHOST_REFUSAL_ENGINES");
	static const char *const names[] = { "kernel", "user" };
	char want[GHOST_ERROR_REASON_LEN];
	unsigned int i, ran = 0;

	if (self->rpt.status)
		SKIP(return, "%s: this machine cannot make the state", r->name);
	expand(want, sizeof(want), r->reason ? r->reason : "", self->pid,
	       &self->rpt.s);
	if (!engines)
		engines = "kernel,user";
	for (i = 0; i < 2; i++) {
		struct ghost_error e = { 0 };
		int out, rc;

		if (!strstr(engines, names[i]))
			continue;
		ran++;
		setenv("GHOST_ENGINE", names[i], 1);
		out = image_file();
		ASSERT_GE(out, 0);
		rc = ghost_checkpoint_fd(self->pid, out,
					 GHOST_CKPT_LEAVE_RUNNING, &e);
		close(out);
		if (e.code != r->err || strcmp(e.reason, want))
			TH_LOG("%s engine: %s (%d), want %s (%d)", names[i],
			       e.reason, e.code, want, r->err);
		EXPECT_EQ(rc, r->err ? -1 : 0);
		EXPECT_EQ(e.code, r->err);
		EXPECT_STREQ(e.reason, want);
		child_ok(_metadata, self, r);
	}
	ASSERT_GT(ran, 0);
}

TEST_HARNESS_MAIN
