/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bsp_time across moves: over argv[1] supersteps (default 12) every VP
 * checks that bsp_time never decreases across a bsp_sync and that no sync
 * adds more than 60 s. A VP moved to a host whose monotonic clock reads
 * otherwise (booted at another time: tests/cluster's --own-clocks) would
 * jump by the difference if bsp_time followed that clock. Prints "clock ok
 * S" from pid 0, S the supersteps.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bsp.h"
#include "check.h"

int main(int argc, char** argv) {
    const int steps = argc > 1 ? atoi(argv[1]) : 12;
    bsp_begin(bsp_nprocs());
    for (int s = 0; s < steps; ++s) {
        const double before = bsp_time();
        bsp_sync();
        const double after = bsp_time();
        CHECK(after >= before);
        CHECK(after - before < 60.0);
    }
    if (bsp_pid() == 0)
        printf("clock ok %d\n", steps);
    bsp_end();
    return 0;
}
