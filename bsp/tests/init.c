/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bsp_init with an SPMD function that is not main: bsp_nprocs() before
 * bsp_begin; only pid 0 continues after bsp_end (so "after end" is printed
 * once); bsp_time grows. Prints "init ok P" and "after end".
 */
#include <stdio.h>
#include <stdlib.h>

#include "bsp.h"
#include "check.h"

static int want;

static void spmd(void) {
    bsp_begin(want);
    int p = bsp_nprocs(), s = bsp_pid();
    static int sum;
    bsp_push_reg(&sum, sizeof sum);
    bsp_sync();
    double t0 = bsp_time();
    CHECK(t0 >= 0);
    bsp_put(0, &s, &sum, 0, 0); /* a zero-byte put is fine */
    bsp_send(0, NULL, &s, sizeof s);
    bsp_sync();
    CHECK(bsp_time() >= t0);
    if (s == 0) {
        int n, b, total = 0;
        bsp_qsize(&n, &b);
        CHECK(n == p);
        for (int i = 0; i < n; i++) {
            int v;
            bsp_move(&v, sizeof v);
            total += v;
        }
        CHECK(total == p * (p - 1) / 2);
        printf("init ok %d\n", p);
    }
    bsp_end();
}

int main(int argc, char** argv) {
    bsp_init(spmd, argc, argv);
    want = argc > 1 ? atoi(argv[1]) : bsp_nprocs();
    if (want < 1)
        return 3;
    spmd();
    printf("after end\n");
    return 0;
}
