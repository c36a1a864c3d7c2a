// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-rlimits: resource limits. Soft and hard limits of most resources
 * are moved away from their defaults (some raised above them, which needs
 * root as the VM runs the workloads). After the restore getrlimit must
 * report all sixteen exactly as before, and the open-files limit must be
 * enforced where it was set.
 *
 * Raising a hard limit needs CAP_SYS_RESOURCE, which root in a container
 * may lack (the development host, where the user engine runs natively):
 * there a hard limit that cannot be raised stays where it is, and the log
 * says so. Every other limit is set as in the VM.
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
static struct rlimit set[NWANT];	/* what was set: want[], or kept */

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
		struct rlimit old;

		set[i] = (struct rlimit){ want[i].cur, want[i].max };
		if (!setrlimit(want[i].res, &set[i]))
			continue;
		if (errno != EPERM || getrlimit(want[i].res, &old) ||
		    old.rlim_max >= want[i].max)
			oracle_die("setrlimit %s", want[i].name);
		set[i].rlim_max = old.rlim_max;
		if (set[i].rlim_cur > old.rlim_max)
			set[i].rlim_cur = old.rlim_max;
		if (setrlimit(want[i].res, &set[i]))
			oracle_die("setrlimit %s (hard limit kept)", want[i].name);
		printf("RLIMIT_%s: hard limit kept at %lu, not raised to %lu (no CAP_SYS_RESOURCE)\n",
		       want[i].name, (unsigned long)old.rlim_max, (unsigned long)want[i].max);
	}
	for (int r = 0; r < RLIM_NLIMITS; r++)
		getrlimit(r, &at_ready[r]);
	for (size_t i = 0; i < NWANT; i++)
		if (at_ready[want[i].res].rlim_cur != set[i].rlim_cur ||
		    at_ready[want[i].res].rlim_max != set[i].rlim_max)
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
