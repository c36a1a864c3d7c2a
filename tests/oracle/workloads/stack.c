// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-stack: the stack. A 256 KiB array on main's frame grows the stack
 * mapping, then 300 nested calls each keep a patterned buffer and a link to
 * their caller's frame. The workload waits at the deepest call — so the
 * checkpoint happens with all those frames live — verifies every frame
 * through the links while it waits, and after SIGTERM each call verifies
 * its own frame again on the way out, which also checks the saved return
 * addresses and frame state of 300 real calls.
 */
#include "oracle.h"

#define DEPTH 300
#define FRAME_WORDS 64

struct frame {
	uint64_t words[FRAME_WORDS];
	struct frame *up;
	unsigned int depth;
};

static struct frame *deepest;
static uint64_t *big;
#define BIG_WORDS (256 * 1024 / 8)

static void check_frame(const struct frame *f)
{
	long off = oracle_check_fill(f->words, sizeof(f->words), f->depth);

	if (off >= 0)
		oracle_fail("frame of call %u at %p differs at +%ld", f->depth,
			    (const void *)f, off);
}

static void check(void)
{
	unsigned int n = 0;

	for (const struct frame *f = deepest; f; f = f->up, n++) {
		if (f->depth != DEPTH - 1 - n) {
			oracle_fail("frame chain broken at %p: depth %u, expected %u",
				    (const void *)f, f->depth, DEPTH - 1 - n);
			return;
		}
		check_frame(f);
	}
	if (n != DEPTH)
		oracle_fail("%u frames linked, expected %d", n, DEPTH);
	if (oracle_check_fill(big, BIG_WORDS * 8, 0x57AC) >= 0)
		oracle_fail("big stack array at %p corrupted", (void *)big);
}

/* noinline + the volatile result keep 300 real frames on the stack. */
__attribute__((noinline))
static unsigned int descend(struct frame *up, unsigned int depth)
{
	struct frame f = { .up = up, .depth = depth };
	volatile unsigned int below;

	oracle_fill(f.words, sizeof(f.words), depth);
	if (depth == DEPTH - 1) {
		deepest = &f;
		check();
		oracle_ready();
		oracle_wait(check, 50);
		check();
		below = 0;
	} else {
		below = descend(&f, depth + 1);
	}
	check_frame(&f);	/* on the way out, after the restore */
	return below + 1;
}

int main(int argc, char **argv)
{
	uint64_t array[BIG_WORDS];
	unsigned int n;

	oracle_init(argc, argv);
	big = array;
	oracle_fill(array, sizeof(array), 0x57AC);
	n = descend(NULL, 0);
	if (n != DEPTH)
		oracle_fail("unwound %u calls, expected %d", n, DEPTH);
	if (oracle_check_fill(array, sizeof(array), 0x57AC) >= 0)
		oracle_fail("big stack array corrupted after unwinding");
	oracle_finish();
}
