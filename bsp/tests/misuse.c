/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One misuse per run, named by argv[1]; argv[2] is P. Done by pid 1 (or by
 * every pid for collective ones); the job must end with a message naming the
 * call and the problem, and a non-zero status.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bsp.h"
#include "check.h"

static int area[4];
static int other[4];

int main(int argc, char** argv) {
    const char* what = argc > 1 ? argv[1] : "";
    if (strcmp(what, "before-begin") == 0)
        bsp_sync();
    bsp_begin(argc > 2 ? atoi(argv[2]) : bsp_nprocs());
    int s = bsp_pid(), x = 1;
    bsp_push_reg(area, sizeof area);
    if (strcmp(what, "push-then-use") == 0 && s == 1)
        bsp_put(0, &x, other, 0, sizeof x); /* not registered at all */
    if (strcmp(what, "use-before-sync") == 0 && s == 1)
        bsp_put(0, &x, area, 0, sizeof x); /* registered from the next sync */
    bsp_sync();
    int bad = s == 1;
    if (bad && strcmp(what, "unregistered") == 0)
        bsp_put(0, &x, other, 0, sizeof x);
    if (bad && strcmp(what, "get-unregistered") == 0)
        bsp_get(0, other, 0, &x, sizeof x);
    if (bad && strcmp(what, "pid-range") == 0)
        bsp_put(bsp_nprocs(), &x, area, 0, sizeof x);
    if (bad && strcmp(what, "send-pid-range") == 0)
        bsp_send(-1, NULL, &x, sizeof x);
    if (bad && strcmp(what, "negative-size") == 0)
        bsp_get(0, area, 0, &x, -4);
    if (bad && strcmp(what, "past-end") == 0)
        bsp_put(0, &x, area, 14, sizeof x);
    if (bad && strcmp(what, "pop-unregistered") == 0)
        bsp_pop_reg(other);
    if (bad && strcmp(what, "move-empty") == 0)
        bsp_move(&x, sizeof x);
    if (bad && strcmp(what, "abort") == 0)
        bsp_abort("user abort from pid %d with code %d\n", s, 42);
    if (bad && strcmp(what, "exit3") == 0)
        exit(3);
    if (bad && strcmp(what, "killed") == 0)
        raise(SIGKILL);
    if (strcmp(what, "reg-order") == 0) {
        /* collective calls in a different order on pid 1 */
        if (s == 1) {
            bsp_push_reg(other, sizeof other);
            bsp_pop_reg(area);
        } else {
            bsp_pop_reg(area);
            bsp_push_reg(other, sizeof other);
        }
    }
    if (strcmp(what, "reg-count") == 0 && s == 1)
        bsp_push_reg(other, sizeof other);
    if (strcmp(what, "tagsize") == 0) {
        int t = 4 + s;
        bsp_set_tagsize(&t);
    }
    if (strcmp(what, "sync-after-end") == 0 && s == 1) {
        bsp_end();
        return 0;
    }
    bsp_sync();
    bsp_sync();
    if (s == 0)
        printf("misuse %s not detected\n", what);
    bsp_end();
    return 0;
}
