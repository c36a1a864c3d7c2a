// SPDX-License-Identifier: GPL-2.0
/*
 * Credentials, both engines: a child sets up who it is (another user with
 * supplementary groups, root with fewer capabilities, a loginuid), is
 * checkpointed and restarted, and then says from inside itself who it is
 * now (getresuid, getresgid, fsuid/fsgid, getgroups, capget, the bounding
 * and ambient sets, securebits, /proc/self/loginuid); that must be who it
 * was. A caller that may not assume an image's credentials is refused
 * before the point of no return, with the rule's sentence, and lives on.
 *
 * $GHOST_CREDS_ENGINES picks the engines ("kernel,user", the default, in
 * the VM; "user" for the native ctest, where the module cannot load).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "ghost/ghost.h"
#include "kselftest_harness.h"

#define OTHER_UID	65534
#define OTHER_GID	65534
#define CALLER_UID	1000
#define LOGINUID	4242

/* Who a process is, as it says itself. */
struct who {
	unsigned int uid[4], gid[4];	/* real, effective, saved, fs */
	int ngroups;
	unsigned int groups[32];
	unsigned long long inh, perm, eff, bset, amb;
	int securebits;
	unsigned int loginuid;
	struct rlimit nofile;
};

static void who_am_i(struct who *w)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	gid_t g[32];
	char buf[16] = "";
	int fd, i;

	memset(w, 0, sizeof(*w));
	getresuid(&w->uid[0], &w->uid[1], &w->uid[2]);
	getresgid(&w->gid[0], &w->gid[1], &w->gid[2]);
	w->uid[3] = (unsigned int)syscall(SYS_setfsuid, -1);
	w->gid[3] = (unsigned int)syscall(SYS_setfsgid, -1);
	w->ngroups = getgroups(32, g);
	for (i = 0; i < w->ngroups; i++)
		w->groups[i] = g[i];
	syscall(SYS_capget, &h, d);
	w->inh = d[0].inheritable | (unsigned long long)d[1].inheritable << 32;
	w->perm = d[0].permitted | (unsigned long long)d[1].permitted << 32;
	w->eff = d[0].effective | (unsigned long long)d[1].effective << 32;
	for (i = 0; i < 64; i++) {
		if (prctl(PR_CAPBSET_READ, i, 0, 0, 0) == 1)
			w->bset |= 1ULL << i;
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, i, 0, 0) == 1)
			w->amb |= 1ULL << i;
	}
	w->securebits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	fd = open("/proc/self/loginuid", O_RDONLY);
	if (fd >= 0) {
		if (read(fd, buf, sizeof(buf) - 1) < 0)
			buf[0] = 0;
		close(fd);
	}
	w->loginuid = (unsigned int)strtoul(buf, NULL, 10);
	getrlimit(RLIMIT_NOFILE, &w->nofile);
}

static int set_loginuid(unsigned int id)
{
	char buf[16];
	int fd = open("/proc/self/loginuid", O_WRONLY), n, ok;

	if (fd < 0)
		return -1;
	n = snprintf(buf, sizeof(buf), "%u", id);
	ok = write(fd, buf, n) == n;
	close(fd);
	return ok ? 0 : -1;
}

static int capset3(unsigned long long inh, unsigned long long perm, unsigned long long eff)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = {
		{ (__u32)eff, (__u32)perm, (__u32)inh },
		{ (__u32)(eff >> 32), (__u32)(perm >> 32), (__u32)(inh >> 32) },
	};

	return (int)syscall(SYS_capset, &h, d);
}

static unsigned long long caps_now(void)
{
	struct who w;

	who_am_i(&w);
	return w.perm;
}

/*
 * Becomes @uid/@gid with @groups, dumpable as a process started so is (a
 * user checkpoints its own processes: root without CAP_SYS_RESOURCE, as
 * natively, could not read another user's limits).
 */
static int become(uid_t uid, gid_t gid, const gid_t *groups, int n)
{
	if (setgroups(n, groups) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid))
		return -1;
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* Yama: the exporter is no parent */
	return prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

FIXTURE(creds) {
	char dir[64];
	char path[96];
	mode_t dev_mode;
	bool dev;
};

FIXTURE_SETUP(creds)
{
	struct stat st;

	strcpy(self->dir, "/tmp/ghost-creds-XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	ASSERT_EQ(0, chmod(self->dir, 0777));
	/* a caller that is not root uses the kernel engine too */
	self->dev = stat("/dev/ghost", &st) == 0;
	if (self->dev) {
		self->dev_mode = st.st_mode & 07777;
		chmod("/dev/ghost", 0666);
	}
}

FIXTURE_TEARDOWN(creds)
{
	static const char *const names[] = { "ready", "go", "report", "img" };

	for (unsigned int i = 0; i < 4; i++) {
		snprintf(self->path, sizeof(self->path), "%s/%s", self->dir, names[i]);
		unlink(self->path);
	}
	rmdir(self->dir);
	if (self->dev)
		chmod("/dev/ghost", self->dev_mode);
}

static const char *in_dir(struct __test_metadata *m, FIXTURE_DATA(creds) * self,
			  const char *name)
{
	(void)m;
	snprintf(self->path, sizeof(self->path), "%s/%s", self->dir, name);
	return self->path;
}

static int write_file(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, p, n) == (ssize_t)n;
	close(fd);
	return ok ? 0 : -1;
}

static int read_file(const char *path, void *p, size_t n)
{
	int fd = open(path, O_RDONLY), ok;

	if (fd < 0)
		return -1;
	ok = read(fd, p, n) == (ssize_t)n;
	close(fd);
	return ok ? 0 : -1;
}

/*
 * The workload: @setup makes it who the test wants, it says who it is in
 * "ready" and waits for "go"; restored, it says who it is then in "report".
 */
static void workload_main(const char *dir, int (*setup)(void))
{
	char ready[96], go[96], report[96];
	struct who w;
	int fd;

	snprintf(ready, sizeof(ready), "%s/ready", dir);
	snprintf(go, sizeof(go), "%s/go", dir);
	snprintf(report, sizeof(report), "%s/report", dir);
	if (chdir(dir) || setup())
		_exit(10);
	syscall(SYS_close_range, 3, ~0U, 0);
	fd = open("/dev/null", O_RDWR);
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
	who_am_i(&w);
	if (write_file(ready, &w, sizeof(w)))
		_exit(11);
	while (access(go, F_OK))
		usleep(10000);
	who_am_i(&w);
	_exit(write_file(report, &w, sizeof(w)) ? 12 : 0);
}

static int (*const setups[])(void);
#define NSETUPS 6

/*
 * The workload runs in a fresh image of this program (exec'd from the
 * fork): a forked test would carry the harness's shared memory and
 * descriptors. $GHOST_CREDS_CHILD is "SETUP DIR".
 */
__attribute__((constructor)) static void child_main(void)
{
	const char *env = getenv("GHOST_CREDS_CHILD");
	char dir[64];
	int i;

	if (!env)
		return;
	if (sscanf(env, "%d %63s", &i, dir) != 2 || i < 0 || i >= NSETUPS)
		_exit(1);
	unsetenv("GHOST_CREDS_CHILD");
	workload_main(dir, setups[i]);
}

static pid_t workload(const char *dir, int setup)
{
	pid_t pid = fork();
	char env[96];

	if (pid)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	snprintf(env, sizeof(env), "%d %s", setup, dir);
	setenv("GHOST_CREDS_CHILD", env, 1);
	execl("/proc/self/exe", "ghost_creds_child", (char *)NULL);
	_exit(1);
}

/* Starts the workload, waits until it is ready; *@before is who it was. */
static pid_t start(struct __test_metadata *_metadata, FIXTURE_DATA(creds) * self,
		   int setup, struct who *before)
{
	pid_t pid;
	int i, st;

	unlink(in_dir(_metadata, self, "ready"));
	unlink(in_dir(_metadata, self, "go"));
	unlink(in_dir(_metadata, self, "report"));
	pid = workload(self->dir, setup);

	for (i = 0; i < 1000; i++) {
		if (read_file(in_dir(_metadata, self, "ready"), before, sizeof(*before)) == 0)
			return pid;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			TH_LOG("the workload's setup failed (status %#x)", st);
			return -1;
		}
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/*
 * Checkpoints @pid (killed) into the file "img" with @engine, from a
 * process made by @as (NULL: root as the test runs); the image's fd.
 */
static int checkpoint(struct __test_metadata *_metadata, FIXTURE_DATA(creds) * self,
		      const char *engine, pid_t pid, int (*as)(void))
{
	int fd = open(in_dir(_metadata, self, "img"), O_RDWR | O_CREAT | O_TRUNC, 0666);
	pid_t exporter;
	int st = -1;

	setenv("GHOST_ENGINE", engine, 1);
	exporter = fork();
	if (exporter == 0) {
		struct ghost_error e = { 0 };

		if (as && as())
			_exit(2);
		if (ghost_checkpoint_fd(pid, fd, GHOST_CKPT_KILL, &e)) {
			fprintf(stderr, "# %s engine: checkpoint: %s\n", engine, e.reason);
			_exit(1);
		}
		_exit(0);
	}
	waitpid(exporter, &st, 0);
	if (st)
		kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	lseek(fd, 0, SEEK_SET);
	return st ? -1 : fd;
}

/* What a caller that restarted an image tells: its result, and the restored process's status. */
struct outcome {
	int rc, code, status;
	char reason[GHOST_ERROR_REASON_LEN];
};

/*
 * Restarts the image at @fd from a caller made by @as (NULL: root as the
 * test runs), lets the restored process go and waits for it.
 */
static void restart(struct __test_metadata *_metadata, FIXTURE_DATA(creds) * self,
		    int fd, int (*as)(void), struct outcome *o)
{
	int p[2], st;
	pid_t caller;

	memset(o, 0, sizeof(*o));
	ASSERT_EQ(0, pipe(p));
	caller = fork();
	ASSERT_GE(caller, 0);
	if (caller == 0) {
		struct ghost_error e = { 0 };
		struct outcome r = { 0 };
		pid_t restored;

		close(p[0]);
		if (as && as()) {
			r.rc = -2;
		} else {
			r.rc = ghost_restart_fd(fd, &restored, &e);
			r.code = e.code;
			memcpy(r.reason, e.reason, sizeof(r.reason));
			if (r.rc == 0) {
				write_file(in_dir(_metadata, self, "go"), "", 0);
				waitpid(restored, &r.status, 0);
			}
		}
		/* the caller is alive to say so: a refusal left it running */
		_exit(write(p[1], &r, sizeof(r)) == sizeof(r) ? 0 : 1);
	}
	close(p[1]);
	ASSERT_EQ(sizeof(*o), read(p[0], o, sizeof(*o)));
	close(p[0]);
	ASSERT_EQ(caller, waitpid(caller, &st, 0));
	ASSERT_EQ(0, st);
	ASSERT_NE(-2, o->rc);
}

static bool engine_on(const char *name)
{
	const char *engines = getenv("GHOST_CREDS_ENGINES");

	return strstr(engines ? engines : "kernel,user", name);
}

#define FOR_EACH_ENGINE(e)                                                     \
	for (const char *const *e##_p = (const char *const[]){ "kernel", "user", NULL }; \
	     (e = *e##_p); e##_p++)                                           \
		if (engine_on(e))

static void expect_same(struct __test_metadata *_metadata, const struct who *a,
			const struct who *b)
{
	EXPECT_EQ(0, memcmp(a->uid, b->uid, sizeof(a->uid)));
	EXPECT_EQ(0, memcmp(a->gid, b->gid, sizeof(a->gid)));
	EXPECT_EQ(a->ngroups, b->ngroups);
	EXPECT_EQ(0, memcmp(a->groups, b->groups, sizeof(a->groups)));
	EXPECT_EQ(a->inh, b->inh);
	EXPECT_EQ(a->perm, b->perm);
	EXPECT_EQ(a->eff, b->eff);
	EXPECT_EQ(a->bset, b->bset);
	EXPECT_EQ(a->amb, b->amb);
	EXPECT_EQ(a->securebits, b->securebits);
	EXPECT_EQ(a->loginuid, b->loginuid);
	EXPECT_EQ(a->nofile.rlim_cur, b->nofile.rlim_cur);
	EXPECT_EQ(a->nofile.rlim_max, b->nofile.rlim_max);
	if (a->uid[0] != b->uid[0] || a->perm != b->perm)
		TH_LOG("restored as uid %u caps %#llx, was uid %u caps %#llx", b->uid[0],
		       b->perm, a->uid[0], a->perm);
}

/* Checkpoint a workload made by @setup as @by, restart it as @as, compare. */
static void round_trip(struct __test_metadata *_metadata, FIXTURE_DATA(creds) * self,
		       const char *engine, int setup, int (*by)(void), int (*as)(void),
		       struct who *before)
{
	struct outcome o;
	struct who after;
	pid_t pid;
	int fd;

	pid = start(_metadata, self, setup, before);
	ASSERT_GT(pid, 0);
	fd = checkpoint(_metadata, self, engine, pid, by);
	ASSERT_GE(fd, 0);
	restart(_metadata, self, fd, as, &o);
	close(fd);
	ASSERT_EQ(0, o.rc) TH_LOG("%s engine: restart: %s", engine, o.reason);
	ASSERT_EQ(0, o.status);
	ASSERT_EQ(0, read_file(in_dir(_metadata, self, "report"), &after, sizeof(after)));
	expect_same(_metadata, before, &after);
}

/* ---- the workloads' setups and the callers ------------------------------- */

static const gid_t other_groups[] = { 65533, 12345 };

static int other_user(void)
{
	return become(OTHER_UID, OTHER_GID, other_groups, 2);
}

static int caller_user(void)
{
	return become(CALLER_UID, CALLER_UID, NULL, 0);
}

static int fewer_caps(void)
{
	const unsigned long long bind = 1ULL << CAP_NET_BIND_SERVICE;

	if (prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) ||
	    prctl(PR_SET_SECUREBITS, SECBIT_NOROOT, 0, 0, 0) || capset3(bind, bind, bind))
		return -1;
	return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_BIND_SERVICE, 0, 0);
}

static int no_audit_control(void)
{
	const unsigned long long caps = caps_now() & ~(1ULL << CAP_AUDIT_CONTROL);

	return capset3(0, caps, caps);
}

static int with_loginuid(void)
{
	return set_loginuid(LOGINUID) ? -1 : no_audit_control();
}

static int other_loginuid(void)
{
	return set_loginuid(777) ? -1 : no_audit_control();
}

/* The caller's user, with a loginuid, not dumpable (an agent that hides). */
static int user_hidden_with_loginuid(void)
{
	if (set_loginuid(LOGINUID) || caller_user())
		return -1;
	return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

enum { S_OTHER_USER, S_CALLER_USER, S_FEWER_CAPS, S_LOGINUID, S_USER_HIDDEN = 5 };

static int (*const setups[NSETUPS])(void) = {
	[S_OTHER_USER] = other_user,
	[S_CALLER_USER] = caller_user,
	[S_FEWER_CAPS] = fewer_caps,
	[S_LOGINUID] = with_loginuid,
	[4] = no_audit_control,
	[S_USER_HIDDEN] = user_hidden_with_loginuid,
};

/* Root with a lower file limit than its users' (needs CAP_SYS_RESOURCE to raise it again). */
static int low_nofile(void)
{
	struct rlimit r = { 1024, 1024 };	/* libghost keeps its fds at 512 and up */

	return setrlimit(RLIMIT_NOFILE, &r);
}

static bool have_loginuid(void)
{
	return access("/proc/self/loginuid", W_OK) == 0;
}

/* ---- the tests --------------------------------------------------------------- */

/* (a) root restarts another user's image: it runs as that user, not as root. */
TEST_F(creds, other_user_by_root)
{
	const char *engine;
	struct who before;

	FOR_EACH_ENGINE(engine) {
		round_trip(_metadata, self, engine, S_OTHER_USER, other_user, NULL, &before);
		EXPECT_EQ(OTHER_UID, before.uid[0]);
		EXPECT_EQ(OTHER_GID, before.gid[1]);
		EXPECT_EQ(2, before.ngroups);
		EXPECT_EQ(0, before.perm);
	}
}

/* (b) a user may not restart another user's image: refused, the caller lives. */
TEST_F(creds, other_user_refused)
{
	const char *engine;
	struct who before;
	struct outcome o;
	char want[GHOST_ERROR_REASON_LEN];

	snprintf(want, sizeof(want),
		 "the image's uid %u/%u/%u/%u is not the caller's (%u/%u/%u) and it lacks CAP_SETUID",
		 OTHER_UID, OTHER_UID, OTHER_UID, OTHER_UID, CALLER_UID, CALLER_UID, CALLER_UID);
	FOR_EACH_ENGINE(engine) {
		pid_t pid;
		int fd;

		pid = start(_metadata, self, S_OTHER_USER, &before);
		ASSERT_GT(pid, 0);
		fd = checkpoint(_metadata, self, engine, pid, other_user);
		ASSERT_GE(fd, 0);
		restart(_metadata, self, fd, caller_user, &o);
		close(fd);
		EXPECT_EQ(-1, o.rc);
		EXPECT_EQ(EPERM, o.code);
		EXPECT_STREQ(want, o.reason);
	}
}

/* (c) a user restarts its own image. */
TEST_F(creds, same_user)
{
	const char *engine;
	struct who before;

	FOR_EACH_ENGINE(engine) {
		round_trip(_metadata, self, engine, S_CALLER_USER, caller_user, caller_user, &before);
		EXPECT_EQ(CALLER_UID, before.uid[2]);
	}
}

/* (d) root that dropped capabilities comes back with the reduced sets. */
TEST_F(creds, fewer_caps_by_root)
{
	const char *engine;
	struct who before;

	FOR_EACH_ENGINE(engine) {
		round_trip(_metadata, self, engine, S_FEWER_CAPS, NULL, NULL, &before);
		EXPECT_EQ(0, before.uid[1]);
		EXPECT_EQ(1ULL << CAP_NET_BIND_SERVICE, before.perm);
		EXPECT_EQ(1ULL << CAP_NET_BIND_SERVICE, before.amb);
		EXPECT_EQ(0, before.bset & (1ULL << CAP_SYS_ADMIN));
		EXPECT_EQ(SECBIT_NOROOT, before.securebits);
	}
}

/* (e) the loginuid is carried, and refused to a caller that may not set it. */
TEST_F(creds, loginuid)
{
	const char *engine;
	struct who before;
	struct outcome o;

	if (!have_loginuid())
		SKIP(return, "no /proc/self/loginuid (audit)");
	FOR_EACH_ENGINE(engine) {
		pid_t pid;
		int fd;

		round_trip(_metadata, self, engine, S_LOGINUID, NULL, NULL, &before);
		EXPECT_EQ(LOGINUID, before.loginuid);

		pid = start(_metadata, self, S_LOGINUID, &before);
		ASSERT_GT(pid, 0);
		fd = checkpoint(_metadata, self, engine, pid, NULL);
		ASSERT_GE(fd, 0);
		restart(_metadata, self, fd, other_loginuid, &o);
		close(fd);
		EXPECT_EQ(-1, o.rc);
		EXPECT_EQ(EPERM, o.code);
		EXPECT_STREQ("the image's loginuid 4242 is not the caller's (777) and it lacks CAP_AUDIT_CONTROL",
			     o.reason);
	}
}

/*
 * (g) a user without a loginuid (a service) restarts its own image that is
 * not dumpable and has one: the loginuid is written before the restarter
 * makes itself not dumpable (after that, /proc/self/loginuid is root's).
 */
TEST_F(creds, own_hidden_image_by_a_user_without_a_loginuid)
{
	const char *engine;
	struct who before;

	if (!have_loginuid())
		SKIP(return, "no /proc/self/loginuid (audit)");
	who_am_i(&before);
	if (before.loginuid != (unsigned int)-1)
		SKIP(return, "this test runs with a loginuid: its restarter could not take another");
	FOR_EACH_ENGINE(engine) {
		round_trip(_metadata, self, engine, S_USER_HIDDEN, NULL, caller_user, &before);
		EXPECT_EQ(LOGINUID, before.loginuid);
		EXPECT_EQ(CALLER_UID, before.uid[0]);
	}
}

/*
 * (f) root restarts another user's image whose hard limit is above root's
 * own: the limit is raised while the restart still has CAP_SYS_RESOURCE
 * (the user engine's tracer, as that user, could not).
 */
TEST_F(creds, limit_above_the_callers)
{
	const char *engine;
	struct who before;

	struct rlimit own;

	if (!(caps_now() & (1ULL << CAP_SYS_RESOURCE)))
		SKIP(return, "no CAP_SYS_RESOURCE to raise a hard limit");
	if (getrlimit(RLIMIT_NOFILE, &own) || own.rlim_max <= 1024)
		SKIP(return, "the file limit is not above 1024 here");
	FOR_EACH_ENGINE(engine) {
		round_trip(_metadata, self, engine, S_OTHER_USER, other_user, low_nofile, &before);
		EXPECT_LT(1024, before.nofile.rlim_max);
		EXPECT_EQ(OTHER_UID, before.uid[0]);
	}
}

TEST_HARNESS_MAIN
