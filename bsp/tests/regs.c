/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Conformance of registrations: sizes may differ per process and the range
 * check uses the target's size; the k-th push names the same logical area
 * everywhere even at different addresses; pop takes effect at the sync (a
 * put in the same superstep still lands) and uncovers the previous
 * registration of the same address; pushes and pops in the same superstep.
 * Prints "regs ok P" on pid 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bsp.h"
#include "check.h"

int main(int argc, char** argv) {
    bsp_begin(test_nprocs(argc, argv));
    int p = bsp_nprocs(), s = bsp_pid();
    int next = (s + 1) % p, prev = (s - 1 + p) % p;

    /* Each process registers a heap area of (pid + 1) ints at its own address. */
    int* mine = calloc((size_t)s + 1, sizeof(int));
    bsp_push_reg(mine, (s + 1) * (int)sizeof(int));
    bsp_sync();
    /* next's area has next + 1 ints: fill it all, though ours may be smaller */
    int* vals = malloc(((size_t)next + 1) * sizeof(int));
    for (int i = 0; i <= next; i++)
        vals[i] = s * 100 + i;
    bsp_put(next, vals, mine, 0, (next + 1) * (int)sizeof(int));
    bsp_sync();
    for (int i = 0; i <= s; i++)
        CHECK(mine[i] == prev * 100 + i);

    /* pop + put in the same superstep: the put lands */
    int one = 4242;
    bsp_put(next, &one, mine, 0, sizeof one);
    bsp_pop_reg(mine);
    bsp_sync();
    CHECK(mine[0] == 4242);

    /* two registrations of one address: pop uncovers the older one */
    static int a[8];
    bsp_push_reg(a, 8 * sizeof(int));
    bsp_push_reg(a, 2 * sizeof(int));
    bsp_sync();
    bsp_pop_reg(a);
    bsp_sync();
    int eight[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    bsp_put(next, eight, a, 0, sizeof eight);
    bsp_sync();
    CHECK(a[7] == 8);
    bsp_pop_reg(a);
    bsp_sync();

    /* many registrations, pushed and popped in one superstep */
    static int many[16];
    for (int i = 0; i < 16; i++)
        bsp_push_reg(&many[i], sizeof(int));
    bsp_sync();
    for (int i = 0; i < 16; i++)
        bsp_put(next, &i, &many[i], 0, sizeof i);
    for (int i = 0; i < 16; i += 2)
        bsp_pop_reg(&many[i]);
    bsp_sync();
    for (int i = 0; i < 16; i++)
        CHECK(many[i] == i);
    for (int i = 1; i < 16; i += 2)
        bsp_get(prev, &many[i], 0, &many[i - 1], sizeof(int));
    bsp_sync();
    for (int i = 0; i < 16; i += 2)
        CHECK(many[i] == i + 1);

    if (s == 0)
        printf("regs ok %d\n", p);
    free(vals);
    bsp_end();
    free(mine);
    return 0;
}
