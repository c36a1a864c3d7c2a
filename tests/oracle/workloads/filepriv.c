// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-filepriv: private file mappings. DIR/data (16 pages, each with its
 * own content) is mapped MAP_PRIVATE read-write: some pages are written
 * (copied on write, the copy is the process's own state), some only read
 * (clean page-cache pages), the rest never touched. A second, read-only
 * mapping starts at page 4 of the file (non-zero offset), and a third maps
 * a file that the workload then modifies through write(2): a private page
 * that was never copied shows the new file contents, a copied one does not.
 */
#include "oracle.h"

#define FILE_PAGES 16
#define RO_OFF     4
#define RO_PAGES   8

static uint64_t *rw, *ro, *late;

/* Word @k of page @pg of the file, with @gen the file's version. */
static uint64_t file_word(size_t pg, size_t k, uint64_t gen)
{
	return oracle_pat(pg * PAGE + k * 8, 0xF11E + gen);
}

static int cowed(size_t pg)
{
	return pg == 2 || pg == 5 || pg == 7 || pg == 15;
}

static int was_read(size_t pg)
{
	return pg == 0 || pg == 1 || pg == 3 || pg == 9;
}

static void write_data_file(const char *name, uint64_t gen)
{
	uint64_t page[PAGE / 8];
	char path[4096];
	int fd = open(oracle_path(path, sizeof(path), name),
		      O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		oracle_die("create %s", path);
	for (size_t pg = 0; pg < FILE_PAGES; pg++) {
		for (size_t k = 0; k < PAGE / 8; k++)
			page[k] = file_word(pg, k, gen);
		if (write(fd, page, PAGE) != PAGE)
			oracle_die("write %s", path);
	}
	close(fd);
}

static uint64_t *map_file(const char *name, int prot, size_t off_pages, size_t pages)
{
	char path[4096];
	int fd = open(oracle_path(path, sizeof(path), name), O_RDONLY | O_CLOEXEC);
	void *p;

	if (fd < 0)
		oracle_die("open %s", path);
	p = mmap(NULL, pages * PAGE, prot, MAP_PRIVATE, fd, off_pages * PAGE);
	if (p == MAP_FAILED)
		oracle_die("mmap %s", path);
	close(fd);		/* the mapping keeps the file */
	return p;
}

static void expect_page(const char *what, const uint64_t *p, size_t pg,
			size_t file_pg, uint64_t gen, int copied)
{
	for (size_t k = 0; k < PAGE / 8; k++) {
		uint64_t want = copied ? ~file_word(file_pg, k, gen) : file_word(file_pg, k, gen);

		if (p[pg * PAGE / 8 + k] != want) {
			oracle_fail("%s page %zu (file page %zu, %s) differs at word %zu",
				    what, pg, file_pg, copied ? "copied" : "clean", k);
			return;
		}
	}
}

/* @all: also the pages never touched before the checkpoint. */
static void check_all(int all)
{
	for (size_t pg = 0; pg < FILE_PAGES; pg++)
		if (all || cowed(pg) || was_read(pg))
			expect_page("rw", rw, pg, pg, 0, cowed(pg));
	for (size_t pg = 0; pg < RO_PAGES; pg++)
		if (all || pg % 2 == 0)
			expect_page("ro", ro, pg, RO_OFF + pg, 0, 0);
	if (!late)
		return;		/* not mapped yet */
	expect_page("late", late, 0, 0, 0, 1);
	if (all)
		expect_page("late", late, 1, 1, 1, 0);
}

static void check(void)
{
	check_all(0);
}

int main(int argc, char **argv)
{
	oracle_init(argc, argv);

	write_data_file("data", 0);
	rw = map_file("data", PROT_READ | PROT_WRITE, 0, FILE_PAGES);
	for (size_t pg = 0; pg < FILE_PAGES; pg++) {
		if (cowed(pg)) {
			for (size_t k = 0; k < PAGE / 8; k++)
				rw[pg * PAGE / 8 + k] = ~rw[pg * PAGE / 8 + k];
		}
	}
	ro = map_file("data", PROT_READ, RO_OFF, RO_PAGES);
	check_all(0);	/* reads the was_read pages and every other ro page */

	/*
	 * "late": page 0 copied, page 1 never touched; then the file changes.
	 * A restore must give page 0 the process's copy and page 1 the file's
	 * current contents (generation 1), as the kernel would.
	 */
	write_data_file("late", 0);
	late = map_file("late", PROT_READ | PROT_WRITE, 0, 2);
	for (size_t k = 0; k < PAGE / 8; k++)
		late[k] = ~late[k];
	{
		char path[4096];
		int fd = open(oracle_path(path, sizeof(path), "late"), O_WRONLY | O_CLOEXEC);
		uint64_t page[PAGE / 8];

		for (size_t k = 0; k < PAGE / 8; k++)
			page[k] = file_word(1, k, 1);
		if (fd < 0 || pwrite(fd, page, PAGE, PAGE) != PAGE)
			oracle_die("rewrite late");
		close(fd);
	}

	oracle_ready();
	oracle_wait(check, 50);
	check_all(1);
	/* Copy-on-write still works on pages that were clean at the checkpoint. */
	rw[PAGE / 8 * 9] ^= 1;
	if (rw[PAGE / 8 * 9] != (file_word(9, 0, 0) ^ 1))
		oracle_fail("write to a clean private page after restore lost");
	oracle_finish();
}
