/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the ghost kselftests: ghost objects, and an independent walker
 * over ghost images (framing, padding, checksum) so tests check the module's
 * output without trusting the module's own reader.
 */
#ifndef GHOST_TEST_UTIL_H
#define GHOST_TEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/ghost.h>

/* XXH64 compiled in: the tests check the module without trusting libghost. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ghost/c/export_target.h"

#define GHOST_DEV "/dev/" GHOST_DEVICE_NAME

static inline int ghost_new(void)
{
	struct ghost_create c = { .size = sizeof(c), .flags = GHOST_CREATE_CLOEXEC };
	int dev = open(GHOST_DEV, O_RDWR | O_CLOEXEC);
	int fd;

	if (dev < 0)
		return -1;
	fd = ioctl(dev, GHOST_IOC_CREATE, &c);
	close(dev);
	return fd;
}

static inline int ghost_plug(int g, __u32 type, int fd)
{
	struct ghost_plug p = { .size = sizeof(p), .type = type, .fd = fd };

	return ioctl(g, GHOST_IOC_PLUG, &p);
}

/* A ghost with a memory resource, or -1. */
static inline int ghost_new_mem(void)
{
	int g = ghost_new();

	if (g >= 0 && ghost_plug(g, GHOST_RES_MEMORY, -1)) {
		close(g);
		return -1;
	}
	return g;
}

/*
 * Exports @pid: its pidfd and /proc/PID/mem are opened (and closed) here,
 * and with @snap (a GHOST_EXPORT_SNAPSHOT call) those of its fork too.
 */
static inline int ghost_do_export_snap(int g, pid_t pid, pid_t snap,
				       __u32 flags, struct ghost_export *e)
{
	struct ghost_export s = { .pidfd = -1, .mem_fd = -1 };
	const char *step;
	int ret, err;

	memset(e, 0, sizeof(*e));
	e->size = sizeof(*e);
	e->flags = flags;
	if (ghost_export_target_open(e, pid, &step))
		return -1;
	if (snap && ghost_export_target_open(&s, snap, &step)) {
		ghost_export_target_close(e);
		return -1;
	}
	e->snap_pidfd = s.pidfd;
	e->snap_mem_fd = s.mem_fd;
	ret = ioctl(g, GHOST_IOC_EXPORT, e);
	err = errno;
	ghost_export_target_close(e);
	ghost_export_target_close(&s);
	errno = err;
	return ret;
}

static inline int ghost_do_export(int g, pid_t pid, __u32 flags,
				  struct ghost_export *e)
{
	return ghost_do_export_snap(g, pid, 0, flags, e);
}

/* GHOST_IMPORT_PREPARE: stage the image of @g for this process. */
static inline int ghost_prepare_import(int g, struct ghost_import *im)
{
	memset(im, 0, sizeof(*im));
	im->size = sizeof(*im);
	im->flags = GHOST_IMPORT_PREPARE;
	return ioctl(g, GHOST_IOC_IMPORT, im);
}

/* Reads everything from @fd until EOF into a malloc'd buffer. */
static inline void *read_all(int fd, size_t *len)
{
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap);
	ssize_t r;

	while (buf && (r = read(fd, buf + n, cap - n)) > 0) {
		n += r;
		if (n == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
	}
	*len = n;
	return buf;
}

/* Reads the whole image out of a memory ghost; *len gets its size. */
static inline void *ghost_read_image(int g, size_t *len)
{
	*len = 0;
	if (lseek(g, 0, SEEK_SET) != 0)
		return NULL;
	return read_all(g, len);
}

/* Writes @text to the file at @path (a sysctl, a cgroup file); 0 or -1. */
static inline int write_text(const char *path, const char *text)
{
	int f = open(path, O_WRONLY);
	ssize_t n = f < 0 ? -1 : write(f, text, strlen(text));

	if (f >= 0)
		close(f);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Pages held by ghost images, as ghost.ko counts them (-1 if unreadable). */
static inline long ghost_pages_held(void)
{
	char buf[32] = "";
	int fd = open("/sys/module/ghost/parameters/pages_held", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	return n > 0 ? strtol(buf, NULL, 10) : -1;
}

/* Distinct 64-bit patterns for vector registers (xmm/ymm tests). */
static const __u64 vec_pat[8] __attribute__((aligned(32))) = {
	0x0123456789abcdefULL, 0xfedcba9876543210ULL,
	0x1122334455667788ULL, 0x99aabbccddeeff00ULL,
	0x0f1e2d3c4b5a6978ULL, 0x8796a5b4c3d2e1f0ULL,
	0x1357913579135791ULL, 0x2468024680246802ULL,
};

/*
 * Loads known values into r12-r15 and xmm0/xmm1 (vec_pat[0..3]), then spins
 * on "1: jmp 1b" (eb fe) for a test to find them in an image.
 */
static inline void spin_with_known_regs(void)
{
	asm volatile("movdqu (%[x]), %%xmm0\n\t"
		     "movdqu 16(%[x]), %%xmm1\n\t"
		     "mov $0x1111111111111111, %%r12\n\t"
		     "mov $0x2222222222222222, %%r13\n\t"
		     "mov $0x3333333333333333, %%r14\n\t"
		     "mov $0x4444444444444444, %%r15\n\t"
		     "1: jmp 1b\n\t"
		     :
		     : [x] "r"(vec_pat)
		     : "r12", "r13", "r14", "r15", "xmm0", "xmm1", "memory");
}

static inline uint32_t crc32c_update(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n--) {
		crc ^= *b++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78u & -(crc & 1));
	}
	return crc;
}

/* Whether the image of header @img checksums with XXH64 (else crc32c). */
static inline int image_xxh64(const void *img)
{
	return !!(((const struct ghost_image_header *)img)->features &
		  GHOST_IMAGE_FEAT_XXH64);
}

/* Bytes of the END record the image's checksum kind has. */
static inline size_t image_end_size(const void *img)
{
	return image_xxh64(img) ? sizeof(struct ghost_end) : GHOST_END_SIZE_VER1;
}

/* Makes @e the checksum of the first @off bytes of @img, of the image's kind. */
static inline void image_set_sum(const void *img, size_t off, struct ghost_end *e)
{
	if (image_xxh64(img))
		e->xxh64 = XXH64(img, off, 0);
	else
		e->crc32c = ~crc32c_update(~0u, img, off);
}

/* Whether @e is the checksum of the first @off bytes of @img. */
static inline int image_sum_ok(const void *img, size_t off, const struct ghost_end *e)
{
	if (image_xxh64(img))
		return e->crc32c == 0 && e->xxh64 == XXH64(img, off, 0);
	return e->crc32c == ~crc32c_update(~0u, img, off);
}

struct image_sec {
	const struct ghost_section *hdr;
	const void *payload;
	size_t off;		/* stream offset of the section header */
};

/*
 * Checks the framing of a whole image: header, sections in bounds with zero
 * padding, END last with the right offset and checksum. Returns the number of
 * sections (END included) and fills @secs (up to @max), or a negative value
 * naming what is wrong.
 */
enum { IMG_BAD_HEADER = -1, IMG_BAD_BOUNDS = -2, IMG_BAD_PAD = -3,
       IMG_NO_END = -4, IMG_BAD_CRC = -5 };

static inline int image_walk(const void *img, size_t len,
			     struct image_sec *secs, int max)
{
	const struct ghost_image_header *h = img;
	size_t off = sizeof(*h);
	int n = 0;

	if (len < sizeof(*h) || h->magic != GHOST_IMAGE_MAGIC ||
	    h->version != GHOST_IMAGE_VERSION ||
	    h->header_size != sizeof(*h) || h->arch != GHOST_ARCH_X86_64 ||
	    h->page_size != (uint32_t)getpagesize())
		return IMG_BAD_HEADER;
	while (off + sizeof(struct ghost_section) <= len) {
		const struct ghost_section *s = (const void *)((const char *)img + off);
		size_t pay = off + sizeof(*s), padded = (s->size + 7) & ~7ULL;

		if (s->size > len || pay + padded > len)
			return IMG_BAD_BOUNDS;
		for (size_t i = s->size; i < padded; i++)
			if (((const char *)img)[pay + i])
				return IMG_BAD_PAD;
		if (n < max)
			secs[n] = (struct image_sec){ s, (const char *)img + pay, off };
		n++;
		if (s->type == GHOST_SEC_END) {
			const struct ghost_end *e = (const void *)((const char *)img + pay);

			if (s->size != image_end_size(img) || e->bytes != off ||
			    pay + padded != len)
				return IMG_BAD_BOUNDS;
			if (!image_sum_ok(img, off, e))
				return IMG_BAD_CRC;
			return n;
		}
		off = pay + padded;
	}
	return IMG_NO_END;
}

/* The first section of @type at or after index @from, or -1. */
static inline int image_find(const struct image_sec *secs, int n, __u32 type,
			     int from)
{
	for (int i = from; i < n; i++)
		if (secs[i].hdr->type == type)
			return i;
	return -1;
}

/* Index of the VMA section covering @addr, or -1. */
static inline int image_vma_at(const struct image_sec *secs, int n,
			       unsigned long addr)
{
	for (int i = 0; i < n; i++) {
		const struct ghost_vma *v = secs[i].payload;

		if (secs[i].hdr->type == GHOST_SEC_VMA && v->start <= addr &&
		    addr < v->end)
			return i;
	}
	return -1;
}

/* Pointer to the image's copy of the page at @addr, or NULL if not carried. */
static inline const void *image_page(const struct image_sec *secs, int n,
				     unsigned long addr)
{
	for (int i = 0; i < n; i++) {
		const struct ghost_pages *p = secs[i].payload;
		unsigned long ps = getpagesize();

		if (secs[i].hdr->type == GHOST_SEC_PAGES && p->addr <= addr &&
		    addr < p->addr + p->nr_pages * ps)
			return (const char *)p + p->data_offset + (addr - p->addr);
	}
	return NULL;
}

/* ---- workloads: each runs in a forked child and says "ready" on @fd -------- */

static inline void ready(int fd, const void *msg, size_t len)
{
	if (write(fd, msg, len) != (ssize_t)len)
		_exit(90);
	close(fd);
}

static inline __u64 pattern(unsigned long addr)
{
	return (addr * 0x9E3779B97F4A7C15ULL) ^ 0x5A5A5A5A5A5A5A5AULL;
}

/*
 * The harness shares a results page (MAP_SHARED|MAP_ANONYMOUS) with each test;
 * a workload must not hold one, or export is rightly refused.
 */
static inline void drop_shared_anon(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long start, end;
	char perms[8], line[512];

	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3 &&
		    perms[3] == 's' && strstr(line, "/dev/zero (deleted)"))
			munmap((void *)start, end - start);
	}
	if (f)
		fclose(f);
}

/*
 * Forks a child running @fn; returns its pid and what it said when ready.
 * @fn must close the descriptor it is given (ready() does).
 */
static inline pid_t spawn(void (*fn)(int), void *msg, size_t len)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		/* dies with the test, even after an assertion cut it short */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		drop_shared_anon();
		fn(p[1]);
		_exit(0);
	}
	close(p[1]);
	/*
	 * The message, then EOF: the child has closed its end too, so an image
	 * taken from now on does not hold that pipe.
	 */
	if (read(p[0], msg, len) != (ssize_t)len || read(p[0], &len, 1) != 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	close(p[0]);
	return pid;
}

static inline void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Says ready, then waits in pause() forever. */
static inline void work_idle(int fd)
{
	ready(fd, "R", 1);
	for (;;)
		pause();
}

/* Idle, holding only its standard descriptors (no ghost, no socket). */
static inline void work_idle_bare(int fd)
{
	for (int i = 3; i < 1024; i++)
		if (i != fd)
			close(i);
	work_idle(fd);
}

#endif /* GHOST_TEST_UTIL_H */
