/* SPDX-License-Identifier: GPL-2.0 */
/* A plain BSPlib program, compiled by the test with
 * cc standalone.c $(pkg-config --cflags --libs ghost-bsp): an inner product. */
#include <stdio.h>
#include <stdlib.h>

#include <bsp.h>

int main(int argc, char** argv) {
    bsp_begin(argc > 1 ? atoi(argv[1]) : bsp_nprocs());
    int p = bsp_nprocs(), s = bsp_pid();
    long part = 0, *parts = calloc((size_t)p, sizeof(long));
    for (long i = s; i < 1000; i += p)
        part += i * i;
    bsp_push_reg(parts, p * (int)sizeof(long));
    bsp_sync();
    bsp_put(0, &part, parts, s * (int)sizeof(long), sizeof(long));
    bsp_sync();
    if (s == 0) {
        long sum = 0;
        for (int i = 0; i < p; i++)
            sum += parts[i];
        printf("sum of squares below 1000: %ld\n", sum);
    }
    bsp_end();
    free(parts);
    return 0;
}
