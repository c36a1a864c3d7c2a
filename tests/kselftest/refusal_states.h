/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The states ghost v1 refuses to export, one per row of refusal_test.c: each
 * set_* function runs in a fresh child and gives it that one state. They
 * return 0, or -1 when this machine cannot make the state (the row is
 * skipped). *addr and *fd name what the reason will mention; *dev is a
 * character device's "major:minor"; *other another process's pid.
 */
#ifndef GHOST_REFUSAL_STATES_H
#define GHOST_REFUSAL_STATES_H

#include <fcntl.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/aio_abi.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

struct state {
	unsigned long addr;
	int fd;
	char dev[16];
	int other;
};

static int set_nothing(struct state *s)
{
	(void)s;
	return 0;
}

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static int set_thread(struct state *s)
{
	pthread_t t;

	(void)s;
	return pthread_create(&t, NULL, sleeper, NULL) ? -1 : 0;
}

/* The tracer is a sibling (refusal_test.c): Yama must let it in. */
static int set_traceable(struct state *s)
{
	(void)s;
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	return 0;
}

static int set_itimer(struct state *s)
{
	struct itimerval it = { .it_value = { .tv_sec = 3600 } };

	(void)s;
	return setitimer(ITIMER_REAL, &it, NULL);
}

static int set_posix_timer(struct state *s)
{
	struct sigevent ev = { .sigev_notify = SIGEV_NONE };
	timer_t t;

	(void)s;
	return timer_create(CLOCK_MONOTONIC, &ev, &t);
}

static int set_rt_signal(struct state *s)
{
	union sigval v = { .sival_int = 7 };
	sigset_t rt;

	(void)s;
	sigemptyset(&rt);
	sigaddset(&rt, SIGRTMIN);
	sigprocmask(SIG_BLOCK, &rt, NULL);
	return sigqueue(getpid(), SIGRTMIN, v);
}

/* An undo list stays with the process after its set is gone. */
static int set_sysv_sem(struct state *s)
{
	struct sembuf op = { .sem_num = 0, .sem_op = 1, .sem_flg = SEM_UNDO };
	int id = semget(IPC_PRIVATE, 1, 0600);
	int err;

	(void)s;
	if (id < 0)
		return -1;
	err = semop(id, &op, 1);
	semctl(id, 0, IPC_RMID);
	return err;
}

static int set_io_uring(struct state *s)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	s->fd = syscall(__NR_io_uring_setup, 4, &p);
	return s->fd < 0 ? -1 : 0;
}

static int map(struct state *s, int flags, int fd)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, flags, fd, 0);

	if (p == MAP_FAILED)
		return -1;
	*(volatile char *)p = 1;
	s->addr = (unsigned long)p;
	return 0;
}

static int set_shared_anon(struct state *s)
{
	return map(s, MAP_SHARED | MAP_ANONYMOUS, -1);
}

static int set_sysv_shm(struct state *s)
{
	int id = shmget(IPC_PRIVATE, 4096, 0600);
	void *p;

	if (id < 0)
		return -1;
	p = shmat(id, NULL, 0);
	shmctl(id, IPC_RMID, NULL);	/* gone once detached */
	if (p == (void *)-1)
		return -1;
	s->addr = (unsigned long)p;
	return 0;
}

static int memfd(void)
{
	int fd = memfd_create("ghost-refusal", MFD_CLOEXEC);

	if (fd >= 0 && ftruncate(fd, 4096)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int set_memfd_map(struct state *s)
{
	int fd = memfd(), err;

	if (fd < 0)
		return -1;
	err = map(s, MAP_SHARED, fd);
	close(fd);
	return err;
}

static int set_memfd_fd(struct state *s)
{
	s->fd = memfd();
	return s->fd < 0 ? -1 : 0;
}

/* A 4 KiB file in /tmp, already unlinked. */
static int deleted_file(void)
{
	char path[] = "/tmp/ghost-refusal-XXXXXX";
	char page[4096] = { 1 };
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	unlink(path);
	if (write(fd, page, sizeof(page)) != sizeof(page)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int map_deleted(struct state *s, int flags)
{
	int fd = deleted_file(), err;

	if (fd < 0)
		return -1;
	err = map(s, flags, fd);
	close(fd);
	return err;
}

static int set_deleted_private(struct state *s)
{
	return map_deleted(s, MAP_PRIVATE);
}

static int set_deleted_shared(struct state *s)
{
	return map_deleted(s, MAP_SHARED);
}

static int set_deleted_fd(struct state *s)
{
	s->fd = deleted_file();
	return s->fd < 0 ? -1 : 0;
}

static int set_hugetlb(struct state *s)
{
	return map(s, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1);
}

static int set_socket(struct state *s)
{
	s->fd = socket(AF_UNIX, SOCK_STREAM, 0);
	return s->fd < 0 ? -1 : 0;
}

static int set_eventfd(struct state *s)
{
	s->fd = eventfd(0, 0);
	return s->fd < 0 ? -1 : 0;
}

static int set_epoll(struct state *s)
{
	s->fd = epoll_create1(0);
	return s->fd < 0 ? -1 : 0;
}

static int set_signalfd(struct state *s)
{
	sigset_t m;

	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	s->fd = signalfd(-1, &m, 0);
	return s->fd < 0 ? -1 : 0;
}

static int set_timerfd(struct state *s)
{
	s->fd = timerfd_create(CLOCK_MONOTONIC, 0);
	return s->fd < 0 ? -1 : 0;
}

static int set_inotify(struct state *s)
{
	s->fd = inotify_init1(0);
	return s->fd < 0 ? -1 : 0;
}

static int set_pidfd(struct state *s)
{
	s->fd = syscall(SYS_pidfd_open, getpid(), 0);
	return s->fd < 0 ? -1 : 0;
}

static int set_pty(struct state *s)
{
	s->fd = posix_openpt(O_RDWR | O_NOCTTY);
	return s->fd < 0 ? -1 : 0;
}

/* A character device neither a terminal nor /dev/null-like. */
static int set_chardev(struct state *s)
{
	static const char *const devs[] = { "/dev/fuse", "/dev/net/tun",
					     "/dev/cpu_dma_latency", "/dev/rfkill" };
	struct stat st;
	unsigned int i;

	for (i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		s->fd = open(devs[i], O_RDONLY);
		if (s->fd >= 0 && !fstat(s->fd, &st) && S_ISCHR(st.st_mode)) {
			snprintf(s->dev, sizeof(s->dev), "%u:%u",
				 major(st.st_rdev), minor(st.st_rdev));
			return 0;
		}
		if (s->fd >= 0)
			close(s->fd);
	}
	return -1;
}

static int set_deleted_cwd(struct state *s)
{
	char dir[] = "/tmp/ghost-refusal-XXXXXX";

	(void)s;
	if (!mkdtemp(dir) || chdir(dir))
		return -1;
	return rmdir(dir);
}

/* A child that sleeps until its parent dies. */
static pid_t sleeping_child(void)
{
	pid_t parent = getpid(), pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)	/* died before the prctl */
			_exit(0);
		for (;;)
			pause();
	}
	return pid;
}

static int set_child(struct state *s)
{
	(void)s;
	return sleeping_child() < 0 ? -1 : 0;
}

/* A child that exited and was not reaped: wait() would still find it. */
static int set_zombie_child(struct state *s)
{
	siginfo_t si;
	pid_t pid = fork();

	(void)s;
	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return -1;
	return waitid(P_PID, pid, &si, WEXITED | WNOWAIT);
}

/* Needs CAP_MKNOD: the row is skipped without it. */
static int set_deleted_devnode(struct state *s)
{
	char path[] = "/tmp/ghost-refusal-dev-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	close(fd);
	unlink(path);
	if (mknod(path, S_IFCHR | 0600, makedev(1, 3)))	/* /dev/null's */
		return -1;
	s->fd = open(path, O_RDWR);
	unlink(path);
	return s->fd < 0 ? -1 : 0;
}

static int set_deleted_fifo(struct state *s)
{
	char path[] = "/tmp/ghost-refusal-fifo-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	close(fd);
	unlink(path);
	if (mkfifo(path, 0600))
		return -1;
	s->fd = open(path, O_RDWR);
	unlink(path);
	return s->fd < 0 ? -1 : 0;
}

/* /proc/PID/status of a child since reaped. */
static int set_dead_proc_file(struct state *s)
{
	char path[64];
	pid_t pid = sleeping_child();

	if (pid < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	s->fd = open(path, O_RDONLY);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	s->other = pid;
	return s->fd < 0 ? -1 : 0;
}

/* A file of its own /proc directory, held open (as /proc/self/status). */
static int set_own_proc_file(struct state *s)
{
	s->fd = open("/proc/self/status", O_RDONLY);
	return s->fd < 0 ? -1 : 0;
}

static int set_opath_symlink(struct state *s)
{
	char path[] = "/tmp/ghost-refusal-link-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	close(fd);
	unlink(path);
	if (symlink("/", path))
		return -1;
	s->fd = open(path, O_PATH | O_NOFOLLOW);
	unlink(path);
	return s->fd < 0 ? -1 : 0;
}

static int set_aio_ring(struct state *s)
{
	aio_context_t ctx = 0;

	if (syscall(__NR_io_setup, 1, &ctx))
		return -1;
	s->addr = ctx;		/* the ring's address */
	return 0;
}

/*
 * A guard page (Linux 6.13+; skipped where madvise() does not know it, as
 * on 6.1) in the middle of a private mapping whose other pages exist.
 */
static int set_guard_pages(struct state *s)
{
	char *p = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -1;
	memset(p, 1, 3 * 4096);
	if (madvise(p + 4096, 4096, 102 /* MADV_GUARD_INSTALL */))
		return -1;
	s->addr = (unsigned long)p + 4096;
	return 0;
}

/*
 * A read lease on this program's own file (no leftover file; a read lease
 * needs no writer, which an executable never has).
 */
static int set_lease(struct state *s)
{
	s->fd = open("/proc/self/exe", O_RDONLY);
	if (s->fd < 0)
		return -1;
	return fcntl(s->fd, F_SETLEASE, F_RDLCK) ? -1 : 0;
}

/* A lock on a pipe, which the importer would supply (inherited). */
static int set_pipe_flock(struct state *s)
{
	int p[2];

	if (pipe(p))
		return -1;
	s->fd = p[0];
	return flock(p[0], LOCK_EX) ? -1 : 0;
}

/* An allow-everything filter: the filter itself is the state. */
static int set_seccomp_filter(struct state *s)
{
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { .len = 1, .filter = &allow };

	(void)s;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) ? -1 : 0;
}

/* Entered by refusal_test.c's child after it reported (row.strict). */
static int set_seccomp_strict(struct state *s)
{
	(void)s;
	return 0;
}

/* A new time namespace, with a user namespace when unprivileged. */
static int new_time_ns(void)
{
	if (!unshare(0x80 /* CLONE_NEWTIME */))
		return 0;
	return unshare(0x80 | 0x10000000 /* CLONE_NEWUSER */);
}

static int set_time_ns_children(struct state *s)
{
	(void)s;
	return new_time_ns();
}

/* A new time namespace, entered (setns: 6.1 does not enter it on exec). */
static int set_in_time_ns(struct state *s)
{
	int fd, err;

	(void)s;
	if (new_time_ns())
		return -1;
	fd = open("/proc/self/ns/time_for_children", O_RDONLY);
	if (fd < 0)
		return -1;
	err = setns(fd, 0x80 /* CLONE_NEWTIME */);
	close(fd);
	return err ? -1 : 0;
}

/* A new user namespace, entered: every capability in it. */
static int set_in_user_ns(struct state *s)
{
	(void)s;
	return unshare(0x10000000 /* CLONE_NEWUSER */);
}

/* A root directory of its own: /tmp (needs CAP_SYS_CHROOT). */
static int set_chroot(struct state *s)
{
	(void)s;
	return chroot("/tmp");
}

static int sharer(void *arg)
{
	(void)arg;
	prctl(PR_SET_PDEATHSIG, SIGKILL);	/* ends with the test */
	for (;;)
		pause();
	return 0;
}

/*
 * Another process sharing the child's memory or descriptor table: a
 * sibling (CLONE_PARENT), as a child would be refused for being one.
 */
static int set_sharing(struct state *s, int flags)
{
	static char stack[64 * 1024] __attribute__((aligned(16)));

	s->other = clone(sharer, stack + sizeof(stack), flags | CLONE_PARENT | SIGCHLD, NULL);
	return s->other > 0 ? 0 : -1;
}

static int set_shared_mm(struct state *s)
{
	return set_sharing(s, CLONE_VM);
}

static int set_shared_files(struct state *s)
{
	return set_sharing(s, CLONE_FILES);
}

#endif /* GHOST_REFUSAL_STATES_H */
