/* SPDX-License-Identifier: GPL-2.0 */
/* Shared by the conformance programs: CHECK aborts the job naming the line. */
#ifndef BSP_TEST_CHECK_H
#define BSP_TEST_CHECK_H

#include <stdlib.h>

#include "bsp.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            bsp_abort("%s: pid %d: check failed: %s (line %d)", __FILE__, bsp_pid(), #c,           \
                      __LINE__);                                                                   \
    } while (0)

/* P from argv[1] (needed without bsprun), else what bsp_nprocs() offers. */
static inline int test_nprocs(int argc, char** argv) {
    return argc > 1 ? atoi(argv[1]) : bsp_nprocs();
}

#endif
