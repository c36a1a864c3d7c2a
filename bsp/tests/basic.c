/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Conformance: bsp_begin/pid/nprocs/sync/end, bsp_put and bsp_get in one
 * superstep (gets read before puts land), bsp_hpput reading at sync time,
 * puts to the same place landing by source pid, registration taking effect
 * at the next sync, several supersteps. Prints "basic ok P" on pid 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bsp.h"
#include "check.h"

static int cell;      /* one int per process */
static int slots[64]; /* slot i written by pid i */
static int winner;    /* every pid writes its pid: the highest source wins */
static int hp;

int main(int argc, char** argv) {
    bsp_begin(test_nprocs(argc, argv));
    int p = bsp_nprocs(), s = bsp_pid();
    CHECK(p >= 1 && p <= 64);
    CHECK(s >= 0 && s < p);

    cell = 100 + s;
    bsp_push_reg(&cell, sizeof cell);
    bsp_push_reg(slots, sizeof slots);
    bsp_push_reg(&winner, sizeof winner);
    bsp_push_reg(&hp, sizeof hp);
    bsp_sync();

    /* get reads the old value even though a put to it happens in the same superstep */
    int got = -1, next = (s + 1) % p;
    int newval = 1000 + s;
    bsp_get(next, &cell, 0, &got, sizeof got);
    bsp_put(next, &newval, &cell, 0, sizeof newval);
    newval = -7; /* bsp_put copied at the call */
    bsp_put(0, &s, slots, s * (int)sizeof(int), sizeof(int));
    for (int i = 0; i < 3; i++) {
        int v = s * 10 + i; /* puts to one place: by source pid then call order */
        bsp_put(0, &v, &winner, 0, sizeof v);
    }
    bsp_sync();
    CHECK(got == 100 + next);
    CHECK(cell == 1000 + (s - 1 + p) % p);
    if (s == 0) {
        for (int i = 0; i < p; i++)
            CHECK(slots[i] == i);
        CHECK(winner == (p - 1) * 10 + 2);
    }

    /* hpput reads its source at the sync, not at the call */
    int src = 1;
    bsp_hpput(next, &src, &hp, 0, sizeof src);
    src = 2;
    bsp_sync();
    CHECK(hp == 2);

    /* a registration takes effect at the next sync; a later push of the same address wins */
    static int area[4];
    bsp_push_reg(area, 2 * sizeof(int));
    bsp_sync();
    bsp_push_reg(area, 4 * sizeof(int));
    bsp_sync();
    int four[4] = {s, s, s, s};
    bsp_put(next, four, area, 0, sizeof four); /* fits only the second registration */
    bsp_sync();
    CHECK(area[3] == (s - 1 + p) % p);
    bsp_pop_reg(area);
    bsp_sync();
    /* the first registration (2 ints) is the one left */
    bsp_put(next, four, area, 0, 2 * sizeof(int));
    bsp_sync();

    for (int i = 0; i < 5; i++)
        bsp_sync();
    if (s == 0)
        printf("basic ok %d\n", p);
    bsp_end();
    return 0;
}
