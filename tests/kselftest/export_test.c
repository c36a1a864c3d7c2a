// SPDX-License-Identifier: GPL-2.0
/*
 * GHOST_IOC_CREATE/PLUG/EXPORT: ghost objects, the three resource backends,
 * and the image a live process exports into them. Runs as root in the VM.
 */
#include <grp.h>
#include <sched.h>
#include <pthread.h>
#include <stdio.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "ghost_util.h"
#include "kselftest_harness.h"

#define PAGE 4096UL
#define MAX_SECS 4096

/* ---- workloads: each runs in a forked child, says "ready" on @fd ---------- */

/* Fills 1 MiB of anonymous memory with a pattern, then spins. */
static void work_pattern(int fd)
{
	size_t len = 1 << 20;
	__u64 *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	for (size_t i = 0; i < len / 8; i++)
		p[i] = pattern((unsigned long)&p[i]);
	ready(fd, &p, sizeof(p));
	for (;;)
		;
}

/* Maps 64 MiB and touches three pages only. */
static void work_sparse(int fd)
{
	char *p = mmap(NULL, 64 << 20, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	/* A transparent huge page exists whole: keep this about small pages. */
	madvise(p, 64 << 20, MADV_NOHUGEPAGE);
	p[0] = 1;
	p[10 * PAGE] = 2;
	p[(64 << 20) - 1] = 3;
	/* a read fault maps the zero page: not carried either */
	if (p[20 * PAGE])
		_exit(91);
	ready(fd, &p, sizeof(p));
	for (;;)
		pause();
}


/* Says ready, then spins with known values in r12-r15 and xmm0/xmm1. */
static void work_regs(int fd)
{
	ready(fd, "R", 1);
	spin_with_known_regs();
}

/* Loads a known ymm0, says ready with a raw write(2), which keeps it, and spins. */
static void work_regs_avx(int fd)
{
	static const char msg = 'R';

	asm volatile("vmovdqu (%[x]), %%ymm0\n\t"
		     "mov $1, %%eax\n\t"
		     "syscall\n\t"
		     "mov $3, %%eax\n\t"		/* close(fd): spawn() waits for it */
		     "syscall\n\t"
		     "1: jmp 1b\n\t"
		     :
		     : [x] "r"(&vec_pat[4]), "D"(fd), "S"(&msg), "d"(1)
		     : "rax", "rcx", "r11", "xmm0", "memory");
}

static int pipe_in[2];

/* Blocks in read(2) on a pipe; exits 0 if it later reads "go". */
static void work_pipe_reader(int fd)
{
	char buf[3] = { 0 };

	ready(fd, "R", 1);
	if (read(pipe_in[0], buf, 2) != 2 || strcmp(buf, "go"))
		_exit(92);
	_exit(0);
}

/* Sleeps 2 s in nanosleep; exits 0 if it was not cut short. */
static void work_sleeper(int fd)
{
	struct timespec req = { .tv_sec = 2 }, t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ready(fd, "R", 1);
	if (nanosleep(&req, NULL))
		_exit(93);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	_exit(t1.tv_sec - t0.tv_sec >= 2 ? 0 : 94);
}

static void *thread_fn(void *arg)
{
	for (;;)
		pause();
	return arg;
}

static void work_threads(int fd)
{
	pthread_t t;

	pthread_create(&t, NULL, thread_fn, NULL);
	ready(fd, "R", 1);
	for (;;)
		pause();
}

static void work_socket(int fd)
{
	if (socket(AF_INET, SOCK_DGRAM, 0) < 0)
		_exit(95);
	ready(fd, "R", 1);
	for (;;)
		pause();
}

static void work_shared_anon(int fd)
{
	if (mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		 -1, 0) == MAP_FAILED)
		_exit(96);
	ready(fd, "R", 1);
	for (;;)
		pause();
}

/* Exports @pid into a fresh memory ghost and checks the image's framing. */
struct exported {
	void *img;
	size_t len;
	struct image_sec secs[MAX_SECS];
	int n;
};

static int export_mem(pid_t pid, __u32 flags, struct exported *x,
		      struct ghost_export *e)
{
	int g = ghost_new_mem();

	if (g < 0)
		return -1;
	if (ghost_do_export(g, pid, flags, e)) {
		int err = errno;

		close(g);
		errno = err;
		return -1;
	}
	x->img = ghost_read_image(g, &x->len);
	close(g);
	x->n = image_walk(x->img, x->len, x->secs, MAX_SECS);
	return 0;
}

/* ---- objects and resources --------------------------------------------- */

TEST(plug_rules)
{
	int g = ghost_new(), s[2];
	struct ghost_plug p = { .size = sizeof(p), .type = 99 };

	ASSERT_LE(0, g);
	EXPECT_EQ(-1, ioctl(g, GHOST_IOC_PLUG, &p));
	EXPECT_EQ(EINVAL, errno);
	p.type = GHOST_RES_MEMORY;
	p.resv[0] = 1;
	EXPECT_EQ(-1, ioctl(g, GHOST_IOC_PLUG, &p));
	EXPECT_EQ(EINVAL, errno);

	/* A socket is not a FILE; an unconnected one is not a NETWORK. */
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, s));
	EXPECT_EQ(-1, ghost_plug(g, GHOST_RES_FILE, s[0]));
	EXPECT_EQ(EINVAL, errno);
	close(s[0]);
	close(s[1]);
	s[0] = socket(AF_UNIX, SOCK_STREAM, 0);
	EXPECT_EQ(-1, ghost_plug(g, GHOST_RES_NETWORK, s[0]));
	EXPECT_EQ(EINVAL, errno);
	close(s[0]);
	EXPECT_EQ(-1, ghost_plug(g, GHOST_RES_FILE, 12345));
	EXPECT_EQ(EBADF, errno);

	EXPECT_EQ(0, ghost_plug(g, GHOST_RES_MEMORY, -1));
	EXPECT_EQ(-1, ghost_plug(g, GHOST_RES_MEMORY, -1));
	EXPECT_EQ(EBUSY, errno);
	close(g);
}

TEST(export_without_resource_is_enxio)
{
	struct ghost_export e;
	char c;
	pid_t pid = spawn(work_idle, &c, 1);
	int g = ghost_new();

	ASSERT_LE(0, g);
	EXPECT_EQ(-1, ghost_do_export(g, pid, GHOST_EXPORT_RUN, &e));
	EXPECT_EQ(ENXIO, errno);
	EXPECT_NE(0, e.reason[0]);
	reap(pid);
	close(g);
}

TEST(export_flags_are_checked)
{
	struct ghost_export e;
	int g = ghost_new_mem();

	ASSERT_LE(0, g);
	EXPECT_EQ(-1, ghost_do_export(g, getppid(), 0, &e));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ghost_do_export(g, getppid(),
				      GHOST_EXPORT_RUN | GHOST_EXPORT_KILL, &e));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ghost_do_export(g, getppid(), 1u << 20, &e));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ghost_do_export(g, 999999, GHOST_EXPORT_RUN, &e));
	EXPECT_EQ(ESRCH, errno);
	EXPECT_EQ(-1, ghost_do_export(g, getpid(), GHOST_EXPORT_RUN, &e));
	EXPECT_EQ(EINVAL, errno);
	close(g);
}

/* ---- the image --------------------------------------------------------- */

TEST(memory_image_carries_the_pattern)
{
	static struct exported x;
	struct ghost_export e;
	__u64 *addr;
	pid_t pid = spawn(work_pattern, &addr, sizeof(addr));
	int v, pages = 0;

	ASSERT_LT(0, pid);
	ASSERT_EQ(0, export_mem(pid, GHOST_EXPORT_RUN, &x, &e)) TH_LOG("%s", e.reason);
	ASSERT_LT(0, x.n) TH_LOG("image_walk: %d", x.n);
	EXPECT_EQ(x.len, e.bytes);
	EXPECT_LT(0, e.frozen_ns);

	/* Section order: TASK CREDS ATTRS REGS XSTATE SIGNALS FS RLIMITS MM first. */
	ASSERT_LE(10, x.n);
	EXPECT_EQ(GHOST_SEC_TASK, x.secs[0].hdr->type);
	EXPECT_EQ(GHOST_SEC_CREDS, x.secs[1].hdr->type);
	EXPECT_EQ(GHOST_SEC_ATTRS, x.secs[2].hdr->type);
	for (int i = 1; i < 7; i++)
		EXPECT_EQ((__u32)GHOST_SEC_TASK + i, x.secs[i + 2].hdr->type);
	EXPECT_EQ(0, kill(pid, 0));	/* RUN: still alive */

	v = image_vma_at(x.secs, x.n, (unsigned long)addr);
	ASSERT_LE(0, v);
	EXPECT_EQ(PROT_READ | PROT_WRITE, ((struct ghost_vma *)x.secs[v].payload)->prot);
	for (unsigned long a = (unsigned long)addr; a < (unsigned long)addr + (1 << 20);
	     a += PAGE) {
		const __u64 *pg = image_page(x.secs, x.n, a);

		ASSERT_NE(NULL, pg) TH_LOG("page %#lx missing", a);
		for (unsigned int i = 0; i < PAGE / 8; i++)
			ASSERT_EQ(pattern(a + i * 8), pg[i]);
		/* page data is page-aligned in the stream */
		ASSERT_EQ(0, ((const char *)pg - (const char *)x.img) % PAGE);
		pages++;
	}
	EXPECT_EQ(256, pages);
	reap(pid);
	free(x.img);
}

/* Holds its stderr twice: one open file, two descriptors. */
static void work_dup(int fd)
{
	dup2(2, 200);
	work_idle(fd);
}

/* The size and crc32c of our own [vdso]: the kernel's, as the child's. */
static void own_vdso(__u32 *size, __u32 *crc)
{
	FILE *maps = fopen("/proc/self/maps", "r");
	unsigned long lo, hi;
	char line[256];

	*size = *crc = 0;
	while (maps && fgets(line, sizeof(line), maps))
		if (strstr(line, "[vdso]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
			*size = hi - lo;
			*crc = ~crc32c_update(~0u, (const void *)lo, hi - lo);
		}
	if (maps)
		fclose(maps);
}

/* Format version 2: record sizes, feature bits, file ids, the vDSO record. */
TEST(image_is_version_2)
{
	static const __u16 rec[] = {
		[GHOST_SEC_TASK] = sizeof(struct ghost_task),
		[GHOST_SEC_REGS] = sizeof(struct ghost_regs),
		[GHOST_SEC_XSTATE] = sizeof(struct ghost_xstate),
		[GHOST_SEC_SIGNALS] = sizeof(struct ghost_signals),
		[GHOST_SEC_FS] = sizeof(struct ghost_fs),
		[GHOST_SEC_RLIMITS] = sizeof(struct ghost_rlimits),
		[GHOST_SEC_MM] = sizeof(struct ghost_mm),
		[GHOST_SEC_VMA] = sizeof(struct ghost_vma),
		[GHOST_SEC_CREDS] = sizeof(struct ghost_creds),
		[GHOST_SEC_PAGES] = sizeof(struct ghost_pages),
		[GHOST_SEC_FILE] = sizeof(struct ghost_file),
		[GHOST_SEC_END] = sizeof(struct ghost_end),
		[GHOST_SEC_ATTRS] = sizeof(struct ghost_attrs),
	};
	static struct exported x;
	const struct ghost_image_header *h;
	const struct ghost_mm *mm;
	struct ghost_export e;
	__u64 last_id = 0;
	__u32 size, crc;
	int dups = 0;
	char c;
	pid_t pid = spawn(work_dup, &c, 1);

	ASSERT_LT(0, pid);
	ASSERT_EQ(0, export_mem(pid, GHOST_EXPORT_KILL, &x, &e)) TH_LOG("%s", e.reason);
	waitpid(pid, NULL, 0);
	ASSERT_LT(0, x.n) TH_LOG("image_walk: %d", x.n);
	h = x.img;
	EXPECT_EQ(2, h->version);
	EXPECT_EQ(GHOST_IMAGE_FEAT_FILE_ID | GHOST_IMAGE_FEAT_VDSO_ID |
		  GHOST_IMAGE_FEAT_VMA_ATTRS | GHOST_IMAGE_FEAT_CREDS |
		  GHOST_IMAGE_FEAT_ATTRS | GHOST_IMAGE_FEAT_XXH64, h->features);
	EXPECT_EQ(GHOST_IMAGE_FEAT_FILE_ID | GHOST_IMAGE_FEAT_VMA_ATTRS |
		  GHOST_IMAGE_FEAT_CREDS | GHOST_IMAGE_FEAT_ATTRS |
		  GHOST_IMAGE_FEAT_XXH64, h->required_features);
	for (int i = 0; i < x.n; i++) {
		const struct ghost_section *s = x.secs[i].hdr;

		ASSERT_GT(sizeof(rec) / sizeof(rec[0]), s->type);
		EXPECT_EQ(rec[s->type], s->record_size) TH_LOG("section %u", s->type);
		EXPECT_EQ(0, s->flags);
		if (s->type == GHOST_SEC_FILE) {
			const struct ghost_file *f = x.secs[i].payload;

			if (f->kind == GHOST_FILE_DUP) {
				EXPECT_EQ(0, f->pos);
				EXPECT_LE(f->file_id, last_id);
				EXPECT_NE(0, f->file_id);
				dups++;
			} else {
				EXPECT_EQ(last_id + 1, f->file_id);
				last_id = f->file_id;
			}
		}
	}
	EXPECT_LE(1, dups);
	mm = x.secs[image_find(x.secs, x.n, GHOST_SEC_MM, 0)].payload;
	own_vdso(&size, &crc);
	ASSERT_NE(0, size);
	EXPECT_EQ(size, mm->vdso_size);
	EXPECT_EQ(crc, mm->vdso_crc32c);
	free(x.img);
}

TEST(untouched_and_zero_pages_are_not_carried)
{
	static struct exported x;
	struct ghost_export e;
	char *addr;
	pid_t pid = spawn(work_sparse, &addr, sizeof(addr));
	const struct ghost_vma *v;
	int i;

	ASSERT_LT(0, pid);
	ASSERT_EQ(0, export_mem(pid, GHOST_EXPORT_RUN, &x, &e)) TH_LOG("%s", e.reason);
	ASSERT_LT(0, x.n);
	i = image_vma_at(x.secs, x.n, (unsigned long)addr);
	ASSERT_LE(0, i);
	v = x.secs[i].payload;
	EXPECT_EQ(3, v->nr_pages);
	EXPECT_EQ(2, ((const char *)image_page(x.secs, x.n, (unsigned long)addr + 10 * PAGE))[0]);
	EXPECT_EQ(NULL, image_page(x.secs, x.n, (unsigned long)addr + 20 * PAGE));
	EXPECT_GT(4 << 20, x.len);
	reap(pid);
	free(x.img);
}

TEST(registers_and_sse_are_captured_in_context)
{
	static struct exported x;
	struct ghost_export e;
	const struct ghost_regs *r;
	const struct ghost_xstate *xs;
	const __u8 *xsave;
	char c;
	pid_t pid = spawn(work_regs, &c, 1);
	int i;

	ASSERT_LT(0, pid);
	usleep(50000);		/* let it reach the spin loop */
	ASSERT_EQ(0, export_mem(pid, GHOST_EXPORT_KILL, &x, &e)) TH_LOG("%s", e.reason);
	ASSERT_LT(0, x.n);
	i = image_find(x.secs, x.n, GHOST_SEC_REGS, 0);
	ASSERT_LE(0, i);
	r = x.secs[i].payload;
	EXPECT_EQ(0x1111111111111111ULL, r->r12);
	EXPECT_EQ(0x2222222222222222ULL, r->r13);
	EXPECT_EQ(0x3333333333333333ULL, r->r14);
	EXPECT_EQ(0x4444444444444444ULL, r->r15);
	/* the loop is "jmp 1b": eb fe at ip (the child's text is ours) */
	EXPECT_EQ(0xfeeb, *(const __u16 *)r->ip);

	i = image_find(x.secs, x.n, GHOST_SEC_XSTATE, 0);
	ASSERT_LE(0, i);
	xs = x.secs[i].payload;
	ASSERT_LE(512 + 64, xs->size);
	xsave = (const __u8 *)(xs + 1);
	EXPECT_EQ(0, memcmp(xsave + 160, vec_pat, 32));	/* xmm0, xmm1 */
	waitpid(pid, NULL, 0);
	free(x.img);
}

TEST(avx_upper_halves_are_captured)
{
	static struct exported x;
	struct ghost_export e;
	const struct ghost_xstate *xs;
	const __u8 *xsave;
	char c;
	pid_t pid;
	int i;

	if (!__builtin_cpu_supports("avx"))
		SKIP(return, "no AVX on this CPU");
	pid = spawn(work_regs_avx, &c, 1);
	ASSERT_LT(0, pid);
	usleep(50000);
	ASSERT_EQ(0, export_mem(pid, GHOST_EXPORT_KILL, &x, &e)) TH_LOG("%s", e.reason);
	i = image_find(x.secs, x.n, GHOST_SEC_XSTATE, 0);
	ASSERT_LE(0, i);
	xs = x.secs[i].payload;
	xsave = (const __u8 *)(xs + 1);
	ASSERT_LE(576 + 16, xs->size);
	EXPECT_TRUE(*(const __u64 *)(xsave + 512) & 4);		/* XSTATE_BV has YMM */
	EXPECT_EQ(0, memcmp(xsave + 160, &vec_pat[4], 16));	/* low half */
	EXPECT_EQ(0, memcmp(xsave + 576, &vec_pat[6], 16));	/* high half */
	waitpid(pid, NULL, 0);
	free(x.img);
}

/* ---- what happens to the process --------------------------------------- */

TEST(kill_and_stop_fates)
{
	static struct exported x;
	struct ghost_export e;
	char c;
	int status;
	pid_t pid = spawn(work_idle, &c, 1);

	ASSERT_LT(0, pid);
	ASSERT_EQ(0, export_mem(pid, GHOST_EXPORT_STOP, &x, &e)) TH_LOG("%s", e.reason);
	ASSERT_EQ(pid, waitpid(pid, &status, WUNTRACED));
	EXPECT_TRUE(WIFSTOPPED(status));
	free(x.img);

	/* A stopped process is refused until continued. */
	EXPECT_EQ(-1, export_mem(pid, GHOST_EXPORT_RUN, &x, &e));
	EXPECT_EQ(EBUSY, errno);
	kill(pid, SIGCONT);

	ASSERT_EQ(0, export_mem(pid, GHOST_EXPORT_KILL, &x, &e)) TH_LOG("%s", e.reason);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));
	EXPECT_EQ(SIGKILL, WTERMSIG(status));
	free(x.img);
}

/* The live process does not notice an export: blocked calls restart. */
TEST(blocked_read_continues_after_export)
{
	static struct exported x;
	struct ghost_export e;
	const struct ghost_regs *r;
	char c;
	int status, i;
	pid_t pid;

	ASSERT_EQ(0, pipe(pipe_in));
	pid = spawn(work_pipe_reader, &c, 1);
	ASSERT_LT(0, pid);
	usleep(100000);		/* blocked in read by now */
	ASSERT_EQ(0, export_mem(pid, GHOST_EXPORT_RUN, &x, &e)) TH_LOG("%s", e.reason);
	i = image_find(x.secs, x.n, GHOST_SEC_REGS, 0);
	ASSERT_LE(0, i);
	r = x.secs[i].payload;
	/* the image re-issues read(2): ax = __NR_read, ip on "syscall" (0f 05) */
	EXPECT_EQ(SYS_read, r->ax);
	EXPECT_EQ(0x050f, *(const __u16 *)r->ip);

	ASSERT_EQ(2, write(pipe_in[1], "go", 2));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	close(pipe_in[0]);
	close(pipe_in[1]);
	free(x.img);
}

TEST(nanosleep_is_not_cut_short_by_export)
{
	static struct exported x;
	struct ghost_export e;
	char c;
	int status;
	pid_t pid = spawn(work_sleeper, &c, 1);

	ASSERT_LT(0, pid);
	usleep(200000);
	ASSERT_EQ(0, export_mem(pid, GHOST_EXPORT_RUN, &x, &e)) TH_LOG("%s", e.reason);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	free(x.img);
}

/* ---- backends ------------------------------------------------------------ */

static void check_stream(struct __test_metadata *_metadata, int kind)
{
	static struct exported x;
	struct ghost_export e;
	char c;
	pid_t pid = spawn(work_idle, &c, 1), reader;
	int g = ghost_new(), fds[2], n;

	ASSERT_LE(0, g);
	ASSERT_LT(0, pid);
	/* The harness's ASSERT is not a single statement: braces. */
	if (kind == GHOST_RES_NETWORK) {
		ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, fds));
	} else {
		ASSERT_EQ(0, pipe(fds));
	}
	ASSERT_EQ(0, ghost_plug(g, kind, fds[1]));
	close(fds[1]);

	/* A child drains the stream, so the export may write any amount. */
	reader = fork();
	if (reader == 0) {
		size_t len;
		void *img;

		close(g);	/* it holds the write end: EOF needs it closed */
		img = read_all(fds[0], &len);

		n = image_walk(img, len, x.secs, MAX_SECS);
		_exit(n > 0 ? 0 : -n);
	}
	close(fds[0]);
	ASSERT_EQ(0, ghost_do_export(g, pid, GHOST_EXPORT_RUN, &e)) TH_LOG("%s", e.reason);
	EXPECT_LT(0, e.bytes);
	close(g);		/* closes the write end: the reader sees EOF */
	ASSERT_EQ(reader, waitpid(reader, &n, 0));
	EXPECT_TRUE(WIFEXITED(n));
	EXPECT_EQ(0, WEXITSTATUS(n)) TH_LOG("image_walk in the reader failed");
	reap(pid);
}

TEST(pipe_backend)
{
	check_stream(_metadata, GHOST_RES_FILE);
}

TEST(socket_backend)
{
	check_stream(_metadata, GHOST_RES_NETWORK);
}

TEST(file_backend_matches_memory_layout)
{
	static struct exported x;
	struct ghost_export e;
	char path[] = "/tmp/ghost-export-XXXXXX", c;
	pid_t pid = spawn(work_idle, &c, 1);
	int fd = mkstemp(path), g = ghost_new();

	ASSERT_LE(0, fd);
	ASSERT_LE(0, g);
	unlink(path);
	ASSERT_EQ(0, ghost_plug(g, GHOST_RES_FILE, fd));
	ASSERT_EQ(0, ghost_do_export(g, pid, GHOST_EXPORT_RUN, &e)) TH_LOG("%s", e.reason);
	EXPECT_EQ(e.bytes, lseek(fd, 0, SEEK_END));
	lseek(fd, 0, SEEK_SET);
	x.img = read_all(fd, &x.len);
	EXPECT_LT(0, image_walk(x.img, x.len, x.secs, MAX_SECS));
	EXPECT_EQ(0, x.len % 8);
	free(x.img);
	close(g);
	close(fd);
	reap(pid);
}

/* Waits in epoll_wait(); exits 7 if that ever returns EINTR. */
static void work_epoll_wait(int fd)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev;
	char c = 'e';

	if (ep < 0 || write(fd, &c, 1) != 1)
		_exit(2);
	close(fd);
	for (;;)
		if (epoll_wait(ep, &ev, 1, -1) < 0 && errno == EINTR)
			_exit(7);
}

/*
 * A process the export refuses for what it holds (an epoll descriptor) is
 * refused before it is parked: parking interrupts its epoll_wait(), which
 * returns EINTR rather than restart.
 */
TEST(a_refused_process_is_not_disturbed)
{
	struct ghost_export e;
	char c;
	pid_t pid = spawn(work_epoll_wait, &c, 1);
	int g = ghost_new(), st;

	ASSERT_LT(0, pid);
	ASSERT_LE(0, g);
	ASSERT_EQ(0, ghost_plug(g, GHOST_RES_MEMORY, -1));
	usleep(100000);		/* in epoll_wait() by now */
	EXPECT_EQ(-1, ghost_do_export(g, pid, GHOST_EXPORT_RUN, &e));
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_NE(NULL, strstr(e.reason, "eventpoll")) TH_LOG("%s", e.reason);
	usleep(200000);
	EXPECT_EQ(0, waitpid(pid, &st, WNOHANG))
		TH_LOG("its epoll_wait() returned EINTR (status %#x)", st);
	close(g);
	reap(pid);
}

/* The kernel's taint flags (TAINT_WARN is 1 << 9), or -1. */
static long tainted(void)
{
	FILE *f = fopen("/proc/sys/kernel/tainted", "re");
	long t = -1;

	if (f) {
		if (fscanf(f, "%ld", &t) != 1)
			t = -1;
		fclose(f);
	}
	return t;
}

/*
 * A file plugged without the access the call needs, a read-only one for an
 * export, a write-only one for an import: EBADF, without the kernel
 * warning (kernel_write() and kernel_read() warn on such a file), and the
 * process runs on.
 */
TEST(a_file_without_the_access_needed_is_ebadf)
{
	char path[] = "/tmp/ghost-export-XXXXXX", c;
	pid_t pid = spawn(work_idle, &c, 1);
	int fd = mkstemp(path), ro, wo, g = ghost_new();
	long taint0 = tainted();
	struct ghost_export e;
	struct ghost_import im = { .size = sizeof(im) };

	ASSERT_LE(0, fd);
	ASSERT_LE(0, g);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	wo = open(path, O_WRONLY | O_CLOEXEC);
	unlink(path);
	ASSERT_LE(0, ro);
	ASSERT_LE(0, wo);
	ASSERT_EQ(0, ghost_plug(g, GHOST_RES_FILE, ro));
	EXPECT_EQ(-1, ghost_do_export(g, pid, GHOST_EXPORT_RUN, &e));
	EXPECT_EQ(EBADF, errno);
	EXPECT_EQ(0, kill(pid, 0));
	close(g);

	g = ghost_new();
	ASSERT_LE(0, g);
	ASSERT_EQ(0, ghost_plug(g, GHOST_RES_FILE, wo));
	im.flags = GHOST_IMPORT_PREPARE;
	EXPECT_EQ(-1, ioctl(g, GHOST_IOC_IMPORT, &im));
	EXPECT_EQ(EBADF, errno) TH_LOG("%s", im.reason);
	close(g);
	if (taint0 >= 0 && !(taint0 & (1L << 9)))
		EXPECT_EQ(0, tainted() & (1L << 9)) TH_LOG("the kernel warned");
	close(fd);
	close(ro);
	close(wo);
	reap(pid);
}

/* The module accounts the pages a memory image holds, and frees them. */
TEST(memory_image_pages_are_accounted)
{
	struct ghost_export e;
	char c;
	pid_t pid = spawn(work_idle, &c, 1);
	long before = ghost_pages_held();
	int g = ghost_new_mem();

	ASSERT_LE(0, before);
	ASSERT_EQ(0, ghost_do_export(g, pid, GHOST_EXPORT_RUN, &e)) TH_LOG("%s", e.reason);
	EXPECT_LE(before + (long)(e.bytes / PAGE), ghost_pages_held());
	close(g);
	EXPECT_EQ(before, ghost_pages_held());
	reap(pid);
}

TEST(memory_image_mmaps_read_only)
{
	static struct exported x;
	struct ghost_export e;
	char c;
	pid_t pid = spawn(work_idle, &c, 1);
	int g = ghost_new_mem();
	void *m;

	ASSERT_LE(0, g);
	ASSERT_EQ(0, ghost_do_export(g, pid, GHOST_EXPORT_RUN, &e)) TH_LOG("%s", e.reason);
	EXPECT_EQ(MAP_FAILED, mmap(NULL, e.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, g, 0));
	m = mmap(NULL, e.bytes, PROT_READ, MAP_SHARED, g, 0);
	ASSERT_NE(MAP_FAILED, m);
	EXPECT_LT(0, image_walk(m, e.bytes, x.secs, MAX_SECS));
	EXPECT_NE(0, mprotect(m, e.bytes, PROT_READ | PROT_WRITE));
	munmap(m, e.bytes);
	close(g);
	reap(pid);
}

/*
 * A memory image mapped by a reader stays the image it was when the ghost
 * is exported into again: the new image goes into pages of the ghost's
 * own, as it does where an import still copies from the earlier one's. The
 * reader never sees bytes of two images.
 */
TEST(a_mapped_image_stays_whole_when_the_ghost_is_exported_into_again)
{
	struct ghost_export e1, e2;
	char c, *copy, *again;
	pid_t p1 = spawn(work_idle, &c, 1), p2 = spawn(work_idle, &c, 1);
	int g = ghost_new_mem();
	size_t len;
	void *m;

	ASSERT_LT(0, p1);
	ASSERT_LT(0, p2);
	ASSERT_EQ(0, ghost_do_export(g, p1, GHOST_EXPORT_RUN, &e1)) TH_LOG("%s", e1.reason);
	m = mmap(NULL, e1.bytes, PROT_READ, MAP_SHARED, g, 0);
	ASSERT_NE(MAP_FAILED, m);
	copy = malloc(e1.bytes);
	ASSERT_NE(NULL, copy);
	memcpy(copy, m, e1.bytes);

	ASSERT_EQ(0, ghost_do_export(g, p2, GHOST_EXPORT_RUN, &e2)) TH_LOG("%s", e2.reason);
	again = ghost_read_image(g, &len);
	ASSERT_NE(NULL, again);
	ASSERT_EQ(e2.bytes, len);
	/* The second image is another process's: it differs from the first. */
	ASSERT_TRUE(len != e1.bytes || memcmp(again, copy, len));
	EXPECT_EQ(0, memcmp(m, copy, e1.bytes)) TH_LOG("the mapping shows the second image");

	munmap(m, e1.bytes);
	free(again);
	free(copy);
	close(g);
	reap(p1);
	reap(p2);
}

/* ---- refusals ---------------------------------------------------------- */

static void expect_refused(struct __test_metadata *_metadata, void (*fn)(int),
			   int err, const char *words)
{
	static struct exported x;
	struct ghost_export e;
	char c;
	pid_t pid = spawn(fn, &c, 1);

	ASSERT_LT(0, pid);
	EXPECT_EQ(-1, export_mem(pid, GHOST_EXPORT_KILL, &x, &e));
	EXPECT_EQ(err, errno);
	EXPECT_NE(NULL, strstr(e.reason, words)) TH_LOG("reason: %s", e.reason);
	EXPECT_EQ(0, kill(pid, 0)) TH_LOG("a refused export must leave the process alive");
	reap(pid);
}

#define FREEZER "/tmp/ghost-freezer"

/*
 * A process in a frozen cgroup v1 freezer sleeps in the refrigerator until
 * thawed: refused at once (EBUSY, naming the cgroup), as the user engine
 * refuses it, not waited for until the park gives up after 30 s. Thawed,
 * it runs on.
 */
TEST(a_process_in_a_frozen_cgroup_is_refused_at_once)
{
	struct ghost_export e;
	char c, pidtext[16], state[16] = "";
	pid_t pid;
	int g, err, f, i;

	mkdir(FREEZER, 0700);
	if (mount("none", FREEZER, "cgroup", 0, "freezer"))
		SKIP(return, "no cgroup v1 freezer here: %s", strerror(errno));
	ASSERT_EQ(0, mkdir(FREEZER "/f", 0700));
	pid = spawn(work_idle, &c, 1);
	ASSERT_LT(0, pid);
	snprintf(pidtext, sizeof(pidtext), "%d", pid);
	ASSERT_EQ(0, write_text(FREEZER "/f/tasks", pidtext));
	ASSERT_EQ(0, write_text(FREEZER "/f/freezer.state", "FROZEN"));
	for (i = 0; i < 100 && strncmp(state, "FROZEN", 6); i++) {
		usleep(20000);
		f = open(FREEZER "/f/freezer.state", O_RDONLY);
		memset(state, 0, sizeof(state));
		if (f >= 0 && read(f, state, sizeof(state) - 1) < 0)
			state[0] = 0;
		if (f >= 0)
			close(f);
	}
	EXPECT_EQ(0, strncmp(state, "FROZEN", 6)) TH_LOG("freezer.state %s", state);

	g = ghost_new_mem();
	err = ghost_do_export(g, pid, GHOST_EXPORT_KILL, &e) ? errno : 0;
	close(g);
	ASSERT_EQ(0, write_text(FREEZER "/f/freezer.state", "THAWED"));
	EXPECT_EQ(EBUSY, err) TH_LOG("%s", e.reason);
	EXPECT_NE(NULL, strstr(e.reason, "is frozen (cgroup freezer /f)")) TH_LOG("%s", e.reason);
	EXPECT_EQ(0, kill(pid, 0)) TH_LOG("the refused process is gone");
	reap(pid);
	rmdir(FREEZER "/f");
	umount(FREEZER);
	rmdir(FREEZER);
}

TEST(second_thread_is_eopnotsupp)
{
	expect_refused(_metadata, work_threads, EOPNOTSUPP, "threads");
}

TEST(socket_is_eopnotsupp)
{
	expect_refused(_metadata, work_socket, EOPNOTSUPP, "socket");
}

TEST(shared_anonymous_memory_is_eopnotsupp)
{
	expect_refused(_metadata, work_shared_anon, EOPNOTSUPP, "shared anonymous");
}

/*
 * Two processes made by clone() with CLONE_PARENT (siblings, so the target
 * has no child) sharing the target's memory or descriptor table: the other
 * would change them while the image is read, so the export is refused.
 */
static int sibling_fn(void *arg)
{
	int fd = *(int *)arg;

	if (fd >= 0)		/* its own copy of the ready pipe's end */
		close(fd);
	for (;;)
		pause();
	return 0;
}

static void work_sharing(int fd, int flags)
{
	static char stack[64 * 1024] __attribute__((aligned(16)));
	static int its_fd;
	pid_t sib;

	its_fd = (flags & CLONE_FILES) ? -1 : fd;
	sib = clone(sibling_fn, stack + sizeof(stack), flags | CLONE_PARENT, &its_fd);

	ready(fd, &sib, sizeof(sib));
	for (;;)
		pause();
}

static void work_shares_mm(int fd)
{
	work_sharing(fd, CLONE_VM);
}

static void work_shares_files(int fd)
{
	work_sharing(fd, CLONE_FILES);
}

static void expect_sharing_refused(struct __test_metadata *_metadata,
				   void (*fn)(int), const char *words)
{
	static struct exported x;
	struct ghost_export e;
	pid_t sib = -1, pid = spawn(fn, &sib, sizeof(sib));

	ASSERT_LT(0, pid);
	ASSERT_LT(0, sib);
	EXPECT_EQ(-1, export_mem(pid, GHOST_EXPORT_KILL, &x, &e));
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_NE(NULL, strstr(e.reason, words)) TH_LOG("reason: %s", e.reason);
	EXPECT_EQ(0, kill(pid, 0)) TH_LOG("a refused export must leave the process alive");
	reap(pid);
	reap(sib);
}

TEST(memory_shared_with_another_process_is_eopnotsupp)
{
	expect_sharing_refused(_metadata, work_shares_mm, "shares its memory");
}

TEST(descriptors_shared_with_another_process_are_eopnotsupp)
{
	expect_sharing_refused(_metadata, work_shares_files, "shares its descriptor table");
}

/*
 * A target killed and reaped while its export waits to write its first
 * bytes (into a pipe filled beforehand): once there is room the export
 * fails, "exited during the export" (ESRCH), rather than read the signal
 * handlers of a reaped task (a NULL pointer) or finish an image without
 * its descriptors.
 */
TEST(a_target_reaped_during_its_export_fails_the_export)
{
	char c, junk[4096] = { 0 };
	int p[2], g, status = -1;
	pid_t pid = spawn(work_idle, &c, 1), exporter;

	ASSERT_LT(0, pid);
	ASSERT_EQ(0, pipe(p));
	ASSERT_EQ(0, fcntl(p[1], F_SETFL, O_NONBLOCK));
	while (write(p[1], junk, sizeof(junk)) > 0)
		;
	ASSERT_EQ(0, fcntl(p[1], F_SETFL, 0));
	g = ghost_new();
	ASSERT_LE(0, g);
	ASSERT_EQ(0, ghost_plug(g, GHOST_RES_FILE, p[1]));
	close(p[1]);
	exporter = fork();
	ASSERT_LE(0, exporter);
	if (exporter == 0) {
		struct ghost_export e;

		close(p[0]);
		if (ghost_do_export(g, pid, GHOST_EXPORT_RUN, &e) == 0)
			_exit(1);
		fprintf(stderr, "export: %s (%s)\n", strerror(errno), e.reason);
		_exit(errno == ESRCH && strstr(e.reason, "exited during") ? 0 : 2);
	}
	close(g);
	usleep(500000);		/* parked; the export waits for room */
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, NULL, 0));
	while (read(p[0], junk, sizeof(junk)) > 0)	/* EOF: the exporter is done */
		;
	close(p[0]);
	ASSERT_EQ(exporter, waitpid(exporter, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("status %#x: 1 = the export succeeded, 2 = another error", status);
}

TEST(unprivileged_caller_cannot_export_root_process)
{
	char c;
	pid_t pid = spawn(work_idle, &c, 1), child;
	int g = ghost_new_mem(), status;	/* after the spawn: not inherited */

	ASSERT_LE(0, g);
	child = fork();
	if (child == 0) {
		struct ghost_export e;

		/* keeps the ghost fd, drops root */
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(2);
		if (ghost_do_export(g, pid, GHOST_EXPORT_KILL, &e) == 0)
			_exit(3);
		/* refused at the open of /proc/PID/mem: the kernel's own rule */
		_exit(errno == EPERM || errno == EACCES ? 0 : 4);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(0, kill(pid, 0));
	reap(pid);
	close(g);
}

TEST_HARNESS_MAIN
