// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-readonly: memory whose protection is not read-write. Pages written
 * and then made read-only (a write must still fault after the restore),
 * pages written and then made PROT_NONE (their contents must survive even
 * though the process cannot read them; the final check makes them readable
 * again), and machine code generated into a page that is then made
 * read+execute and called, before and after the restore.
 */
#include <setjmp.h>

#include "oracle.h"

#define RO_PAGES   8
#define NONE_PAGES 4

static char *ro, *none, *code;
static sigjmp_buf fault_jmp;
static volatile sig_atomic_t faults;

static void on_segv(int sig)
{
	(void)sig;
	faults++;
	siglongjmp(fault_jmp, 1);
}

/* 1 if writing to @p faults (and leaves it unchanged). */
static int write_faults(volatile char *p)
{
	int before = faults;

	if (!sigsetjmp(fault_jmp, 1))
		*p = 1;
	return faults == before + 1;
}

/* mov $imm32, %eax; ret */
static void emit(char *p, uint32_t v)
{
	p[0] = (char)0xb8;
	memcpy(p + 1, &v, 4);
	p[5] = (char)0xc3;
}

static void check(void)
{
	long off = oracle_check_fill(ro, RO_PAGES * PAGE, 0x40);

	if (off >= 0)
		oracle_fail("read-only region differs at +%ld", off);
	if (((uint32_t (*)(void))(void *)code)() != 0xC0DE0042)
		oracle_fail("generated code returned the wrong value");
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_segv, .sa_flags = SA_NODEFER };

	oracle_init(argc, argv);
	sigaction(SIGSEGV, &sa, NULL);

	ro = oracle_mmap(RO_PAGES * PAGE, PROT_READ | PROT_WRITE);
	oracle_fill(ro, RO_PAGES * PAGE, 0x40);
	none = oracle_mmap(NONE_PAGES * PAGE, PROT_READ | PROT_WRITE);
	oracle_fill(none, NONE_PAGES * PAGE, 0x4E);
	code = oracle_mmap(PAGE, PROT_READ | PROT_WRITE);
	emit(code, 0xC0DE0042);
	if (mprotect(ro, RO_PAGES * PAGE, PROT_READ) ||
	    mprotect(none, NONE_PAGES * PAGE, PROT_NONE) ||
	    mprotect(code, PAGE, PROT_READ | PROT_EXEC))
		oracle_die("mprotect");

	check();
	if (!write_faults(ro + 5))
		oracle_fail("write to a read-only page did not fault");
	oracle_ready();
	oracle_wait(check, 50);
	check();
	if (!write_faults(ro + PAGE + 5))
		oracle_fail("write to a read-only page did not fault after restore");
	if (!write_faults(code))
		oracle_fail("write to the code page did not fault after restore");
	if (mprotect(none, NONE_PAGES * PAGE, PROT_READ))
		oracle_die("mprotect none");
	{
		long off = oracle_check_fill(none, NONE_PAGES * PAGE, 0x4E);

		if (off >= 0)
			oracle_fail("PROT_NONE region lost its contents (differs at +%ld)", off);
	}
	oracle_finish();
}
