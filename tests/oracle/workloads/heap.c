// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-heap: the brk heap and malloc. Thousands of small blocks (brk) and a
 * few large ones (malloc's own mmaps) with patterns, a third of them freed
 * to leave holes in malloc's lists, plus a region the program grew with
 * sbrk itself. After the restore the program break must be where it was,
 * every block intact, and malloc/free/sbrk must keep working (malloc's
 * metadata lives in the same memory).
 */
#include "oracle.h"

#define NSMALL 3000
#define NLARGE 4

static char *small[NSMALL];
static size_t small_len[NSMALL];
static char *large[NLARGE];
static char *grown;
static void *brk_at_ready;

#define GROWN_LEN (64 * PAGE)

static size_t len_of(size_t i)
{
	return 16 + (i * 7919) % 2000;
}

static void fill_block(char *p, size_t len, size_t i)
{
	for (size_t k = 0; k < len; k++)
		p[k] = (char)(i * 31 + k * 7);
}

static int block_ok(const char *p, size_t len, size_t i)
{
	for (size_t k = 0; k < len; k++)
		if (p[k] != (char)(i * 31 + k * 7))
			return 0;
	return 1;
}

static void check(void)
{
	for (size_t i = 0; i < NSMALL; i++)
		if (small[i] && !block_ok(small[i], small_len[i], i))
			oracle_fail("small block %zu at %p corrupted", i, (void *)small[i]);
	for (size_t i = 0; i < NLARGE; i++) {
		long off = oracle_check_fill(large[i], (1 + i) << 20, 0x4EA9);

		if (off >= 0)
			oracle_fail("large block %zu at %p differs at +%ld", i,
				    (void *)large[i], off);
	}
	if (oracle_check_fill(grown, GROWN_LEN, 0xB4C) >= 0)
		oracle_fail("sbrk region at %p corrupted", (void *)grown);
	if (sbrk(0) != brk_at_ready)
		oracle_fail("program break at %p, was %p", sbrk(0), brk_at_ready);
}

int main(int argc, char **argv)
{
	oracle_init(argc, argv);

	for (size_t i = 0; i < NSMALL; i++) {
		small_len[i] = len_of(i);
		small[i] = malloc(small_len[i]);
		if (!small[i])
			oracle_die("malloc");
		fill_block(small[i], small_len[i], i);
	}
	for (size_t i = 0; i < NSMALL; i += 3) {
		free(small[i]);
		small[i] = NULL;
	}
	for (size_t i = 0; i < NLARGE; i++) {
		large[i] = malloc((1 + i) << 20);	/* above the mmap threshold */
		if (!large[i])
			oracle_die("malloc large");
		oracle_fill(large[i], (1 + i) << 20, 0x4EA9);
	}
	/* glibc's heap lives at the old break; this region lies above it. */
	grown = sbrk(GROWN_LEN);
	if (grown == (void *)-1)
		oracle_die("sbrk");
	oracle_fill(grown, GROWN_LEN, 0xB4C);
	brk_at_ready = sbrk(0);

	check();
	oracle_ready();
	oracle_wait(check, 50);
	check();

	/* malloc's state survived: refill the holes, free everything. */
	for (size_t i = 0; i < NSMALL; i += 3) {
		small[i] = malloc(small_len[i]);
		if (!small[i])
			oracle_die("malloc after restore");
		fill_block(small[i], small_len[i], i);
	}
	for (size_t i = 0; i < NSMALL; i++)
		if (!block_ok(small[i], small_len[i], i))
			oracle_fail("block %zu corrupted after malloc after restore", i);
	for (size_t i = 0; i < NSMALL; i++)
		free(small[i]);
	for (size_t i = 0; i < NLARGE; i++)
		free(large[i]);
	/* The break still moves, and the memory it adds is usable. */
	{
		char *b = sbrk(0), *got = sbrk(16 * PAGE);

		if (got != b)
			oracle_fail("sbrk(+16 pages) returned %p, break was %p",
				    (void *)got, (void *)b);
		else
			memset(got, 0x5C, 16 * PAGE);
	}
	oracle_finish();
}
