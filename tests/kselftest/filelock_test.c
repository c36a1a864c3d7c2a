// SPDX-License-Identifier: GPL-2.0
/*
 * File locks carried by a checkpoint and restart, with each engine
 * ($GHOST_LOCK_ENGINES, "kernel,user" by default; "user" natively).
 *
 * A worker holds a POSIX write lock on bytes 10-29 of file a, an OFD read
 * lock on file b and a flock exclusive lock on file c. It is checkpointed
 * (killed) and restarted; then
 *  - this process, another one, sees the locks held by the restored pid
 *    (F_GETLK names it for POSIX, F_OFD_GETLK finds the read lock,
 *    flock(LOCK_EX | LOCK_NB) fails with EWOULDBLOCK);
 *  - the restored worker checks from inside that a second open file of b
 *    and of c sees its OFD and flock locks, and that it can unlock and
 *    lock each again.
 * A restart while this process holds a lock conflicting with one of them
 * fails before the point of no return, with the reason naming the lock
 * and the file, and the importing process lives on.
 */
#include <errno.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "ghost/ghost.h"
#include "ghost_util.h"
#include "kselftest_harness.h"

struct ready {
	int fd[3];		/* the worker's descriptors of a, b, c */
};

static int setlk(int fd, int cmd, short type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
			    .l_start = start, .l_len = len };

	return fcntl(fd, cmd, &fl);
}

/*
 * Inside the restored worker: the locks are its own (a second open file
 * of b and c conflicts with them) and it can release and take each again.
 */
static int self_check(const char *dir, const struct ready *r)
{
	char path[256];
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int b2, c2, ok;

	snprintf(path, sizeof(path), "%s/b", dir);
	b2 = open(path, O_RDWR);
	snprintf(path, sizeof(path), "%s/c", dir);
	c2 = open(path, O_RDONLY);
	ok = b2 >= 0 && c2 >= 0;
	ok = ok && !fcntl(b2, F_OFD_GETLK, &fl) && fl.l_type == F_RDLCK;
	ok = ok && flock(c2, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK;
	/* not a second descriptor of a: closing it would drop the POSIX lock */
	ok = ok && !setlk(r->fd[0], F_SETLK, F_UNLCK, 10, 20) &&
	     !setlk(r->fd[0], F_SETLK, F_WRLCK, 10, 20);
	ok = ok && !setlk(r->fd[1], F_OFD_SETLK, F_UNLCK, 0, 0) &&
	     !setlk(r->fd[1], F_OFD_SETLK, F_RDLCK, 0, 0);
	ok = ok && !flock(r->fd[2], LOCK_UN) &&
	     !flock(r->fd[2], LOCK_EX | LOCK_NB);
	if (b2 >= 0)
		close(b2);
	if (c2 >= 0)
		close(c2);
	return ok;
}

static void worker(const char *dir, int cmd, int rep)
{
	char path[256];
	struct ready r;
	char c;

	snprintf(path, sizeof(path), "%s/a", dir);
	r.fd[0] = open(path, O_RDWR);
	snprintf(path, sizeof(path), "%s/b", dir);
	r.fd[1] = open(path, O_RDONLY);
	snprintf(path, sizeof(path), "%s/c", dir);
	r.fd[2] = open(path, O_RDONLY);
	if (r.fd[0] < 0 || r.fd[1] < 0 || r.fd[2] < 0 ||
	    setlk(r.fd[0], F_SETLK, F_WRLCK, 10, 20) ||
	    setlk(r.fd[1], F_OFD_SETLK, F_RDLCK, 0, 0) ||
	    flock(r.fd[2], LOCK_EX | LOCK_NB))
		_exit(1);
	if (write(rep, &r, sizeof(r)) != sizeof(r))
		_exit(1);
	while (read(cmd, &c, 1) == 1) {
		c = self_check(dir, &r) ? 'y' : 'n';
		if (write(rep, &c, 1) != 1)
			_exit(1);
	}
	_exit(0);
}

/* The worker runs in a fresh image of this program: "DIR CMD REP". */
__attribute__((constructor)) static void worker_main(void)
{
	const char *env = getenv("GHOST_FILELOCK_WORKER");
	char dir[128];
	int cmd, rep;

	if (!env)
		return;
	if (sscanf(env, "%127s %d %d", dir, &cmd, &rep) != 3)
		_exit(1);
	unsetenv("GHOST_FILELOCK_WORKER");
	worker(dir, cmd, rep);
}

FIXTURE(filelock) {
	char dir[64];
	char path[3][96];
	int fd[3];		/* this process's own open files of a, b, c */
	pid_t pid;
	int cmd, rep;		/* kept open: the restart inherits them */
	int wcmd, wrep;		/* the worker's ends */
	struct ready r;
	int img;
};

FIXTURE_VARIANT(filelock) {
	const char *engine;
};

FIXTURE_VARIANT_ADD(filelock, kernel) { .engine = "kernel" };
FIXTURE_VARIANT_ADD(filelock, user) { .engine = "user" };

FIXTURE_SETUP(filelock)
{
	static const char *const names[] = { "a", "b", "c" };
	int c[2], p[2], i;
	char env[160];

	const char *engines = getenv("GHOST_LOCK_ENGINES");

	self->pid = -1;
	self->dir[0] = 0;
	if (engines && !strstr(engines, variant->engine))
		SKIP(return, "the %s engine is not tested here", variant->engine);
	strcpy(self->dir, "/tmp/ghost-filelock-XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	for (i = 0; i < 3; i++) {
		snprintf(self->path[i], sizeof(self->path[i]), "%s/%s",
			 self->dir, names[i]);
		self->fd[i] = open(self->path[i], O_RDWR | O_CREAT, 0600);
		ASSERT_LE(0, self->fd[i]);
		ASSERT_EQ(0, ftruncate(self->fd[i], 4096));
	}
	ASSERT_EQ(0, pipe(c));
	ASSERT_EQ(0, pipe(p));
	self->pid = fork();
	ASSERT_LE(0, self->pid);
	if (self->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (i = 0; i < 3; i++)
			close(self->fd[i]);
		close(c[1]);
		close(p[0]);
		snprintf(env, sizeof(env), "%s %d %d", self->dir, c[0], p[1]);
		setenv("GHOST_FILELOCK_WORKER", env, 1);
		execl("/proc/self/exe", "ghost_filelock_worker", (char *)NULL);
		_exit(1);
	}
	self->cmd = c[1];
	self->rep = p[0];
	self->wcmd = c[0];
	self->wrep = p[1];
	ASSERT_EQ(sizeof(self->r), read(self->rep, &self->r, sizeof(self->r)));
	self->img = -1;
}

FIXTURE_TEARDOWN(filelock)
{
	int i;

	if (!self->dir[0])
		return;
	if (self->pid > 0) {
		kill(self->pid, SIGKILL);
		waitpid(self->pid, NULL, 0);
	}
	for (i = 0; i < 3; i++) {
		close(self->fd[i]);
		unlink(self->path[i]);
	}
	rmdir(self->dir);
}

/* What another process sees of @holder's three locks. */
static void expect_held(struct __test_metadata *_metadata,
			FIXTURE_DATA(filelock) *self, pid_t holder)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

	ASSERT_EQ(0, fcntl(self->fd[0], F_GETLK, &fl));
	EXPECT_EQ(F_WRLCK, fl.l_type);
	EXPECT_EQ(holder, fl.l_pid);
	EXPECT_EQ(10, fl.l_start);
	EXPECT_EQ(20, fl.l_len);
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	ASSERT_EQ(0, fcntl(self->fd[1], F_OFD_GETLK, &fl));
	EXPECT_EQ(F_RDLCK, fl.l_type);
	EXPECT_EQ(-1, flock(self->fd[2], LOCK_EX | LOCK_NB));
	EXPECT_EQ(EWOULDBLOCK, errno);
}

/* Checkpoint the worker with @engine (it is killed), into self->img. */
static void checkpoint(struct __test_metadata *_metadata,
		       FIXTURE_DATA(filelock) *self, const char *engine)
{
	struct ghost_error e = { 0 };

	setenv("GHOST_ENGINE", engine, 1);
	self->img = open("/tmp", O_TMPFILE | O_RDWR, 0600);
	ASSERT_LE(0, self->img);
	ASSERT_EQ(0, ghost_checkpoint_fd(self->pid, self->img, GHOST_CKPT_KILL, &e))
		TH_LOG("%s engine: %s", engine, e.reason);
	ASSERT_EQ(self->pid, waitpid(self->pid, NULL, 0));
	self->pid = -1;
	/* gone with it */
	EXPECT_EQ(0, flock(self->fd[2], LOCK_EX | LOCK_NB));
	EXPECT_EQ(0, flock(self->fd[2], LOCK_UN));
}

static pid_t restart(struct __test_metadata *_metadata,
		     FIXTURE_DATA(filelock) *self)
{
	struct ghost_error e = { 0 };
	pid_t pid = -1;

	EXPECT_EQ(0, lseek(self->img, 0, SEEK_SET));
	EXPECT_EQ(0, ghost_restart_fd(self->img, &pid, &e))
		TH_LOG("%s", e.reason);
	return pid;
}

TEST_F(filelock, carried)
{
	char c = 0;

	if (!self->dir[0])
		SKIP(return, "not this engine");
	expect_held(_metadata, self, self->pid);
	checkpoint(_metadata, self, variant->engine);
	self->pid = restart(_metadata, self);
	ASSERT_LT(0, self->pid);
	expect_held(_metadata, self, self->pid);
	ASSERT_EQ(1, write(self->cmd, "c", 1));
	ASSERT_EQ(1, read(self->rep, &c, 1));
	EXPECT_EQ('y', c) TH_LOG("the restored worker's own check failed");
	expect_held(_metadata, self, self->pid);
	close(self->img);
}

/*
 * In a child, as ghostctl's restart does: its import fails and it lives
 * on, saying why.
 */
static int restart_conflicted(int img, char *reason, size_t len)
{
	struct ghost_error e = { 0 };
	int p[2], st;
	pid_t pid;

	if (pipe(p) || lseek(img, 0, SEEK_SET))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		ghost_restart_self_fd(img, &e);
		if (write(p[1], e.reason, sizeof(e.reason)) < 0)
			_exit(2);
		_exit(42);	/* alive after the failure */
	}
	close(p[1]);
	memset(reason, 0, len);
	if (read(p[0], reason, len - 1) < 0)
		reason[0] = 0;
	close(p[0]);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST_F(filelock, conflict_fails_before_the_point_of_no_return)
{
	char reason[GHOST_ERROR_REASON_LEN], want[GHOST_ERROR_REASON_LEN];
	int k;

	if (!self->dir[0])
		SKIP(return, "not this engine");
	{
		checkpoint(_metadata, self, variant->engine);
		for (k = 0; k < 3; k++) {
			/* this process holds a lock conflicting with lock k */
			if (k == 0) {
				ASSERT_EQ(0, setlk(self->fd[0], F_SETLK, F_RDLCK, 29, 1));
				snprintf(want, sizeof(want),
					 "the POSIX write lock of fd %d (bytes 10-29) conflicts with another process's lock now: %s",
					 self->r.fd[0], self->path[0]);
			} else if (k == 1) {
				ASSERT_EQ(0, setlk(self->fd[1], F_OFD_SETLK, F_WRLCK, 0, 1));
				snprintf(want, sizeof(want),
					 "the OFD read lock of fd %d (bytes 0-EOF) conflicts with another process's lock now: %s",
					 self->r.fd[1], self->path[1]);
			} else {
				ASSERT_EQ(0, flock(self->fd[2], LOCK_SH));
				snprintf(want, sizeof(want),
					 "the flock write lock of fd %d conflicts with another process's lock now: %s",
					 self->r.fd[2], self->path[2]);
			}
			EXPECT_EQ(42, restart_conflicted(self->img, reason, sizeof(reason)));
			EXPECT_STREQ(want, reason);
			ASSERT_EQ(0, setlk(self->fd[0], F_SETLK, F_UNLCK, 0, 0));
			ASSERT_EQ(0, setlk(self->fd[1], F_OFD_SETLK, F_UNLCK, 0, 0));
			ASSERT_EQ(0, flock(self->fd[2], LOCK_UN));
		}
		/* Nothing left behind: with the conflicts gone it restarts. */
		self->pid = restart(_metadata, self);
		ASSERT_LT(0, self->pid);
		expect_held(_metadata, self, self->pid);
		close(self->img);
	}
}

/*
 * An image whose OFD lock, recorded after its POSIX lock, covers the same
 * bytes of the same file (made so: no process holds both): the POSIX lock
 * is tested again once the OFD lock is held, and the restart is refused
 * before the point of no return, its caller alive (taking the POSIX lock
 * after that point failed, and the importer was killed).
 */
TEST_F(filelock, an_ofd_lock_recorded_after_a_posix_one_on_its_bytes_is_refused)
{
	static struct image_sec secs[4096];
	char reason[GHOST_ERROR_REASON_LEN];
	struct ghost_lock *posix = NULL, *ofd = NULL;
	size_t len;
	char *img;
	int n, k;

	if (!self->dir[0])
		SKIP(return, "not this engine");
	checkpoint(_metadata, self, variant->engine);
	ASSERT_EQ(0, lseek(self->img, 0, SEEK_SET));
	img = read_all(self->img, &len);
	ASSERT_NE(NULL, img);
	n = image_walk(img, len, secs, 4096);
	ASSERT_LT(0, n);
	for (k = image_find(secs, n, GHOST_SEC_LOCK, 0); k >= 0;
	     k = image_find(secs, n, GHOST_SEC_LOCK, k + 1)) {
		struct ghost_lock *l = (struct ghost_lock *)secs[k].payload;

		if (l->kind == GHOST_LOCK_POSIX)
			posix = l;
		else if (l->kind == GHOST_LOCK_OFD && posix)
			ofd = l;
	}
	ASSERT_NE(NULL, posix);
	ASSERT_NE(NULL, ofd) TH_LOG("no OFD lock recorded after the POSIX one");
	ofd->file_id = posix->file_id;
	ofd->type = F_WRLCK;	/* the record holds F_RDLCK / F_WRLCK */
	ofd->start = posix->start;
	ofd->len = posix->len;
	image_set_sum(img, secs[n - 1].off, (struct ghost_end *)secs[n - 1].payload);
	ASSERT_EQ((ssize_t)len, pwrite(self->img, img, len, 0));
	EXPECT_EQ(42, restart_conflicted(self->img, reason, sizeof(reason)))
		TH_LOG("not 42: the importer did not live on (killed past the point of no return?)");
	EXPECT_NE(NULL, strstr(reason, "the POSIX write lock of fd")) TH_LOG("%s", reason);
	free(img);
	close(self->img);
}

TEST_HARNESS_MAIN
