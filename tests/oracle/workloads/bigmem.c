// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-bigmem: 256 MiB of private anonymous memory, every word holding a
 * pattern of its address, so a page restored at the wrong place, torn, or
 * missing is caught. While waiting it re-checks a rotating 1/64 of the
 * pages (a full pass under TCG takes seconds); the final check reads all.
 * The page holding the round counter changes after the restore too.
 */
#include "oracle.h"

#define BIG (256UL << 20)
#define SLICES 64

static char *big;
static unsigned long round_no;

static void check_slice(unsigned long slice)
{
	size_t step = SLICES * PAGE;

	for (size_t off = slice * PAGE; off < BIG; off += step) {
		long bad = oracle_check_fill(big + off, PAGE, 0xB16);

		if (bad >= 0)
			oracle_fail("page at %p differs at +%ld", (void *)(big + off), bad);
	}
}

static void check(void)
{
	check_slice(round_no++ % SLICES);
}

int main(int argc, char **argv)
{
	oracle_init(argc, argv);
	big = oracle_mmap(BIG, PROT_READ | PROT_WRITE);
	oracle_fill(big, BIG, 0xB16);
	check();
	oracle_ready();
	oracle_wait(check, 20);
	for (unsigned long s = 0; s < SLICES; s++)
		check_slice(s);
	oracle_finish();
}
