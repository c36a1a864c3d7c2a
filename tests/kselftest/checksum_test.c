// SPDX-License-Identifier: GPL-2.0
/*
 * The END checksum as ghost.ko writes and checks it: XXH64 images (what it
 * writes) and crc32c images (what it wrote before GHOST_IMAGE_FEAT_XXH64,
 * made here from an XXH64 one) restore a process that continues with the
 * same memory; a flipped page byte in either is refused, naming the
 * checksum, before the process runs; an XXH64 image whose END record is too
 * short for the hash is refused.
 *
 * GHOST_IMPORT_DIRECT moves the page data, and with it the checksum, past
 * the point of no return: from an image file the process is restored the
 * same, a flipped page byte kills the importer before the image runs one
 * instruction (it never stops with GHOST_IMPORT_STOPPED), an image cut
 * short in its page data is still refused with the importer alive, and
 * where the flag does not apply (a memory ghost, a crc32c image) the image
 * is staged and checked as without it.
 */
#include "ghost/c/restore_self.h"
#include "ghost_util.h"
#include "kselftest_harness.h"

#define NPAGES 64
#define PAGE 4096

static volatile sig_atomic_t check_now;

static void on_usr1(int sig)
{
	(void)sig;
	check_now = 1;
}

/*
 * Fills NPAGES pages with pattern(), says where, and on SIGUSR1 exits 0 if
 * they still hold it (1 if not).
 */
static void work_pattern(int fd)
{
	__u64 *a = mmap(NULL, NPAGES * PAGE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (a == MAP_FAILED)
		_exit(91);
	for (size_t i = 0; i < NPAGES * PAGE / 8; i++)
		a[i] = pattern((unsigned long)&a[i]);
	signal(SIGUSR1, on_usr1);
	ready(fd, &a, sizeof(a));
	/*
	 * Not pause(): restored inside it, the process may take the signal
	 * before the restarted call, which would then wait forever.
	 */
	while (!check_now)
		usleep(10000);
	for (size_t i = 0; i < NPAGES * PAGE / 8; i++)
		if (a[i] != pattern((unsigned long)&a[i]))
			_exit(1);
	_exit(0);
}

/* The kernel's image of a work_pattern process; *addr: its pages. */
static char *pattern_image(size_t *len, unsigned long *addr)
{
	struct ghost_export e;
	char *img = NULL;
	pid_t pid = spawn(work_pattern, addr, sizeof(*addr));
	int g = ghost_new_mem();

	if (pid > 0 && g >= 0 && !ghost_do_export(g, pid, GHOST_EXPORT_KILL, &e)) {
		waitpid(pid, NULL, 0);
		img = ghost_read_image(g, len);
	} else if (pid > 0) {
		reap(pid);
	}
	if (g >= 0)
		close(g);
	return img;
}

/* Rewrites an XXH64 image as the crc32c image ghost.ko wrote before it. */
static size_t to_crc32c(char *img, size_t len)
{
	struct ghost_image_header *h = (void *)img;
	struct ghost_section *s = (void *)(img + len - sizeof(*s) - sizeof(struct ghost_end));
	struct ghost_end *e = (void *)(s + 1);

	h->features &= ~GHOST_IMAGE_FEAT_XXH64;
	h->required_features &= ~GHOST_IMAGE_FEAT_XXH64;
	s->size = GHOST_END_SIZE_VER1;
	s->record_size = GHOST_END_SIZE_VER1;
	e->xxh64 = 0;
	len -= sizeof(struct ghost_end) - GHOST_END_SIZE_VER1;
	image_set_sum(img, (char *)s - img, e);
	return len;
}

/* Flips a bit in the middle of the pattern pages' data. */
static int flip_page_byte(char *img, size_t len, unsigned long addr)
{
	static struct image_sec secs[4096];
	int n = image_walk(img, len, secs, 4096);
	char *p = n > 0 ? (char *)image_page(secs, n, addr + 5 * PAGE) : NULL;

	if (!p)
		return -1;
	p[123] ^= 0x10;
	return 0;
}

/*
 * A ghost on a memory file holding @img from byte @at (junk before it, the
 * file's offset there); -1 on failure.
 */
static int file_ghost(const char *img, size_t len, long at)
{
	int fd = memfd_create("ghost-image", 0), g = -1;
	char junk[4096];

	memset(junk, 'J', sizeof(junk));
	if (fd >= 0 && at <= (long)sizeof(junk) && write(fd, junk, at) == at &&
	    write(fd, img, len) == (ssize_t)len && lseek(fd, at, SEEK_SET) == at)
		g = ghost_new();
	if (g >= 0 && ghost_plug(g, GHOST_RES_FILE, fd)) {
		close(g);
		g = -1;
	}
	if (fd >= 0)
		close(fd);
	return g;
}

enum outcome {
	RAN_INTACT,	/* restored, stopped, its pages as they were */
	REFUSED,	/* refused with the reason asked for, alive */
	KILLED,		/* SIGKILL before it ran (it never stopped) */
};

#define IN_MEMORY (-1L)

/*
 * Imports @img with @flags | GHOST_IMPORT_STOPPED into a fresh child,
 * through a memory ghost (@at IN_MEMORY) or from a memory file, where it
 * starts at byte @at. What became of the child, or -1 for anything else
 * (printed). @words: the reason a refusal must hold.
 */
static int import_child(const char *img, size_t len, long at, __u32 flags,
			const char *words)
{
	const bool mem = at == IN_MEMORY;
	int g = mem ? ghost_new_mem() : file_ghost(img, len, at), status = -1;
	pid_t child;

	if (g < 0 || (mem && write(g, img, len) != (ssize_t)len))
		return -1;
	child = fork();
	if (child == 0) {
		struct ghost_import im;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		drop_shared_anon();
		ghost_restore_self_flags(g, &im, flags | GHOST_IMPORT_STOPPED);
		if (errno != EBADMSG)
			_exit(100);
		if (!words || !strstr(im.reason, words)) {
			fprintf(stderr, "reason: %s\n", im.reason);
			_exit(2);
		}
		_exit(0);
	}
	close(g);
	if (waitpid(child, &status, WUNTRACED) != child)
		return -1;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		return KILLED;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return REFUSED;
	if (!WIFSTOPPED(status)) {
		fprintf(stderr, "importer status %#x\n", status);
		return -1;
	}
	kill(child, SIGUSR1);
	kill(child, SIGCONT);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		fprintf(stderr, "restored process status %#x\n", status);
		return -1;
	}
	return RAN_INTACT;
}

TEST(xxh64_image_restores_and_a_flipped_page_byte_is_refused)
{
	static struct image_sec secs[4096];
	unsigned long addr = 0;
	size_t len;
	char *img = pattern_image(&len, &addr);

	ASSERT_NE(NULL, img);
	ASSERT_TRUE(image_xxh64(img));
	ASSERT_LT(0, image_walk(img, len, secs, 4096));
	EXPECT_EQ(RAN_INTACT, import_child(img, len, IN_MEMORY, 0, NULL));
	ASSERT_EQ(0, flip_page_byte(img, len, addr));
	EXPECT_EQ(IMG_BAD_CRC, image_walk(img, len, secs, 4096));
	EXPECT_EQ(REFUSED, import_child(img, len, IN_MEMORY, 0, "checksum mismatch (xxh64)"));
	free(img);
}

TEST(crc32c_image_restores_and_a_flipped_page_byte_is_refused)
{
	static struct image_sec secs[4096];
	unsigned long addr = 0;
	size_t len;
	char *img = pattern_image(&len, &addr);

	ASSERT_NE(NULL, img);
	len = to_crc32c(img, len);
	ASSERT_FALSE(image_xxh64(img));
	ASSERT_LT(0, image_walk(img, len, secs, 4096));
	EXPECT_EQ(RAN_INTACT, import_child(img, len, IN_MEMORY, 0, NULL));
	ASSERT_EQ(0, flip_page_byte(img, len, addr));
	EXPECT_EQ(REFUSED, import_child(img, len, IN_MEMORY, 0, "checksum mismatch (crc32c)"));
	free(img);
}

TEST(xxh64_image_with_a_short_end_record_is_refused)
{
	unsigned long addr = 0;
	size_t len;
	char *img = pattern_image(&len, &addr);
	struct ghost_image_header *h = (void *)img;

	ASSERT_NE(NULL, img);
	len = to_crc32c(img, len);
	h->features |= GHOST_IMAGE_FEAT_XXH64;
	h->required_features |= GHOST_IMAGE_FEAT_XXH64;
	EXPECT_EQ(REFUSED, import_child(img, len, IN_MEMORY, 0, "end record has none"));
	free(img);
}

/* ---- GHOST_IMPORT_DIRECT ------------------------------------------------ */

TEST(direct_import_restores_and_a_flipped_page_byte_kills_before_it_runs)
{
	unsigned long addr = 0;
	long held = ghost_pages_held();
	size_t len;
	char *img = pattern_image(&len, &addr);

	ASSERT_NE(NULL, img);
	ASSERT_TRUE(image_xxh64(img));
	EXPECT_EQ(RAN_INTACT, import_child(img, len, 0, GHOST_IMPORT_DIRECT, NULL));
	/* nothing left held in the module */
	EXPECT_EQ(held, ghost_pages_held());
	ASSERT_EQ(0, flip_page_byte(img, len, addr));
	EXPECT_EQ(KILLED, import_child(img, len, 0, GHOST_IMPORT_DIRECT, NULL));
	free(img);
}

/*
 * An image read from the file's offset, which need not be 0: the direct
 * import reads its page data there too (it read from byte 0 once, and the
 * checksum of the wrong bytes killed the importer).
 */
TEST(direct_import_of_an_image_further_into_its_file_restores)
{
	unsigned long addr = 0;
	size_t len;
	char *img = pattern_image(&len, &addr);

	ASSERT_NE(NULL, img);
	ASSERT_TRUE(image_xxh64(img));
	EXPECT_EQ(RAN_INTACT, import_child(img, len, 4096, GHOST_IMPORT_DIRECT, NULL));
	EXPECT_EQ(RAN_INTACT, import_child(img, len, 100, GHOST_IMPORT_DIRECT, NULL));
	free(img);
}

TEST(direct_import_of_an_image_cut_short_in_its_pages_is_refused)
{
	static struct image_sec secs[4096];
	unsigned long addr = 0;
	size_t len;
	char *img = pattern_image(&len, &addr);
	const char *page;
	int n;

	ASSERT_NE(NULL, img);
	n = image_walk(img, len, secs, 4096);
	ASSERT_LT(0, n);
	page = image_page(secs, n, addr + 5 * PAGE);
	ASSERT_NE(NULL, page);
	EXPECT_EQ(REFUSED, import_child(img, page - img, 0, GHOST_IMPORT_DIRECT,
					"the image ends early"));
	free(img);
}

TEST(direct_is_ignored_where_it_does_not_apply)
{
	unsigned long addr = 0;
	size_t len;
	char *img = pattern_image(&len, &addr);

	ASSERT_NE(NULL, img);
	/* a crc32c image from a file: staged and checked before the point */
	len = to_crc32c(img, len);
	ASSERT_EQ(0, flip_page_byte(img, len, addr));
	EXPECT_EQ(REFUSED, import_child(img, len, 0, GHOST_IMPORT_DIRECT,
					"checksum mismatch (crc32c)"));
	free(img);
	/* an XXH64 image in a memory ghost: the same */
	img = pattern_image(&len, &addr);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, flip_page_byte(img, len, addr));
	EXPECT_EQ(REFUSED, import_child(img, len, IN_MEMORY, GHOST_IMPORT_DIRECT,
					"checksum mismatch (xxh64)"));
	free(img);
}

TEST_HARNESS_MAIN
