// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-sigaction: signal dispositions. Handlers with different flags
 * (SA_SIGINFO, SA_RESTART, SA_NODEFER, SA_RESETHAND, SA_NOCLDSTOP) and
 * masks, ignored signals, a real-time signal's handler, and defaults left
 * alone. What sigaction(2) reports for every signal must be the same after
 * the restore, and in the end each handler really runs — with its mask in
 * effect, and SA_RESETHAND resetting.
 */
#include "oracle.h"

static volatile sig_atomic_t hits[65];
static volatile sig_atomic_t mask_ok[65];
static struct sigaction before[65];

static void on_sig(int sig)
{
	sigset_t cur;

	hits[sig]++;
	/* The handler's sa_mask is blocked while it runs. */
	sigprocmask(SIG_BLOCK, NULL, &cur);
	mask_ok[sig] = sig == SIGUSR1 ? sigismember(&cur, SIGINT) && sigismember(&cur, SIGQUIT) :
		       sig == SIGHUP ? !sigismember(&cur, SIGHUP) /* SA_NODEFER */ : 1;
}

static void on_info(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (si->si_signo == sig)
		hits[sig]++;
}

static void set(int sig, void (*h)(int), void (*sa)(int, siginfo_t *, void *),
		int flags, int mask1, int mask2)
{
	struct sigaction act = { .sa_flags = flags };

	if (sa)
		act.sa_sigaction = sa;
	else
		act.sa_handler = h;
	sigemptyset(&act.sa_mask);
	if (mask1)
		sigaddset(&act.sa_mask, mask1);
	if (mask2)
		sigaddset(&act.sa_mask, mask2);
	if (sigaction(sig, &act, NULL))
		oracle_die("sigaction %d", sig);
}

static int same(const struct sigaction *a, const struct sigaction *b)
{
	return a->sa_handler == b->sa_handler && a->sa_flags == b->sa_flags &&
	       !memcmp(&a->sa_mask, &b->sa_mask, 8);	/* the kernel's 64 signals */
}

static void check(void)
{
	for (int sig = 1; sig < 65; sig++) {
		struct sigaction now;

		if (sig == SIGKILL || sig == SIGSTOP || (sig > 31 && sig < SIGRTMIN))
			continue;
		if (sigaction(sig, NULL, &now)) {
			oracle_fail("sigaction(%d) failed", sig);
			continue;
		}
		if (!same(&now, &before[sig]))
			oracle_fail("signal %d: handler %p flags %#x, was %p flags %#x (or mask)",
				    sig, (void *)now.sa_handler, now.sa_flags,
				    (void *)before[sig].sa_handler, before[sig].sa_flags);
	}
}

int main(int argc, char **argv)
{
	oracle_init(argc, argv);

	set(SIGUSR1, on_sig, NULL, SA_RESTART, SIGINT, SIGQUIT);
	set(SIGUSR2, NULL, on_info, SA_SIGINFO, SIGUSR1, 0);
	set(SIGHUP, on_sig, NULL, SA_NODEFER | SA_RESETHAND, 0, 0);
	set(SIGCHLD, on_sig, NULL, SA_NOCLDSTOP | SA_RESTART, 0, 0);
	set(SIGRTMIN + 3, NULL, on_info, SA_SIGINFO | SA_RESTART, SIGRTMIN + 4, 0);
	set(SIGPIPE, SIG_IGN, NULL, 0, 0, 0);
	set(SIGWINCH, SIG_IGN, NULL, SA_RESTART, SIGUSR2, 0);
	for (int sig = 1; sig < 65; sig++)
		if (sigaction(sig, NULL, &before[sig]) && sig < 32 && sig != SIGKILL &&
		    sig != SIGSTOP)
			oracle_die("sigaction(%d, NULL)", sig);

	oracle_ready();
	oracle_wait(check, 50);
	check();

	raise(SIGUSR1);
	raise(SIGUSR2);
	raise(SIGHUP);
	raise(SIGCHLD);
	raise(SIGRTMIN + 3);
	raise(SIGPIPE);		/* ignored: must not kill */
	raise(SIGWINCH);
	if (hits[SIGUSR1] != 1 || !mask_ok[SIGUSR1])
		oracle_fail("SIGUSR1 handler: %d calls, mask right: %d", hits[SIGUSR1],
			    mask_ok[SIGUSR1]);
	if (hits[SIGUSR2] != 1)
		oracle_fail("SIGUSR2 SA_SIGINFO handler: %d calls", hits[SIGUSR2]);
	if (hits[SIGHUP] != 1 || !mask_ok[SIGHUP])
		oracle_fail("SIGHUP handler: %d calls, SA_NODEFER right: %d", hits[SIGHUP],
			    mask_ok[SIGHUP]);
	if (hits[SIGCHLD] != 1)
		oracle_fail("SIGCHLD handler: %d calls", hits[SIGCHLD]);
	if (hits[SIGRTMIN + 3] != 1)
		oracle_fail("SIGRTMIN+3 handler: %d calls", hits[SIGRTMIN + 3]);
	{
		struct sigaction now;

		sigaction(SIGHUP, NULL, &now);
		if (now.sa_handler != SIG_DFL)
			oracle_fail("SA_RESETHAND did not reset SIGHUP");
	}
	oracle_finish();
}
