// SPDX-License-Identifier: GPL-2.0
/*
 * ghost-counter: the demo workload. Counts up every INTERVAL ms, keeping the
 * count in memory, and prints each value (with its pid) to standard output.
 * After a checkpoint and restart it must continue from where it was.
 * Usage: ghost-counter [INTERVAL_MS]   (default 100)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 100;
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
	unsigned long count = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		printf("%lu pid=%d\n", count++, getpid());
		nanosleep(&ts, NULL);
	}
}
