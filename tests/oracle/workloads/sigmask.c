// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-sigmask: the blocked mask and pending signals. Standard and
 * real-time signals are blocked; SIGUSR1 is pending for the thread
 * (raise) and SIGUSR2 for the process (kill), both blocked. After the
 * restore the mask must be the same, both signals still pending, and once
 * unblocked each handler must run exactly once. (Queued real-time signals
 * are outside ghost v1: export refuses them, so none is left pending here.)
 */
#include "oracle.h"

static volatile sig_atomic_t hits[65];
static sigset_t blocked;

static void on_sig(int sig)
{
	hits[sig]++;
}

static void check(void)
{
	sigset_t cur, pend;

	sigprocmask(SIG_BLOCK, NULL, &cur);
	for (int sig = 1; sig < 65; sig++)
		if (sig != 32 && sig != 33 && sigismember(&cur, sig) != sigismember(&blocked, sig))
			oracle_fail("signal %d is %s", sig,
				    sigismember(&cur, sig) ? "blocked" : "not blocked");
	sigpending(&pend);
	for (int sig = 1; sig < 65; sig++)
		if (sig != 32 && sig != 33 &&
		    sigismember(&pend, sig) != (sig == SIGUSR1 || sig == SIGUSR2))
			oracle_fail("signal %d is %spending", sig,
				    sigismember(&pend, sig) ? "" : "not ");
	if (hits[SIGUSR1] || hits[SIGUSR2])
		oracle_fail("a blocked signal was delivered");
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_sig };

	oracle_init(argc, argv);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	sigaction(SIGRTMIN + 2, &sa, NULL);

	sigemptyset(&blocked);
	sigaddset(&blocked, SIGUSR1);
	sigaddset(&blocked, SIGUSR2);
	sigaddset(&blocked, SIGHUP);
	sigaddset(&blocked, SIGALRM);
	sigaddset(&blocked, SIGRTMIN + 2);
	sigaddset(&blocked, SIGRTMAX);
	if (sigprocmask(SIG_SETMASK, &blocked, NULL))
		oracle_die("sigprocmask");
	raise(SIGUSR1);			/* pending for the thread */
	kill(getpid(), SIGUSR2);	/* pending for the process */

	check();
	oracle_ready();
	oracle_wait(check, 50);
	check();

	{
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);	/* delivers both now */
	}
	if (hits[SIGUSR1] != 1 || hits[SIGUSR2] != 1)
		oracle_fail("after unblocking: SIGUSR1 ran %d times, SIGUSR2 %d times",
			    hits[SIGUSR1], hits[SIGUSR2]);
	raise(SIGRTMIN + 2);
	if (hits[SIGRTMIN + 2] != 1)
		oracle_fail("SIGRTMIN+2 handler ran %d times", hits[SIGRTMIN + 2]);
	oracle_finish();
}
