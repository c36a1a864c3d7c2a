// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-rlimits: resource limits. Soft and hard limits of most resources
 * are moved away from their defaults (some raised above them, which needs
 * root as the VM runs the workloads). After the restore getrlimit must
 * report all sixteen exactly as before, and the open-files limit must be
 * enforced where it was set.
 */
#include <sys/resource.h>

#include "oracle.h"

#define NOFILE_SOFT 64

static const struct {
	int res;
	const char *name;
	rlim_t cur, max;
} want[] = {
	{ RLIMIT_CPU, "CPU", 3600, RLIM_INFINITY },
	{ RLIMIT_FSIZE, "FSIZE", 1UL << 30, 2UL << 30 },
	{ RLIMIT_DATA, "DATA", 3UL << 30, RLIM_INFINITY },
	{ RLIMIT_CORE, "CORE", 0, 1UL << 20 },
	{ RLIMIT_NOFILE, "NOFILE", NOFILE_SOFT, 2048 },
	{ RLIMIT_NPROC, "NPROC", 1000, 2000 },
	{ RLIMIT_MEMLOCK, "MEMLOCK", 64 << 10, 128 << 10 },
	{ RLIMIT_LOCKS, "LOCKS", 100, 200 },
	{ RLIMIT_SIGPENDING, "SIGPENDING", 500, 600 },
	{ RLIMIT_MSGQUEUE, "MSGQUEUE", 409600, 819200 },
	{ RLIMIT_NICE, "NICE", 0, 10 },
	{ RLIMIT_RTPRIO, "RTPRIO", 0, 5 },
	{ RLIMIT_RTTIME, "RTTIME", 1000000, 2000000 },
};
#define NWANT (sizeof(want) / sizeof(want[0]))

static struct rlimit at_ready[RLIM_NLIMITS];

static void check(void)
{
	for (int r = 0; r < RLIM_NLIMITS; r++) {
		struct rlimit now;

		if (getrlimit(r, &now) || now.rlim_cur != at_ready[r].rlim_cur ||
		    now.rlim_max != at_ready[r].rlim_max)
			oracle_fail("limit %d is %lu/%lu, was %lu/%lu", r,
				    (unsigned long)now.rlim_cur, (unsigned long)now.rlim_max,
				    (unsigned long)at_ready[r].rlim_cur,
				    (unsigned long)at_ready[r].rlim_max);
	}
}

int main(int argc, char **argv)
{
	int fds[NOFILE_SOFT + 1], n = 0;

	oracle_init(argc, argv);
	for (size_t i = 0; i < NWANT; i++) {
		struct rlimit rl = { want[i].cur, want[i].max };

		if (setrlimit(want[i].res, &rl))
			oracle_die("setrlimit %s", want[i].name);
	}
	for (int r = 0; r < RLIM_NLIMITS; r++)
		getrlimit(r, &at_ready[r]);
	for (size_t i = 0; i < NWANT; i++)
		if (at_ready[want[i].res].rlim_cur != want[i].cur ||
		    at_ready[want[i].res].rlim_max != want[i].max)
			oracle_die("RLIMIT_%s did not take", want[i].name);

	oracle_ready();
	oracle_wait(check, 50);
	check();
	/* Enforced: descriptors 0..NOFILE_SOFT-1 can exist, no more. */
	for (n = 0; n <= NOFILE_SOFT; n++) {
		fds[n] = dup(0);
		if (fds[n] < 0)
			break;
	}
	if (n == 0 || fds[n - 1] != NOFILE_SOFT - 1 || n > NOFILE_SOFT || errno != EMFILE)
		oracle_fail("RLIMIT_NOFILE not enforced at %d (highest fd %d)", NOFILE_SOFT,
			    n ? fds[n - 1] : -1);
	while (n-- > 0)
		close(fds[n]);
	oracle_finish();
}
