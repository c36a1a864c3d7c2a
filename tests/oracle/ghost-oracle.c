// SPDX-License-Identifier: GPL-2.0
/*
 * ghost-oracle: runs the oracle workloads through ghost and through CRIU, in
 * the test VM, and prints TAP. See Documentation/testing.md ("The CRIU
 * oracle").
 *
 * For each workload, three fresh instances:
 *   ghost   start, wait ready, snapshot maps + fds, ghostctl checkpoint (the
 *           process is killed), ghostctl restart --detach, snapshot again and
 *           compare, SIGTERM, read the workload's verdict;
 *   criu    the same with criu dump / criu restore -d;
 *   memory  (only with --out DIR) ghostctl checkpoint --leave-stopped, then
 *           criu dump of the same stopped process: both images land in
 *           DIR/NAME/ for tests/oracle/compare-memory on the host.
 * A tool passes a workload when the restore succeeds, the maps and fd table
 * match, and the workload itself reports PASS. The TAP line is "not ok"
 * exactly when ghost fails a workload that CRIU passes.
 *
 * --engine E gives every ghostctl call "--engine E". Without CRIU (--no-criu,
 * which also runs on a host where CRIU does not work, and --cross EXP:IMP,
 * which checkpoints with one engine and restarts with the other) only the
 * ghost instance runs, and the TAP line is "not ok" whenever ghost fails.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORK_ROOT "/tmp/oracle"	/* default of --work */

enum { W_PIPE = 1 };		/* stdin is a pipe the runner writes to */

static const struct workload {
	const char *name;
	unsigned int flags;
	int ready_s, finish_s;	/* timeouts */
	int run_ms;		/* restored, it runs this long before SIGTERM */
} workloads[] = {
	{ "anon", 0, 30, 30, 300 },
	{ "heap", 0, 30, 30, 300 },
	{ "stack", 0, 30, 30, 300 },
	{ "filepriv", 0, 30, 30, 300 },
	{ "readonly", 0, 30, 30, 300 },
	{ "bigmem", 0, 120, 120, 300 },
	{ "regs", 0, 30, 30, 300 },
	{ "avx", 0, 30, 30, 300 },
	{ "tls", 0, 30, 30, 300 },
	{ "sigaction", 0, 30, 30, 300 },
	{ "sigmask", 0, 30, 30, 300 },
	{ "sigaltstack", 0, 30, 30, 300 },
	{ "fileoff", 0, 30, 30, 300 },
	{ "fdshare", 0, 30, 30, 300 },
	{ "pipe", W_PIPE, 30, 30, 300 },
	/*
	 * A sleep interrupted by the checkpoint may start again in full (300
	 * ms) at the restart, and the workload wants it to end before SIGTERM
	 * (at least two sleeps): 300 ms left a few ms to spare, too few on a
	 * loaded machine ("only 1 sleeps", once in ~50 user-engine runs).
	 */
	{ "sleeper", 0, 30, 30, 1000 },
	{ "cwd", 0, 30, 30, 300 },
	{ "rlimits", 0, 30, 30, 300 },
	{ "cmdline", 0, 30, 30, 300 },
};
#define NWORKLOADS (sizeof(workloads) / sizeof(workloads[0]))

static const char *out_dir;	/* --out: keep memory images here */
static int keep;		/* --keep: keep the work directories */
static int verbose;
static const char *work_root = WORK_ROOT;	/* --work */
/* --engine / --cross: "ghostctl --engine E" for the checkpoint, the restart. */
static const char *ck_engine, *rs_engine;
static int cross;		/* --cross EXP:IMP */
static int no_criu;		/* --no-criu, or implied by --cross */

/* ---- small utilities -------------------------------------------------------- */

/* snprintf for paths and commands: truncation would be a silent bug. */
__attribute__((format(printf, 3, 4)))
static void xsnprintf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len) {
		fprintf(stderr, "ghost-oracle: a path or command is too long: %s\n", buf);
		exit(2);
	}
}


static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void msleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* A growable string. */
struct buf {
	char *s;
	size_t len, cap;
};

__attribute__((format(printf, 2, 3)))
static void bprintf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->s = realloc(b->s, b->cap);
		if (!b->s)
			abort();
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, n + 1, fmt, ap);
	va_end(ap);
	b->len += n;
}

static void bfree(struct buf *b)
{
	free(b->s);
	*b = (struct buf){ 0 };
}

/* Whole file into a malloc'd, NUL-terminated string, or NULL. */
static char *slurp(const char *path)
{
	struct buf b = { 0 };
	char chunk[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	bprintf(&b, "%s", "");
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		bprintf(&b, "%.*s", (int)n, chunk);
	close(fd);
	return b.s;
}

/* The last @lines lines of @path, as "# " comment lines. */
static void print_tail(const char *what, const char *path, int lines)
{
	char *s = slurp(path), *p;
	int n = 0;

	if (!s || !*s) {
		free(s);
		return;
	}
	for (p = s + strlen(s); p > s; p--)
		if (p[-1] == '\n' && p[0] && ++n > lines)
			break;
	printf("#   %s (%s):\n", what, path);
	for (char *line = strtok(p, "\n"); line; line = strtok(NULL, "\n"))
		printf("#     %s\n", line);
	free(s);
}

static void rm_rf(const char *path)
{
	char cmd[4200];

	xsnprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "ghost-oracle: %s failed\n", cmd);
}

static void mkdir_p(const char *path)
{
	char cmd[4200];

	xsnprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "ghost-oracle: %s failed\n", cmd);
}

/* ---- children: the runner is a subreaper, so it reaps restored processes -- */

#define MAX_REAPED 256
static struct {
	pid_t pid;
	int status;
} reaped[MAX_REAPED];
static int nreaped;

/* Reaps every child that has exited; remembers their status. */
static void reap(void)
{
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (nreaped == MAX_REAPED)
			nreaped = 0;
		reaped[nreaped].pid = pid;
		reaped[nreaped++].status = status;
	}
}

/* 1 and *status if @pid was reaped (once), else 0. */
static int exited(pid_t pid, int *status)
{
	reap();
	for (int i = 0; i < nreaped; i++) {
		if (reaped[i].pid == pid) {
			*status = reaped[i].status;
			reaped[i].pid = 0;
			return 1;
		}
	}
	return 0;
}

static void describe_status(char *out, size_t len, int status)
{
	if (WIFEXITED(status))
		xsnprintf(out, len, "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		xsnprintf(out, len, "killed by signal %d", WTERMSIG(status));
	else
		xsnprintf(out, len, "status %#x", status);
}

/*
 * Runs @argv with stdin @in (or /dev/null), stdout and stderr into @log,
 * waits at most @timeout_s. Returns its exit status (0-255), 124 on timeout,
 * 127 if it could not run.
 */
static int run(char *const argv[], int in, const char *log, int timeout_s, double *secs)
{
	double t0 = now();
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return 127;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (in < 0)
			in = open("/dev/null", O_RDONLY);
		if (in < 0 || fd < 0 || dup2(in, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execvp(argv[0], argv);
		dprintf(2, "%s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (!exited(pid, &status)) {
		if (now() - t0 > timeout_s) {
			kill(pid, SIGKILL);
			while (!exited(pid, &status))
				msleep(5);
			if (secs)
				*secs = now() - t0;
			return 124;
		}
		msleep(5);
	}
	if (secs)
		*secs = now() - t0;
	if (verbose) {
		printf("# $");
		for (int i = 0; argv[i]; i++)
			printf(" %s", argv[i]);
		printf("  -> %d (%.2f s)\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128,
		       now() - t0);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- /proc snapshots: merged maps and the fd table ------------------------- */

/*
 * /proc/PID/maps with adjacent compatible regions merged, as CRIU's zdtm
 * compares them: a restore may merge neighbouring mappings that stayed
 * separate in the original only because of kernel bookkeeping (the same
 * rule as tests/kselftest/import_test.c, plus device and inode).
 */
static void snap_maps(pid_t pid, struct buf *out)
{
	char path[64], line[1024];
	unsigned long ps = 0, pe = 0, po = 0, s, e, o, ino, pino = 0;
	char pperm[8] = "", pname[512] = "", pdev[16] = "", perm[8], name[512], dev[16];
	FILE *f;

	xsnprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f) {
		bprintf(out, "(no %s)\n", path);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		name[0] = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %15s %lu %511[^\n]", &s, &e, perm, &o, dev,
			   &ino, name) < 6)
			continue;
		if (pe == s && !strcmp(perm, pperm) && !strcmp(name, pname) &&
		    !strcmp(dev, pdev) && ino == pino &&
		    (!name[0] || name[0] == '[' || po + (pe - ps) == o)) {
			pe = e;
			continue;
		}
		if (pe)
			bprintf(out, "%lx-%lx %s %08lx %s %lu %s\n", ps, pe, pperm, po, pdev,
				pino, pname);
		ps = s, pe = e, po = o, pino = ino;
		strcpy(pperm, perm);
		strcpy(pname, name);
		strcpy(pdev, dev);
	}
	if (pe)
		bprintf(out, "%lx-%lx %s %08lx %s %lu %s\n", ps, pe, pperm, po, pdev, pino,
			pname);
	fclose(f);
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* "fd N -> TARGET pos P flags F" for every descriptor, by number. */
static void snap_fds(pid_t pid, struct buf *out)
{
	char path[64];
	int fds[1100], n = 0;
	struct dirent *d;
	DIR *dir;

	xsnprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = opendir(path);
	if (!dir) {
		bprintf(out, "(no %s)\n", path);
		return;
	}
	while ((d = readdir(dir)) && n < 1100)
		if (d->d_name[0] != '.')
			fds[n++] = atoi(d->d_name);
	closedir(dir);
	qsort(fds, n, sizeof(int), cmp_int);
	for (int i = 0; i < n; i++) {
		char link[64], target[4096] = "?", info[64], *fi;
		unsigned long pos = 0, flags = 0;
		ssize_t len;

		xsnprintf(link, sizeof(link), "/proc/%d/fd/%d", pid, fds[i]);
		len = readlink(link, target, sizeof(target) - 1);
		target[len > 0 ? len : 1] = 0;
		xsnprintf(info, sizeof(info), "/proc/%d/fdinfo/%d", pid, fds[i]);
		fi = slurp(info);
		if (fi) {
			char *p = strstr(fi, "pos:");
			char *q = strstr(fi, "flags:");

			if (p)
				pos = strtoul(p + 4, NULL, 10);
			if (q)
				flags = strtoul(q + 6, NULL, 8);
			free(fi);
		}
		/*
		 * Flags that only mattered to open(2) are not state: O_LARGEFILE
		 * is implied on 64-bit (CRIU gains it reopening an inherited pipe
		 * through /proc), and CRIU drops O_DIRECTORY.
		 */
		flags &= ~(0100000UL | O_DIRECTORY);
		bprintf(out, "fd %d -> %s pos %lu flags 0%lo\n", fds[i], target, pos, flags);
	}
}

static void snapshot(pid_t pid, struct buf *out)
{
	snap_maps(pid, out);
	snap_fds(pid, out);
}

/*
 * The reference snapshot, before the checkpoint: two in a row that agree.
 * Some workloads (cmdline, cwd) open and close a file in their checking
 * loop; a single snapshot can catch that descriptor for a moment, and the
 * restored process would then "differ" by a descriptor it never kept.
 */
static void snapshot_stable(pid_t pid, struct buf *out)
{
	struct buf again = { 0 };

	snapshot(pid, out);
	for (int i = 0; i < 20; i++) {
		msleep(10);
		bfree(&again);
		snapshot(pid, &again);
		if (!strcmp(out->s, again.s))
			break;
		bfree(out);
		*out = again;
		again = (struct buf){ 0 };
	}
	bfree(&again);
}

/* Prints the lines only in @a ("-") and only in @b ("+"); 0 if none. */
static int diff(const char *a, const char *b)
{
	int n = 0;

	for (int pass = 0; pass < 2; pass++) {
		const char *x = pass ? b : a, *y = pass ? a : b;
		char *copy = strdup(x), *save = NULL;

		for (char *line = strtok_r(copy, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			size_t l = strlen(line);
			const char *p = y;
			int found = 0;

			while ((p = strstr(p, line))) {
				if ((p == y || p[-1] == '\n') && (p[l] == '\n' || !p[l])) {
					found = 1;
					break;
				}
				p += l;
			}
			if (!found) {
				printf("#     %c %s\n", pass ? '+' : '-', line);
				n++;
			}
		}
		free(copy);
	}
	return n;
}

/* ---- one workload instance ---------------------------------------------------- */

struct instance {
	const struct workload *w;
	const char *tool;	/* ghost, criu, memory */
	char dir[512];		/* the workload's DIR */
	char img[512];		/* image file or directory */
	pid_t pid;		/* the process now */
	int pipe_w;		/* W_PIPE: the runner's write end */
	int pipe_r;		/* ... and the read end, for the restorer */
	char why[1024];		/* first failure */
	struct buf times;	/* "ghost checkpoint 0.12 s", ... */
};

__attribute__((format(printf, 2, 3)))
static void fail(struct instance *in, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (!in->why[0]) {
		vsnprintf(in->why, sizeof(in->why), fmt, ap);
	} else {
		/* Only the first failure is the verdict; the rest still shows. */
		printf("#   %s: also: ", in->tool);
		vprintf(fmt, ap);
		printf("\n");
	}
	va_end(ap);
}

static int start(struct instance *in)
{
	char path[600], *argv[3], exe[64];
	double t0 = now();
	int status;

	xsnprintf(in->dir, sizeof(in->dir), "%s/%s.%s", work_root, in->w->name, in->tool);
	rm_rf(in->dir);
	mkdir_p(in->dir);
	in->pipe_r = in->pipe_w = -1;
	if (in->w->flags & W_PIPE) {
		int p[2];

		if (pipe2(p, O_CLOEXEC)) {
			fail(in, "pipe: %s", strerror(errno));
			return -1;
		}
		in->pipe_r = p[0];
		in->pipe_w = p[1];
		if (write(in->pipe_w, "before\n", 7) != 7) {
			fail(in, "write to the pipe: %s", strerror(errno));
			return -1;
		}
	}
	xsnprintf(exe, sizeof(exe), "oracle-%s", in->w->name);
	argv[0] = exe;
	argv[1] = in->dir;
	argv[2] = NULL;
	in->pid = fork();
	if (in->pid == 0) {
		int fd = in->pipe_r >= 0 ? in->pipe_r : open("/dev/null", O_RDONLY);

		if (fd < 0 || dup2(fd, 0) < 0)
			_exit(127);
		execvp(exe, argv);
		dprintf(2, "ghost-oracle: %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	xsnprintf(path, sizeof(path), "%s/pid", in->dir);
	while (access(path, F_OK)) {
		if (exited(in->pid, &status)) {
			char st[64];

			describe_status(st, sizeof(st), status);
			xsnprintf(path, sizeof(path), "%s/log", in->dir);
			fail(in, "the workload died before it was ready (%s)", st);
			print_tail("workload log", path, 10);
			return -1;
		}
		if (now() - t0 > in->w->ready_s) {
			fail(in, "not ready within %d s", in->w->ready_s);
			kill(in->pid, SIGKILL);
			return -1;
		}
		msleep(10);
	}
	{
		char *s = slurp(path);
		pid_t said = s ? atoi(s) : 0;

		free(s);
		if (said != in->pid) {
			fail(in, "pidfile says %d, started %d", said, in->pid);
			return -1;
		}
	}
	/* A moment in the steady state before the checkpoint. */
	msleep(200);
	return 0;
}

/* Kills what is left of an instance and reaps it. */
static void cleanup(struct instance *in)
{
	int status;

	if (in->pid > 0 && kill(in->pid, SIGKILL) == 0) {
		for (int i = 0; i < 200 && !exited(in->pid, &status); i++)
			msleep(10);
	}
	in->pid = 0;
	if (in->pipe_r >= 0)
		close(in->pipe_r);
	if (in->pipe_w >= 0)
		close(in->pipe_w);
	in->pipe_r = in->pipe_w = -1;
	reap();
}

/* Waits for the checkpointed original to be gone (killed by the tool). */
static void wait_gone(struct instance *in)
{
	int status;
	double t0 = now();

	while (!exited(in->pid, &status)) {
		if (now() - t0 > 10) {
			fail(in, "the checkpointed process %d is still alive", in->pid);
			kill(in->pid, SIGKILL);
			t0 = now();
		}
		msleep(5);
	}
}

/* argv[0..] = "ghostctl" and, with @engine, "--engine ENGINE"; returns the count. */
static int ghostctl_argv(char **argv, const char *engine)
{
	int n = 0;

	argv[n++] = "ghostctl";
	if (engine) {
		argv[n++] = "--engine";
		argv[n++] = (char *)engine;
	}
	return n;
}

static int ghost_checkpoint(struct instance *in, const char *img, int leave_stopped)
{
	char pid[16], log[600], *argv[10];
	double secs;
	int rc, n = ghostctl_argv(argv, ck_engine);

	xsnprintf(pid, sizeof(pid), "%d", in->pid);
	xsnprintf(log, sizeof(log), "%s.checkpoint.log", img);
	argv[n++] = "checkpoint";
	argv[n++] = pid;
	argv[n++] = "-o";
	argv[n++] = (char *)img;
	if (leave_stopped)
		argv[n++] = "--leave-stopped";
	argv[n] = NULL;
	/*
	 * Workloads that check themselves through /proc/self (cmdline) hold
	 * such a file for an instant, and ghost refuses to checkpoint a process
	 * holding one (it leaves it running): try again a moment later.
	 */
	for (int tries = 0;; tries++) {
		char *s;
		int own;

		rc = run(argv, -1, log, 300, &secs);
		if (!rc || tries == 50)
			break;
		s = slurp(log);
		own = s && strstr(s, "of the process itself");
		free(s);
		if (!own)
			break;
		msleep(7);
	}
	bprintf(&in->times, "%s checkpoint %.2f s, ", ck_engine ? ck_engine : "ghost", secs);
	if (rc) {
		char *s = slurp(log);

		fail(in, "checkpoint failed (%d): %s", rc, s ? strtok(s, "\n") : "");
		free(s);
		return -1;
	}
	return 0;
}

/*
 * ghostctl restart --detach: the restored process is a new child of ghostctl,
 * re-parented to this runner (a subreaper) when ghostctl returns. Its stdin
 * is the pipe for W_PIPE workloads: inherited descriptors are ghostctl's own.
 */
static int ghost_restart(struct instance *in)
{
	char *argv[10], log[600], *s;
	double secs;
	int rc, n = ghostctl_argv(argv, rs_engine);

	argv[n++] = "restart";
	argv[n++] = "--detach";
	argv[n++] = in->img;
	argv[n] = NULL;
	xsnprintf(log, sizeof(log), "%s.restart.log", in->img);
	rc = run(argv, in->pipe_r, log, 300, &secs);
	if (cross)
		bprintf(&in->times, "%s restart %.2f s", rs_engine, secs);
	else
		bprintf(&in->times, "restart %.2f s", secs);
	s = slurp(log);
	if (rc) {
		fail(in, "restart failed (%d): %s", rc, s ? strtok(s, "\n") : "");
		free(s);
		in->pid = 0;
		return -1;
	}
	/* stdout has the pid; stderr shares the log: take the all-digit line. */
	in->pid = 0;
	for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n"))
		if (*line && line[strspn(line, "0123456789")] == 0)
			in->pid = atoi(line);
	free(s);
	if (in->pid <= 0) {
		fail(in, "ghostctl restart --detach printed no pid");
		return -1;
	}
	return 0;
}

static int criu_dump(struct instance *in, const char *dir, int verbosity)
{
	char pid[16], v[8];
	char *argv[] = { "criu", "dump", "-t", pid, "-D", (char *)dir, "-o", "dump.log", v,
			 NULL };
	char log[600];
	double secs;
	int rc;

	xsnprintf(pid, sizeof(pid), "%d", in->pid);
	xsnprintf(v, sizeof(v), "-v%d", verbosity);
	xsnprintf(log, sizeof(log), "%s/dump.out", dir);
	mkdir_p(dir);
	rc = run(argv, -1, log, 300, &secs);
	bprintf(&in->times, "criu dump %.2f s, ", secs);
	if (rc) {
		xsnprintf(log, sizeof(log), "%s/dump.log", dir);
		fail(in, "criu dump failed (%d), see %s", rc, log);
		print_tail("criu dump", log, 8);
		return -1;
	}
	return 0;
}

static int criu_restore(struct instance *in)
{
	char inherit[64] = "", log[600];
	char *argv[] = { "criu", "restore", "-D", in->img, "-d", "-o", "restore.log", "-v4",
			 NULL, NULL, NULL };
	double secs;
	int rc;

	/*
	 * The pipe's read end was dumped as pipe:[INODE]; CRIU documents
	 * --inherit-fd for resources whose other end lives outside the tree.
	 */
	if (in->pipe_r >= 0) {
		struct stat st;

		fstat(in->pipe_r, &st);
		xsnprintf(inherit, sizeof(inherit), "fd[0]:pipe:[%lu]", (unsigned long)st.st_ino);
		argv[8] = "--inherit-fd";
		argv[9] = inherit;
	}
	xsnprintf(log, sizeof(log), "%s/restore.out", in->img);
	rc = run(argv, in->pipe_r, log, 300, &secs);
	bprintf(&in->times, "restore %.2f s", secs);
	if (rc) {
		xsnprintf(log, sizeof(log), "%s/restore.log", in->img);
		fail(in, "criu restore failed (%d), see %s", rc, log);
		print_tail("criu restore", log, 8);
		return -1;
	}
	return 0;
}

/*
 * After the restore: compare the snapshot, let the workload verify, send
 * SIGTERM and read its verdict.
 */
static void finish(struct instance *in, const struct buf *before)
{
	struct buf after = { 0 };
	char out[600], log[600], *verdict;
	double t0;
	int status, gone = 0;

	if (exited(in->pid, &status)) {
		char st[64];

		describe_status(st, sizeof(st), status);
		xsnprintf(out, sizeof(out), "%s/out", in->dir);
		verdict = slurp(out);
		fail(in, "the restored process ended right after the restore (%s)%s%s", st,
		     verdict ? ": " : "", verdict ? strtok(verdict, "\n") : "");
		free(verdict);
		xsnprintf(log, sizeof(log), "%s/log", in->dir);
		print_tail("workload log", log, 10);
		in->pid = 0;
		return;
	}
	/* A restored process could still be settling: give it a few tries. */
	for (int i = 0; i < 20; i++) {
		bfree(&after);
		snapshot(in->pid, &after);
		if (!strcmp(before->s, after.s))
			break;
		msleep(50);
	}
	if (strcmp(before->s, after.s)) {
		fail(in, "/proc/PID/maps or fd table differ after the restore");
		printf("#   %s: maps/fds before (-) and after (+) differ:\n", in->tool);
		diff(before->s, after.s);
	}
	bfree(&after);
	msleep(in->w->run_ms);	/* the workload verifies a few rounds */
	if (in->pipe_w >= 0 && write(in->pipe_w, "after\n", 6) != 6)
		fail(in, "write to the pipe: %s", strerror(errno));
	xsnprintf(out, sizeof(out), "%s/out", in->dir);
	xsnprintf(log, sizeof(log), "%s/log", in->dir);
	kill(in->pid, SIGTERM);
	t0 = now();
	while (access(out, F_OK)) {
		if (exited(in->pid, &status)) {
			gone = 1;
			if (!access(out, F_OK))
				break;
			describe_status(out, sizeof(out), status);
			fail(in, "the restored process died without a verdict (%s)", out);
			print_tail("workload log", log, 10);
			in->pid = 0;
			return;
		}
		if (now() - t0 > in->w->finish_s) {
			fail(in, "no verdict within %d s of SIGTERM", in->w->finish_s);
			print_tail("workload log", log, 10);
			return;
		}
		msleep(10);
	}
	verdict = slurp(out);
	if (!verdict || strncmp(verdict, "PASS", 4))
		fail(in, "%s", verdict ? strtok(verdict, "\n") : "empty verdict");
	free(verdict);
	for (int i = 0; !gone && i < 500; i++) {
		if (exited(in->pid, &status))
			gone = 1;
		else
			msleep(10);
	}
	if (!gone)
		fail(in, "still running after its verdict");
	else
		in->pid = 0;
}

static int pass_ghost(struct instance *in)
{
	struct buf before = { 0 };

	xsnprintf(in->img, sizeof(in->img), "%s/img/%s.ghost", work_root, in->w->name);
	if (start(in))
		goto out;
	snapshot_stable(in->pid, &before);
	if (ghost_checkpoint(in, in->img, 0))
		goto out;
	wait_gone(in);
	if (ghost_restart(in))
		goto out;
	finish(in, &before);
out:
	bfree(&before);
	cleanup(in);
	if (!keep) {
		char log[600];

		unlink(in->img);
		xsnprintf(log, sizeof(log), "%s.checkpoint.log", in->img);
		unlink(log);
		xsnprintf(log, sizeof(log), "%s.restart.log", in->img);
		unlink(log);
	}
	return in->why[0] ? -1 : 0;
}

static int pass_criu(struct instance *in)
{
	struct buf before = { 0 };

	xsnprintf(in->img, sizeof(in->img), "%s/img/%s.criu", work_root, in->w->name);
	rm_rf(in->img);
	if (start(in))
		goto out;
	snapshot_stable(in->pid, &before);
	if (criu_dump(in, in->img, 4))
		goto out;
	wait_gone(in);
	if (criu_restore(in))
		goto out;
	finish(in, &before);
out:
	bfree(&before);
	cleanup(in);
	if (!keep)
		rm_rf(in->img);
	return in->why[0] ? -1 : 0;
}

/*
 * Copies the tree @from (files and directories) into @to in 4 MiB writes:
 * busybox cp's small writes over 9p crawl under TCG when the host is busy.
 */
static int copy_tree(const char *from, const char *to)
{
	struct dirent *d;
	DIR *dir = opendir(from);
	int err = 0;

	if (!dir)
		return -1;
	mkdir(to, 0755);
	while ((d = readdir(dir))) {
		char src[1200], dst[1200];
		struct stat st;

		if (d->d_name[0] == '.' && (!d->d_name[1] || (d->d_name[1] == '.' && !d->d_name[2])))
			continue;
		xsnprintf(src, sizeof(src), "%s/%s", from, d->d_name);
		xsnprintf(dst, sizeof(dst), "%s/%s", to, d->d_name);
		if (lstat(src, &st)) {
			err = -1;
		} else if (S_ISDIR(st.st_mode)) {
			err |= copy_tree(src, dst);
		} else if (S_ISREG(st.st_mode)) {
			static char buf[4 << 20];
			int in = open(src, O_RDONLY | O_CLOEXEC);
			int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			ssize_t n = 0;

			while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
				if (write(out, buf, n) != n) {
					n = -1;
					break;
				}
			if (in < 0 || out < 0 || n < 0)
				err = -1;
			if (in >= 0)
				close(in);
			if (out >= 0)
				close(out);
		}
	}
	closedir(dir);
	return err;
}

/* Copies the workload's own small files, for the host's clean-page check. */
static void copy_files(const char *from, const char *to)
{
	char cmd[1400];

	xsnprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s' && find '%s' -maxdepth 1 -type f -size -1024k "
		 "-exec cp {} '%s/' \\;", to, from, to);
	if (system(cmd) != 0)
		printf("#   copying %s failed\n", from);
}

/*
 * The memory comparison's capture: ghost first (the process stays stopped),
 * then CRIU dumps that same stopped process. Both write to tmpfs (writing
 * small records straight into the 9p share is ~1 MB/s under TCG), then the
 * images are copied to OUT/NAME/ in big blocks.
 */
static void pass_memory(struct instance *in)
{
	char dir[1024], tmp[1024], path[1200], *maps;
	double t0;
	int status;
	FILE *f;

	xsnprintf(dir, sizeof(dir), "%s/%s", out_dir, in->w->name);
	xsnprintf(tmp, sizeof(tmp), "%s/img/%s.memory", work_root, in->w->name);
	rm_rf(dir);
	rm_rf(tmp);
	mkdir_p(dir);
	mkdir_p(tmp);
	xsnprintf(in->img, sizeof(in->img), "%s/ghost.img", tmp);
	if (start(in))
		goto out;
	if (ghost_checkpoint(in, in->img, 1)) {
		/* Still dump with CRIU: the host tells who failed what. */
		unlink(in->img);
	} else if (waitpid(in->pid, &status, WUNTRACED) != in->pid || !WIFSTOPPED(status)) {
		/* Stopped, not gone: the runner is its parent and sees the stop. */
		fail(in, "not stopped after checkpoint --leave-stopped (status %#x)", status);
		goto out;
	}
	xsnprintf(path, sizeof(path), "/proc/%d/maps", in->pid);
	maps = slurp(path);
	xsnprintf(path, sizeof(path), "%s/maps", tmp);
	f = fopen(path, "we");
	if (f && maps)
		fputs(maps, f);
	if (f)
		fclose(f);
	free(maps);
	xsnprintf(path, sizeof(path), "%s/workdir", tmp);
	f = fopen(path, "we");
	if (f) {
		fprintf(f, "%s\n", in->dir);
		fclose(f);
	}
	xsnprintf(path, sizeof(path), "%s/criu", tmp);
	if (criu_dump(in, path, 2))
		goto out;
	wait_gone(in);
	xsnprintf(path, sizeof(path), "%s/files", tmp);
	copy_files(in->dir, path);
out:
	if (in->why[0]) {
		xsnprintf(path, sizeof(path), "%s/capture-error", tmp);
		f = fopen(path, "we");
		if (f) {
			fprintf(f, "%s\n", in->why);
			fclose(f);
		}
		printf("#   memory capture: %s\n", in->why);
	}
	cleanup(in);
	t0 = now();
	if (copy_tree(tmp, dir))
		printf("#   memory capture: copying %s to %s failed\n", tmp, dir);
	if (verbose)
		printf("#   memory capture: images copied in %.1f s\n", now() - t0);
	rm_rf(tmp);
}

/*
 * The TAP name before the workload's: "oracle" (ghost vs CRIU, ghostctl's
 * default engine), "oracle user-engine" (vs CRIU, --engine user),
 * "user-engine" (--no-criu), "cross kernel->user" (--cross kernel:user).
 */
static void tap_label(char *buf, size_t len)
{
	if (cross)
		xsnprintf(buf, len, "cross %s->%s", ck_engine, rs_engine);
	else if (ck_engine)
		xsnprintf(buf, len, "%s%s-engine", no_criu ? "" : "oracle ", ck_engine);
	else
		xsnprintf(buf, len, "%s", no_criu ? "ghost" : "oracle");
}

/* The ghost half of every mode: "# NAME", then ghost's result. 1 if it passed. */
static int ghost_half(struct instance *g)
{
	printf("# %s\n", g->w->name);
	fflush(stdout);
	if (!pass_ghost(g))
		return 1;
	printf("#   ghost: %s\n", g->why);
	return 0;
}

/* Without CRIU: ghost alone decides. Returns 1 when the TAP line is "not ok". */
static int run_workload_ghost_only(int n, const struct workload *w)
{
	struct instance g = { .w = w, .tool = "ghost" };
	double t0 = now();
	char label[64];
	int gok;

	tap_label(label, sizeof(label));
	gok = ghost_half(&g);
	printf("#   times: %s\n", g.times.s ? g.times.s : "-");
	printf("#   %s took %.1f s in all\n", w->name, now() - t0);
	if (gok)
		printf("ok %d %s %s: PASS\n", n, label, w->name);
	else
		printf("not ok %d %s %s: FAIL (%s)\n", n, label, w->name, g.why);
	fflush(stdout);
	bfree(&g.times);
	return !gok;
}

/* Returns 1 when the TAP line is "not ok". */
static int run_workload(int n, const struct workload *w)
{
	struct instance g = { .w = w, .tool = "ghost" }, c = { .w = w, .tool = "criu" };
	double t0 = now();
	char label[64];
	int gok, cok;

	if (no_criu)
		return run_workload_ghost_only(n, w);
	tap_label(label, sizeof(label));
	gok = ghost_half(&g);
	fflush(stdout);
	cok = !pass_criu(&c);
	if (!cok)
		printf("#   criu: %s\n", c.why);
	printf("#   times: %s; %s\n", g.times.s ? g.times.s : "-", c.times.s ? c.times.s : "-");
	if (out_dir) {
		struct instance m = { .w = w, .tool = "memory" };

		pass_memory(&m);
		bfree(&m.times);
	}
	printf("#   %s took %.1f s in all\n", w->name, now() - t0);
	if (gok && cok)
		printf("ok %d %s %s: ghost PASS, criu PASS\n", n, label, w->name);
	else if (gok)
		printf("ok %d %s %s: ghost PASS, criu FAIL (%s)\n", n, label, w->name, c.why);
	else if (cok)
		printf("not ok %d %s %s: ghost FAIL (%s), criu PASS\n", n, label, w->name,
		       g.why);
	else
		printf("ok %d %s %s: ghost FAIL (%s), criu FAIL (%s) # both failed\n", n,
		       label, w->name, g.why, c.why);
	fflush(stdout);
	bfree(&g.times);
	bfree(&c.times);
	return !gok && cok;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ghost-oracle [--engine E | --cross EXP:IMP] [--no-criu] [--out DIR]\n"
		"                    [--work DIR] [--keep] [--verbose] [--list] [NAME...]\n"
		"\n"
		"Runs the oracle workloads (all, or those named) through ghost\n"
		"(ghostctl checkpoint + restart) and CRIU (criu dump + restore) and\n"
		"prints TAP: 'not ok' when ghost fails a workload CRIU passes.\n"
		"\n"
		"  --engine E       run ghostctl --engine E (kernel, user, auto);\n"
		"                   TAP names 'oracle E-engine NAME'\n"
		"  --cross EXP:IMP  checkpoint with engine EXP, restart with engine IMP;\n"
		"                   no CRIU; TAP names 'cross EXP->IMP NAME'\n"
		"  --no-criu        ghost only (CRIU is not run or checked): 'not ok'\n"
		"                   whenever ghost fails; TAP names 'E-engine NAME'\n"
		"  --out DIR        also capture the same stopped process with both tools\n"
		"                   into DIR/NAME/ for tests/oracle/compare-memory\n"
		"  --work DIR       work directories and images (default " WORK_ROOT ")\n"
		"  --keep           keep the images in the work directory too\n"
		"  --verbose        show every command run\n"
		"  --list           list the workloads and exit\n"
		"\n"
		"ghostctl and the oracle-NAME workloads are looked up first beside this\n"
		"program, then on PATH.\n");
}

/*
 * Puts this program's directory first on PATH: ghostctl and the workloads
 * are built beside it (the build's bin/ on the host, /usr/local/bin in the
 * VM), and no other ghostctl should be picked up.
 */
static void path_add_self(void)
{
	char self[4096], *slash, *path;
	const char *old = getenv("PATH");
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	size_t len;

	if (n <= 0)
		return;
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash || slash == self)
		return;
	*slash = 0;
	len = strlen(self) + (old ? strlen(old) : 0) + 2;
	path = malloc(len);
	if (!path)
		abort();
	snprintf(path, len, "%s%s%s", self, old && *old ? ":" : "", old ? old : "");
	setenv("PATH", path, 1);
	free(path);
}

/*
 * "ghostctl --engine E check --json" must succeed and name engine E (unless
 * E is auto): otherwise every workload would fail for the same reason, or a
 * fallback to another engine would test the wrong one.
 */
static int check_engine(const char *engine)
{
	char log[600], want[80], *argv[8], *s;
	int rc, n = ghostctl_argv(argv, engine);

	argv[n++] = "check";
	argv[n++] = "--json";
	argv[n] = NULL;
	xsnprintf(log, sizeof(log), "%s/check-%s.log", work_root, engine);
	rc = run(argv, -1, log, 60, NULL);
	s = slurp(log);
	xsnprintf(want, sizeof(want), "\"engine\": \"%s\"", engine);
	if (rc || !s || (strcmp(engine, "auto") && !strstr(s, want))) {
		print_tail("ghostctl check", log, 10);
		printf("Bail out! ghostctl --engine %s check %s\n", engine,
		       rc ? "fails" : "does not name that engine");
		free(s);
		return -1;
	}
	printf("# engine %s: ghostctl --engine %s check passes\n", engine, engine);
	free(s);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "keep", no_argument, NULL, 'k' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "list", no_argument, NULL, 'l' },
		{ "engine", required_argument, NULL, 'e' },
		{ "cross", required_argument, NULL, 'c' },
		{ "no-criu", no_argument, NULL, 'n' },
		{ "work", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct workload *sel[NWORKLOADS];
	int opt, nsel = 0, rc = 0, engine_given = 0;
	double t0 = now();
	char log[600], *colon;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'o': out_dir = optarg; break;
		case 'k': keep = 1; break;
		case 'v': verbose = 1; break;
		case 'e': ck_engine = rs_engine = optarg, engine_given = 1; break;
		case 'c':
			colon = strchr(optarg, ':');
			if (!colon || colon == optarg || !colon[1] || strchr(colon + 1, ':')) {
				fprintf(stderr, "ghost-oracle: --cross takes EXP:IMP, e.g. kernel:user\n");
				return 2;
			}
			*colon = 0;
			ck_engine = optarg;
			rs_engine = colon + 1;
			cross = 1;
			break;
		case 'n': no_criu = 1; break;
		case 'w': work_root = optarg; break;
		case 'l':
			for (size_t i = 0; i < NWORKLOADS; i++)
				printf("%s\n", workloads[i].name);
			return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	for (size_t i = 0; i < NWORKLOADS; i++) {
		int want = optind == argc;

		for (int a = optind; a < argc; a++)
			if (!strcmp(argv[a], workloads[i].name))
				want = 1;
		if (want)
			sel[nsel++] = &workloads[i];
	}
	for (int a = optind; a < argc; a++) {
		size_t i;

		for (i = 0; i < NWORKLOADS && strcmp(argv[a], workloads[i].name); i++)
			;
		if (i == NWORKLOADS) {
			fprintf(stderr, "ghost-oracle: no workload '%s' (see --list)\n", argv[a]);
			return 2;
		}
	}

	if (cross && engine_given) {
		fprintf(stderr, "ghost-oracle: --cross names both engines: no --engine\n");
		return 2;
	}
	if (cross)
		no_criu = 1;
	if (no_criu && out_dir) {
		fprintf(stderr, "ghost-oracle: --out compares with CRIU: not with --no-criu or --cross\n");
		return 2;
	}
	if (work_root[0] != '/') {
		fprintf(stderr, "ghost-oracle: --work needs an absolute path\n");
		return 2;
	}

	setvbuf(stdout, NULL, _IOLBF, 0);
	path_add_self();
	if (out_dir) {
		mkdir_p(out_dir);
		out_dir = realpath(out_dir, NULL);
		if (!out_dir) {
			perror("ghost-oracle: --out");
			return 2;
		}
	}
	/* Workloads inherit the cwd: keep it on tmpfs, not on a 9p share. */
	xsnprintf(log, sizeof(log), "%s/img", work_root);
	mkdir_p(log);
	if (chdir(work_root)) {
		fprintf(stderr, "ghost-oracle: %s: %s\n", work_root, strerror(errno));
		return 2;
	}
	/* Restored processes are re-parented here, so their status is seen. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGPIPE, SIG_IGN);

	printf("TAP version 13\n1..%d\n", nsel);
	if (cross)
		printf("# ghost-oracle: ghostctl --engine %s checkpoint, ghostctl --engine %s restart\n",
		       ck_engine, rs_engine);
	else if (no_criu)
		printf("# ghost-oracle: ghostctl%s%s checkpoint/restart, no CRIU\n",
		       ck_engine ? " --engine " : "", ck_engine ? ck_engine : "");
	else
		printf("# ghost-oracle: ghostctl%s%s checkpoint/restart vs criu dump/restore\n",
		       ck_engine ? " --engine " : "", ck_engine ? ck_engine : "");
	if (ck_engine && check_engine(ck_engine))
		return 1;
	if (rs_engine && strcmp(rs_engine, ck_engine) && check_engine(rs_engine))
		return 1;
	if (!no_criu) {
		char *check[] = { "criu", "check", NULL };

		xsnprintf(log, sizeof(log), "%s/criu-check.log", work_root);
		if (run(check, -1, log, 120, NULL)) {
			print_tail("criu check", log, 10);
			printf("Bail out! criu check fails here: no oracle (--no-criu runs ghost alone)\n");
			return 1;
		}
	}
	for (int i = 0; i < nsel; i++)
		rc |= run_workload(i + 1, sel[i]);
	printf("# ghost-oracle: %d workloads in %.0f s\n", nsel, now() - t0);
	return rc;
}
