// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-anon: private anonymous memory in the shapes a checkpointer must
 * get right — fully written regions, sparse regions whose other pages must
 * still read zero (some only read before the checkpoint, so the shared zero
 * page is mapped there, some never touched), pages written with zeros, a page dropped with
 * MADV_DONTNEED, one region split in three by mprotect, PROT_NONE guards
 * between regions, and a page the workload keeps writing after the restore.
 */
#include "oracle.h"

#define FULL_PAGES   64
#define SPARSE_PAGES 96		/* every third page written */
#define ZERO_PAGES   16		/* written with zeros */
#define SPLIT_PAGES  48		/* middle third read-only */
#define HUGE_SPARSE  (64UL << 20)	/* MAP_NORESERVE, eight pages touched */

static char *full, *sparse, *zero, *split, *huge, *counter_page;
static uint64_t *counter;
static uint64_t last_count;

static void check_region(const char *name, char *p, size_t pages, int (*written)(size_t))
{
	for (size_t i = 0; i < pages; i++) {
		char *pg = p + i * PAGE;

		if (written(i)) {
			long off = oracle_check_fill(pg, PAGE, 0xA11);

			if (off >= 0)
				oracle_fail("%s page %zu (%p) differs at +%ld", name, i,
					    (void *)pg, off);
		} else if (!oracle_is_zero(pg, PAGE)) {
			oracle_fail("%s page %zu (%p) should read zero", name, i,
				    (void *)pg);
		}
	}
}

static int all(size_t i) { (void)i; return 1; }
static int third(size_t i) { return i % 3 == 0; }
static int none(size_t i) { (void)i; return 0; }
static int huge_touched(size_t i) { return i % 2048 == 5; }
/* Page 7 of the full region was dropped with MADV_DONTNEED. */
static int full_but_7(size_t i) { return i != 7; }

/*
 * Checks only the pages the state says were written or read, so pages that
 * were never touched stay that way until the final check reads them.
 */
static void check_touched(char *p, size_t pages, int (*written)(size_t), int (*read)(size_t))
{
	for (size_t i = 0; i < pages; i++) {
		char *pg = p + i * PAGE;

		if (written(i)) {
			long off = oracle_check_fill(pg, PAGE, 0xA11);

			if (off >= 0)
				oracle_fail("page %p differs at +%ld", (void *)pg, off);
		} else if (read(i) && !oracle_is_zero(pg, PAGE)) {
			oracle_fail("page %p should read zero", (void *)pg);
		}
	}
}

static int third_plus_one(size_t i) { return i % 3 == 1; }

static void check(void)
{
	check_region("full", full, FULL_PAGES, full_but_7);
	check_touched(sparse, SPARSE_PAGES, third, third_plus_one);
	check_region("zero", zero, ZERO_PAGES, none);
	check_region("split", split, SPLIT_PAGES, all);
	check_touched(huge, HUGE_SPARSE / PAGE, huge_touched, none);
	/* The counter page is live state: it only ever grows by one per round. */
	if (counter[0] != last_count || counter[1] != ~last_count)
		oracle_fail("counter page holds %lu/%lx, expected %lu",
			    (unsigned long)counter[0], (unsigned long)counter[1],
			    (unsigned long)last_count);
	last_count++;
	counter[0] = last_count;
	counter[1] = ~last_count;
}

static void write_region(char *p, size_t pages, int (*written)(size_t))
{
	for (size_t i = 0; i < pages; i++)
		if (written(i))
			oracle_fill(p + i * PAGE, PAGE, 0xA11);
}

int main(int argc, char **argv)
{
	oracle_init(argc, argv);

	/* Guards around every region keep the kernel from merging them. */
	full = oracle_mmap((FULL_PAGES + 2) * PAGE, PROT_NONE);
	full += PAGE;
	if (mprotect(full, FULL_PAGES * PAGE, PROT_READ | PROT_WRITE))
		oracle_die("mprotect");
	write_region(full, FULL_PAGES, all);
	if (madvise(full + 7 * PAGE, PAGE, MADV_DONTNEED))
		oracle_die("madvise");

	sparse = oracle_mmap(SPARSE_PAGES * PAGE, PROT_READ | PROT_WRITE);
	write_region(sparse, SPARSE_PAGES, third);
	for (size_t i = 1; i < SPARSE_PAGES; i += 3)	/* maps the zero page */
		if (sparse[i * PAGE + 100])
			oracle_die("fresh anonymous page not zero");

	zero = oracle_mmap(ZERO_PAGES * PAGE, PROT_READ | PROT_WRITE);
	for (size_t i = 0; i < ZERO_PAGES; i++)
		memset(zero + i * PAGE, 0, PAGE);	/* touched, all zero */

	split = oracle_mmap(SPLIT_PAGES * PAGE, PROT_READ | PROT_WRITE);
	write_region(split, SPLIT_PAGES, all);
	if (mprotect(split + SPLIT_PAGES / 3 * PAGE, SPLIT_PAGES / 3 * PAGE, PROT_READ))
		oracle_die("mprotect split");

	huge = mmap(NULL, HUGE_SPARSE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (huge == MAP_FAILED)
		oracle_die("mmap huge");
	write_region(huge, HUGE_SPARSE / PAGE, huge_touched);

	counter_page = oracle_mmap(PAGE, PROT_READ | PROT_WRITE);
	counter = (uint64_t *)counter_page;
	counter[1] = ~0ULL;

	check();
	oracle_ready();
	oracle_wait(check, 50);
	check();
	/* Now every page, the untouched ones included. */
	check_region("sparse", sparse, SPARSE_PAGES, third);
	check_region("huge", huge, HUGE_SPARSE / PAGE, huge_touched);
	/* Every page is still writable where it was (and not where it was not). */
	write_region(full, FULL_PAGES, all);
	write_region(sparse, SPARSE_PAGES, all);
	check_region("full rewritten", full, FULL_PAGES, all);
	check_region("sparse rewritten", sparse, SPARSE_PAGES, all);
	oracle_finish();
}
