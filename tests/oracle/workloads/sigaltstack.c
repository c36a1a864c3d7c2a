// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-sigaltstack: an alternate signal stack, and a checkpoint taken
 * while a handler runs on it. The workload raises SIGUSR1 (SA_ONSTACK) and
 * waits *inside the handler*, on the alternate stack, so the image holds a
 * live signal frame there. After SIGTERM the handler returns through that
 * frame (rt_sigreturn: registers, the mask of the interrupted code), then
 * main checks the altstack settings and that a new handler call runs on it.
 */
#include "oracle.h"

#define ALT_SIZE (64 * 1024)

static char *alt;
static volatile uintptr_t handler_sp;
static volatile sig_atomic_t in_handler, usr1_calls;
static volatile uint64_t canary = 0xCA11AB1E;

static int on_alt(uintptr_t sp)
{
	return sp >= (uintptr_t)alt && sp < (uintptr_t)alt + ALT_SIZE;
}

static void check_in_handler(void)
{
	stack_t ss;
	volatile char local;

	if (sigaltstack(NULL, &ss) || ss.ss_sp != alt || ss.ss_size != ALT_SIZE ||
	    !(ss.ss_flags & SS_ONSTACK))
		oracle_fail("in the handler: altstack %p size %zu flags %#x", ss.ss_sp,
			    ss.ss_size, ss.ss_flags);
	if (!on_alt((uintptr_t)&local))
		oracle_fail("the handler does not run on the alternate stack");
}

static void on_usr1(int sig)
{
	sigset_t cur;

	(void)sig;
	usr1_calls++;
	handler_sp = (uintptr_t)&cur;
	if (usr1_calls > 1)
		return;
	/* The first call waits here for the checkpoint and SIGTERM. */
	in_handler = 1;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	if (!sigismember(&cur, SIGUSR1) || !sigismember(&cur, SIGHUP))
		oracle_fail("handler mask lacks SIGUSR1 or SIGHUP");
	check_in_handler();
	oracle_ready();
	oracle_wait(check_in_handler, 50);
	check_in_handler();
	in_handler = 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_ONSTACK };
	stack_t ss;
	sigset_t cur;
	uint64_t main_pattern[64];

	oracle_init(argc, argv);
	alt = oracle_mmap(ALT_SIZE, PROT_READ | PROT_WRITE);
	ss = (stack_t){ .ss_sp = alt, .ss_size = ALT_SIZE };
	if (sigaltstack(&ss, NULL))
		oracle_die("sigaltstack");
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGHUP);
	sigaction(SIGUSR1, &sa, NULL);
	oracle_fill(main_pattern, sizeof(main_pattern), 0x3A);

	raise(SIGUSR1);		/* returns after the restore and SIGTERM */

	if (usr1_calls != 1 || in_handler)
		oracle_fail("handler state after return: %d calls, in handler %d",
			    usr1_calls, in_handler);
	if (oracle_check_fill(main_pattern, sizeof(main_pattern), 0x3A) >= 0 ||
	    canary != 0xCA11AB1E)
		oracle_fail("main's frame corrupted by the handler's return");
	sigprocmask(SIG_BLOCK, NULL, &cur);
	if (sigismember(&cur, SIGUSR1) || sigismember(&cur, SIGHUP))
		oracle_fail("rt_sigreturn did not restore main's signal mask");
	if (sigaltstack(NULL, &ss) || ss.ss_sp != alt || ss.ss_size != ALT_SIZE ||
	    ss.ss_flags != 0)
		oracle_fail("after the handler: altstack %p size %zu flags %#x", ss.ss_sp,
			    ss.ss_size, ss.ss_flags);
	raise(SIGUSR1);
	if (usr1_calls != 2 || !on_alt(handler_sp))
		oracle_fail("a new SIGUSR1 did not run on the alternate stack");
	oracle_finish();
}
