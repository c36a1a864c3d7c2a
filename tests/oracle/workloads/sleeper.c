// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-sleeper: a process asleep in the kernel. It cycles through four
 * ways to sleep 300 ms, each restarted differently by the kernel after an
 * interruption: nanosleep (restart_syscall with the remaining time),
 * clock_nanosleep with an absolute CLOCK_MONOTONIC deadline, poll with a
 * timeout, and select with a timeout. The checkpoint lands in one of them.
 * No sleep may end early (ghost restarts a relative sleep with its full
 * duration, which is late but allowed) and none may fail with EINTR unless
 * SIGTERM came (no handler ran, so the interruption must be invisible).
 */
#include <poll.h>
#include <sys/select.h>

#include "oracle.h"

#define SLEEP_NS 300000000L

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *const kinds[] = { "nanosleep", "clock_nanosleep(ABSTIME)", "poll",
				     "select" };

/* One sleep of the given kind; returns 0 if it completed. */
static int sleep_once(int kind)
{
	struct timespec rel = { 0, SLEEP_NS }, abs;
	struct timeval tv = { 0, SLEEP_NS / 1000 };
	int r;

	switch (kind) {
	case 0:
		return nanosleep(&rel, NULL);
	case 1:
		clock_gettime(CLOCK_MONOTONIC, &abs);
		abs.tv_nsec += SLEEP_NS;
		if (abs.tv_nsec >= 1000000000L) {
			abs.tv_sec++;
			abs.tv_nsec -= 1000000000L;
		}
		r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL);
		errno = r;
		return r ? -1 : 0;
	case 2:
		r = poll(NULL, 0, SLEEP_NS / 1000000);
		return r == 0 ? 0 : -1;
	default:
		r = select(0, NULL, NULL, NULL, &tv);
		return r == 0 ? 0 : -1;
	}
}

int main(int argc, char **argv)
{
	unsigned long rounds = 0;

	oracle_init(argc, argv);
	oracle_ready();
	while (!oracle_stop) {
		int kind = rounds++ % 4;
		double t0 = now_s(), slept;
		int r = sleep_once(kind);

		slept = now_s() - t0;
		if (r == 0 && slept < SLEEP_NS / 1e9 - 0.001)
			oracle_fail("%s returned after %.3f s of %.3f", kinds[kind], slept,
				    SLEEP_NS / 1e9);
		if (r && (errno != EINTR || !oracle_stop))
			oracle_fail("%s failed: %s", kinds[kind], strerror(errno));
	}
	oracle_phase = "final";
	if (rounds < 2)
		oracle_fail("only %lu sleeps", rounds);
	oracle_finish();
}
