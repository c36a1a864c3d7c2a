/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a VP sees of a process outside the job, superstep by superstep: for
 * bsprun --at-superstep load profiles (tests/bsp/load). Runs argv[2]
 * supersteps; in superstep k (after k bsp_sync calls) the VP whose pid is
 * argv[3] (default 1) reads the pid in the file argv[1] and prints
 *   probe k STATE CG TICKS
 * STATE: none (no pid file), running (the process exists and is not a
 * zombie), gone (it exited, or is a zombie); CG: same when the process is
 * in the VP's own cgroup (the same host of the test cluster), other, or -;
 * TICKS: its user+system CPU time in clock ticks (a zombie's stays
 * fixed), or -.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bsp.h"
#include "check.h"

static int read_line(const char* path, char* buf, size_t size) {
    FILE* f = fopen(path, "r");
    if (!f)
        return 0;
    const int ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    return ok;
}

static void probe(const char* pidfile, int k) {
    char line[4096], path[64], mine[4096], theirs[4096];
    if (!read_line(pidfile, line, sizeof line)) {
        printf("probe %d none - -\n", k);
        return;
    }
    const long pid = strtol(line, NULL, 10);
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (pid <= 0 || !read_line(path, line, sizeof line)) {
        printf("probe %d gone - -\n", k);
        return;
    }
    /* After the command's ")": state, then 10 fields to utime and stime. */
    const char* p = strrchr(line, ')');
    char state = '?';
    unsigned long utime = 0, stime = 0;
    CHECK(p && sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &state, &utime,
                      &stime) == 3);
    if (state == 'Z' || state == 'X') {
        printf("probe %d gone - %lu\n", k, utime + stime);
        return;
    }
    snprintf(path, sizeof path, "/proc/%ld/cgroup", pid);
    const int cg =
        read_line("/proc/self/cgroup", mine, sizeof mine) && read_line(path, theirs, sizeof theirs);
    printf("probe %d running %s %lu\n", k,
           !cg                         ? "-"
           : strcmp(mine, theirs) == 0 ? "same"
                                       : "other",
           utime + stime);
}

int main(int argc, char** argv) {
    bsp_begin(bsp_nprocs());
    CHECK(argc > 2);
    const int steps = atoi(argv[2]);
    const int who = argc > 3 ? atoi(argv[3]) : 1;
    for (int k = 0; k <= steps; ++k) {
        if (bsp_pid() == who % bsp_nprocs()) {
            probe(argv[1], k);
            fflush(stdout);
        }
        const struct timespec t = {0, 10000000};
        nanosleep(&t, NULL);
        if (k < steps)
            bsp_sync();
    }
    bsp_end();
    return 0;
}
