// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-tls: thread-local storage and the segment bases. Initialized and
 * zero-initialized __thread variables and a 4 KiB __thread buffer must keep
 * their addresses and values; the fs base must still point at the thread
 * control block (whose first word points to itself, as glibc sets it up);
 * and a gs base the program set itself (glibc does not use gs) must still
 * be there, reading through %gs must see the program's block.
 */
#include <asm/prctl.h>
#include <sys/syscall.h>

#include "oracle.h"

static __thread uint64_t tls_init = 0x7157715771577157ULL;
static __thread uint64_t tls_zero;
static __thread uint64_t tls_buf[512];

static uint64_t gs_block[8] __attribute__((aligned(64)));
static uintptr_t fs_at_ready, init_addr, buf_addr;

static uintptr_t get_base(int code)
{
	unsigned long v = 0;

	if (syscall(SYS_arch_prctl, code, &v))
		oracle_die("arch_prctl");
	return v;
}

static void check(void)
{
	uintptr_t fs = get_base(ARCH_GET_FS), gs = get_base(ARCH_GET_GS), self, through_gs;

	if (fs != fs_at_ready)
		oracle_fail("fs base is %#lx, was %#lx", (unsigned long)fs,
			    (unsigned long)fs_at_ready);
	__asm__ volatile("mov %%fs:0, %0" : "=r"(self));
	if (self != fs)
		oracle_fail("%%fs:0 is %#lx, expected the fs base %#lx",
			    (unsigned long)self, (unsigned long)fs);
	if (gs != (uintptr_t)gs_block)
		oracle_fail("gs base is %#lx, expected %p", (unsigned long)gs,
			    (void *)gs_block);
	__asm__ volatile("mov %%gs:8, %0" : "=r"(through_gs));
	if (through_gs != gs_block[1])
		oracle_fail("%%gs:8 reads %#lx, expected %#lx", (unsigned long)through_gs,
			    (unsigned long)gs_block[1]);
	if ((uintptr_t)&tls_init != init_addr || (uintptr_t)tls_buf != buf_addr)
		oracle_fail("TLS variables moved");
	if (tls_init != 0x7157715771577157ULL + 1)
		oracle_fail("initialized TLS variable is %#lx", (unsigned long)tls_init);
	if (tls_zero != 0xBEEF)
		oracle_fail("zero-initialized TLS variable is %#lx", (unsigned long)tls_zero);
	if (oracle_check_fill(tls_buf, sizeof(tls_buf), 0x715) >= 0)
		oracle_fail("TLS buffer corrupted");
}

int main(int argc, char **argv)
{
	oracle_init(argc, argv);
	tls_init++;
	tls_zero = 0xBEEF;
	oracle_fill(tls_buf, sizeof(tls_buf), 0x715);
	for (int i = 0; i < 8; i++)
		gs_block[i] = oracle_pat(i, 0x65);
	if (syscall(SYS_arch_prctl, ARCH_SET_GS, (unsigned long)gs_block))
		oracle_die("arch_prctl(ARCH_SET_GS)");
	fs_at_ready = get_base(ARCH_GET_FS);
	init_addr = (uintptr_t)&tls_init;
	buf_addr = (uintptr_t)tls_buf;

	check();
	oracle_ready();
	oracle_wait(check, 50);
	check();
	/* TLS is still writable through the fs base. */
	tls_buf[100] = 42;
	if (((volatile uint64_t *)buf_addr)[100] != 42)
		oracle_fail("write through TLS did not land in the TLS block");
	oracle_finish();
}
