/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A job that lasts until told: supersteps (about 20 ms each) until the file
 * argv[1] exists (vp 0 looks and tells every VP by bsp_put), so that a test
 * can act on a running multi-host job (kill a VP) without timing. Prints
 * "hold done S" on pid 0 with the number of supersteps. With argv[2], pid 0
 * (the only one that goes on after bsp_end) exits with that status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bsp.h"
#include "check.h"

static int stop;

int main(int argc, char** argv) {
    bsp_begin(bsp_nprocs());
    CHECK(argc > 1);
    bsp_push_reg(&stop, sizeof stop);
    bsp_sync();
    int steps = 0;
    while (!stop) {
        if (bsp_pid() == 0 && access(argv[1], F_OK) == 0) {
            int one = 1;
            for (int p = 0; p < bsp_nprocs(); ++p)
                bsp_put(p, &one, &stop, 0, sizeof one);
        }
        const struct timespec t = {0, 20000000};
        nanosleep(&t, NULL);
        bsp_sync();
        ++steps;
    }
    if (bsp_pid() == 0)
        printf("hold done %d\n", steps);
    bsp_end();
    return argc > 2 ? atoi(argv[2]) : 0;
}
