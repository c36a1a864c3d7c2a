// SPDX-License-Identifier: GPL-2.0
/*
 * Process attributes carried across a checkpoint and restart, with each
 * engine: a child (a fresh exec of this program) sets no_new_privs,
 * oom_score_adj, THP disabled, child subreaper, membarrier registrations, a
 * nice value and a timer slack, and leads a session, a process group or
 * neither (and is then not dumpable). It is checkpointed (killed) and restarted by this process, in
 * another session and group, and the restored process reports what it
 * sees from inside: every attribute as before, a session leader in a new
 * session of its own, a group leader in its own group in the restarter's
 * session, a plain member in the restarter's group. Then a restart that
 * would lower the nice value below what the restarter may is refused.
 *
 * $GHOST_ATTRS_ENGINES picks the engines ("kernel,user", the default, in
 * the VM; "user" for the native ctest).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/ghost.h>
#include <linux/membarrier.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "ghost/ghost.h"
#include "kselftest_harness.h"

#define OOM 345
#define NICE 7
#define SLACK 123457ul
#define CMD_GET_REGISTRATIONS (1 << 9) /* Linux 6.3 */

enum lead { MEMBER, GROUP, SESSION };

/* What the child sees of itself. */
struct seen {
	int pid, sid, pgid;
	int nnp, oom, thp, subreaper, nice, dumpable;
	unsigned long slack;
	int private_exp, sync_core, rseq;	/* a private barrier works */
	int registrations;	/* MEMBARRIER_CMD_GET_REGISTRATIONS, or -1 */
};

static int membarrier(int cmd)
{
	return syscall(__NR_membarrier, cmd, 0, 0);
}

static void look(struct seen *s)
{
	char buf[32] = "";
	int fd = open("/proc/self/oom_score_adj", O_RDONLY);

	memset(s, 0, sizeof(*s));
	s->pid = getpid();
	s->sid = getsid(0);
	s->pgid = getpgid(0);
	s->nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	if (fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0)
		s->oom = atoi(buf);
	close(fd);
	s->thp = prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0);
	prctl(PR_GET_CHILD_SUBREAPER, &s->subreaper, 0, 0, 0);
	s->dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
	errno = 0;
	s->nice = getpriority(PRIO_PROCESS, 0);
	s->slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	s->private_exp = membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
	s->sync_core = membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) == 0;
	s->rseq = membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ) == 0;
	s->registrations = membarrier(CMD_GET_REGISTRATIONS);
}

/*
 * Drops CAP_SYS_NICE (root has it): a worker without it, whose image then
 * holds no capability to lower its nice value, and a restarter without it.
 */
static void drop_sys_nice(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) == 0) {
		d[0].effective &= ~(1u << CAP_SYS_NICE);
		d[0].permitted &= ~(1u << CAP_SYS_NICE);
		d[0].inheritable &= ~(1u << CAP_SYS_NICE);
		syscall(SYS_capset, &h, d);
	}
}

static void child(enum lead lead, int cmd, int rep)
{
	struct seen s;
	int fd;
	char c;

	if (lead == SESSION)
		setsid();
	else if (lead == GROUP)
		setpgid(0, 0);
	if (lead != MEMBER)
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	fd = open("/proc/self/oom_score_adj", O_WRONLY);
	if (fd < 0 || dprintf(fd, "%d", OOM) < 0)
		_exit(1);
	close(fd);
	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED);
	membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
	membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE);
	membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ);
	setpriority(PRIO_PROCESS, 0, NICE);
	drop_sys_nice();
	prctl(PR_SET_TIMERSLACK, SLACK, 0, 0, 0);
	for (;;) {
		if (read(cmd, &c, 1) != 1)
			_exit(0);
		look(&s);
		if (write(rep, &s, sizeof(s)) != sizeof(s))
			_exit(1);
	}
}

/* $GHOST_ATTRS_CHILD is "LEAD CMD REP": the child, in a fresh image. */
__attribute__((constructor)) static void child_main(void)
{
	const char *env = getenv("GHOST_ATTRS_CHILD");
	int lead, cmd, rep;

	if (!env)
		return;
	if (sscanf(env, "%d %d %d", &lead, &cmd, &rep) != 3)
		_exit(1);
	unsetenv("GHOST_ATTRS_CHILD");
	child(lead, cmd, rep);
}

FIXTURE(attrs) {
	int cmd[2], rep[2];	/* this process keeps all four: a restart inherits */
	pid_t pid;
};

FIXTURE_VARIANT(attrs) {
	enum lead lead;
};

FIXTURE_VARIANT_ADD(attrs, member) { .lead = MEMBER };
FIXTURE_VARIANT_ADD(attrs, group_leader) { .lead = GROUP };
FIXTURE_VARIANT_ADD(attrs, session_leader) { .lead = SESSION };

static pid_t start(FIXTURE_DATA(attrs) *self, enum lead lead)
{
	pid_t pid = fork();

	if (pid == 0) {
		char env[64];

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		snprintf(env, sizeof(env), "%d %d %d", lead, self->cmd[0], self->rep[1]);
		setenv("GHOST_ATTRS_CHILD", env, 1);
		execl("/proc/self/exe", "ghost_attrs_child", (char *)NULL);
		_exit(1);
	}
	return pid;
}

static int ask(FIXTURE_DATA(attrs) *self, struct seen *s)
{
	char c = 'c';

	if (write(self->cmd[1], &c, 1) != 1)
		return -1;
	return read(self->rep[0], s, sizeof(*s)) == sizeof(*s) ? 0 : -1;
}

FIXTURE_SETUP(attrs)
{
	ASSERT_EQ(0, pipe(self->cmd));
	ASSERT_EQ(0, pipe(self->rep));
	self->pid = -1;
}

FIXTURE_TEARDOWN(attrs)
{
	if (self->pid > 0) {
		kill(self->pid, SIGKILL);
		waitpid(self->pid, NULL, 0);
	}
}

static int image_file(void)
{
	char path[] = "/tmp/ghost-attrs-img-XXXXXX";
	int fd = mkstemp(path);

	if (fd >= 0)
		unlink(path);
	return fd;
}

static const char *engines(void)
{
	const char *e = getenv("GHOST_ATTRS_ENGINES");

	return e ? e : "kernel,user";
}

TEST_F(attrs, carried)
{
	static const char *const names[] = { "kernel", "user" };
	unsigned int i;

	for (i = 0; i < 2; i++) {
		struct ghost_error e = { 0 };
		struct seen before, after;
		int out;

		if (!strstr(engines(), names[i]))
			continue;
		setenv("GHOST_ENGINE", names[i], 1);
		self->pid = start(self, variant->lead);
		ASSERT_GT(self->pid, 0);
		ASSERT_EQ(0, ask(self, &before));
		/* what the child set, as it sees it */
		EXPECT_EQ(1, before.nnp);
		EXPECT_EQ(OOM, before.oom);
		EXPECT_EQ(1, before.thp);
		EXPECT_EQ(1, before.subreaper);
		EXPECT_EQ(NICE, before.nice);
		EXPECT_EQ(SLACK, before.slack);
		EXPECT_EQ(1, before.private_exp);
		EXPECT_EQ(variant->lead == MEMBER, before.dumpable);

		out = image_file();
		ASSERT_GE(out, 0);
		ASSERT_EQ(0, ghost_checkpoint_fd(self->pid, out, GHOST_CKPT_KILL, &e))
			TH_LOG("%s engine: %s", names[i], e.reason);
		ASSERT_EQ(self->pid, waitpid(self->pid, NULL, 0));
		self->pid = -1;
		ASSERT_EQ(0, lseek(out, 0, SEEK_SET));
		ASSERT_EQ(0, ghost_restart_fd(out, &self->pid, &e))
			TH_LOG("%s engine: %s", names[i], e.reason);
		close(out);
		ASSERT_EQ(0, ask(self, &after)) TH_LOG("%s engine: no answer", names[i]);
		TH_LOG("%s engine: pid %d sid %d pgid %d (restarter %d %d %d)", names[i],
		       after.pid, after.sid, after.pgid, getpid(), getsid(0), getpgid(0));
		EXPECT_EQ(before.nnp, after.nnp);
		EXPECT_EQ(before.oom, after.oom);
		EXPECT_EQ(before.thp, after.thp);
		EXPECT_EQ(before.subreaper, after.subreaper);
		EXPECT_EQ(before.dumpable, after.dumpable);
		EXPECT_EQ(before.nice, after.nice);
		EXPECT_EQ(before.slack, after.slack);
		EXPECT_EQ(before.private_exp, after.private_exp);
		EXPECT_EQ(before.sync_core, after.sync_core);
		EXPECT_EQ(before.rseq, after.rseq);
		EXPECT_EQ(before.registrations, after.registrations);
		if (variant->lead == SESSION) {
			EXPECT_EQ(after.pid, after.sid);
			EXPECT_EQ(after.pid, after.pgid);
		} else if (variant->lead == GROUP) {
			EXPECT_EQ(getsid(0), after.sid);
			EXPECT_EQ(after.pid, after.pgid);
		} else {
			EXPECT_EQ(getsid(0), after.sid);
			EXPECT_EQ(getpgid(0), after.pgid);
		}
		kill(self->pid, SIGKILL);
		waitpid(self->pid, NULL, 0);
		self->pid = -1;
	}
}

/* Restarts @fd's image without CAP_SYS_NICE and RLIMIT_NICE. */
static int restart_unprivileged(int fd, struct ghost_error *e)
{
	struct rlimit rl = { 0, 0 };
	pid_t pid;

	drop_sys_nice();
	setrlimit(RLIMIT_NICE, &rl);
	setpriority(PRIO_PROCESS, 0, NICE + 5);
	return ghost_restart_fd(fd, &pid, e);
}

TEST_F(attrs, lower_nice_refused_at_restart)
{
	static const char *const names[] = { "kernel", "user" };
	unsigned int i;

	if (variant->lead != MEMBER)
		SKIP(return, "one variant is enough");
	self->pid = start(self, MEMBER);
	ASSERT_GT(self->pid, 0);
	for (i = 0; i < 2; i++) {
		struct seen s0;

		struct ghost_error e = { 0 };
		char want[GHOST_ERROR_REASON_LEN];
		struct seen s;
		int out, p[2], st;
		pid_t helper;

		if (!strstr(engines(), names[i]))
			continue;
		setenv("GHOST_ENGINE", names[i], 1);
		ASSERT_EQ(0, ask(self, &s0));	/* its attributes are set */
		out = image_file();
		ASSERT_GE(out, 0);
		ASSERT_EQ(0, ghost_checkpoint_fd(self->pid, out, GHOST_CKPT_LEAVE_RUNNING, &e))
			TH_LOG("%s engine: %s", names[i], e.reason);
		ASSERT_EQ(0, pipe(p));
		helper = fork();
		ASSERT_GE(helper, 0);
		if (helper == 0) {
			lseek(out, 0, SEEK_SET);
			if (restart_unprivileged(out, &e) == 0)
				e.code = 0;
			if (write(p[1], &e, sizeof(e)) != sizeof(e))
				_exit(1);
			_exit(0);
		}
		ASSERT_EQ(sizeof(e), read(p[0], &e, sizeof(e)));
		ASSERT_EQ(helper, waitpid(helper, &st, 0));
		close(p[0]);
		close(p[1]);
		close(out);
		snprintf(want, sizeof(want), GHOST_NICE_REASON, NICE, NICE + 5);
		EXPECT_EQ(EACCES, e.code);
		EXPECT_STREQ(want, e.reason);
		/* the original runs on */
		ASSERT_EQ(0, ask(self, &s));
		EXPECT_EQ(NICE, s.nice);
	}
}

TEST_HARNESS_MAIN
