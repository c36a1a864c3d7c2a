// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-avx: FPU, SSE and AVX state. An assembly loop loads all sixteen
 * ymm registers (upper halves included), a non-default MXCSR (round down,
 * flush to zero) and x87 control word (53-bit precision, round up), and
 * three values on the x87 register stack; it stores and compares the
 * vector registers and control words against the expected values over and
 * over without a system call, so the checkpoint interrupts it in user mode
 * with all of that state live. The x87 stack is popped and compared at the
 * end, after the restore.
 */
#include "oracle.h"

struct avx_state {
	uint64_t want[64];	/* 0: ymm0..ymm15 */
	uint64_t got[64];	/* 512 */
	uint32_t mxcsr_want;	/* 1024 */
	uint32_t mxcsr_got;	/* 1028 */
	uint16_t fcw_want;	/* 1032 */
	uint16_t fcw_got;	/* 1034 */
	uint32_t bad;		/* 1036: 1 + word index, 100 mxcsr, 101 fcw */
	uint64_t iterations;	/* 1040 */
	double x87_want[3];	/* 1048 */
	double x87_got[3];	/* 1072 */
};

_Static_assert(__builtin_offsetof(struct avx_state, x87_got) == 1072, "layout");

int oracle_spin_avx(const volatile sig_atomic_t *stop, struct avx_state *st);

#define YMM_LOAD(n) "vmovdqu " #n "*32(%r13), %ymm" #n "\n\t"
#define YMM_STORE(n) "vmovdqu %ymm" #n ", 512+" #n "*32(%r13)\n\t"

__asm__(
	".text\n"
	".globl oracle_spin_avx\n"
	".type oracle_spin_avx, @function\n"
	"oracle_spin_avx:\n\t"
	"push %r12\n\tpush %r13\n\tpush %r14\n\t"
	"mov %rdi, %r12\n\t"
	"mov %rsi, %r13\n\t"
	YMM_LOAD(0) YMM_LOAD(1) YMM_LOAD(2) YMM_LOAD(3) YMM_LOAD(4) YMM_LOAD(5)
	YMM_LOAD(6) YMM_LOAD(7) YMM_LOAD(8) YMM_LOAD(9) YMM_LOAD(10) YMM_LOAD(11)
	YMM_LOAD(12) YMM_LOAD(13) YMM_LOAD(14) YMM_LOAD(15)
	"ldmxcsr 1024(%r13)\n\t"
	"fldcw 1032(%r13)\n\t"
	"fldl 1064(%r13)\n\t"		/* st2 after the next two loads */
	"fldl 1056(%r13)\n\t"
	"fldl 1048(%r13)\n\t"		/* st0 */
	"1:\n\t"
	"mov $2000, %r14d\n"
	"2:\n\t"
	YMM_STORE(0) YMM_STORE(1) YMM_STORE(2) YMM_STORE(3) YMM_STORE(4) YMM_STORE(5)
	YMM_STORE(6) YMM_STORE(7) YMM_STORE(8) YMM_STORE(9) YMM_STORE(10) YMM_STORE(11)
	YMM_STORE(12) YMM_STORE(13) YMM_STORE(14) YMM_STORE(15)
	"xor %ecx, %ecx\n"
	"3:\n\t"
	"mov 0(%r13,%rcx,8), %rax\n\t"
	"cmp 512(%r13,%rcx,8), %rax\n\t"
	"jne 7f\n\t"
	"inc %ecx\n\t"
	"cmp $64, %ecx\n\t"
	"jne 3b\n\t"
	"stmxcsr 1028(%r13)\n\t"
	"mov 1028(%r13), %eax\n\t"
	"cmp 1024(%r13), %eax\n\t"
	"mov $99, %ecx\n\t"		/* reported as 100 */
	"jne 7f\n\t"
	"fnstcw 1034(%r13)\n\t"
	"movzwl 1034(%r13), %eax\n\t"
	"movzwl 1032(%r13), %edx\n\t"
	"cmp %edx, %eax\n\t"
	"mov $100, %ecx\n\t"		/* reported as 101 */
	"jne 7f\n\t"
	"dec %r14d\n\t"
	"jnz 2b\n\t"
	"incq 1040(%r13)\n\t"
	"cmpl $0, (%r12)\n\t"
	"jne 8f\n\t"
	"jmp 1b\n"
	"7:\n\t"
	"inc %ecx\n\t"
	"mov %ecx, 1036(%r13)\n\t"
	"mov $1, %eax\n\t"
	"jmp 9f\n"
	"8:\n\t"
	"xor %eax, %eax\n"
	"9:\n\t"
	"fstpl 1072(%r13)\n\t"		/* the x87 stack must be empty on return */
	"fstpl 1080(%r13)\n\t"
	"fstpl 1088(%r13)\n\t"
	"vzeroupper\n\t"
	"pop %r14\n\tpop %r13\n\tpop %r12\n\t"
	"ret\n"
	".size oracle_spin_avx, .-oracle_spin_avx\n");

static struct avx_state st __attribute__((aligned(64)));

int main(int argc, char **argv)
{
	uint32_t mxcsr;
	uint16_t fcw;

	oracle_init(argc, argv);
	if (!__builtin_cpu_supports("avx"))
		oracle_die("this CPU has no AVX");
	for (int i = 0; i < 64; i++)
		st.want[i] = oracle_pat(i, 0xA7C);
	st.mxcsr_want = 0x3F80 | 0x8000;	/* masked, round down, FTZ */
	st.fcw_want = 0x0A7F;			/* masked, double precision, round up */
	st.x87_want[0] = 1.5;
	st.x87_want[1] = -2.25;
	st.x87_want[2] = 3.125e10;

	oracle_ready();
	if (oracle_spin_avx(&oracle_stop, &st)) {
		if (st.bad == 100)
			oracle_fail("MXCSR is %#x, expected %#x", st.mxcsr_got, st.mxcsr_want);
		else if (st.bad == 101)
			oracle_fail("x87 control word is %#x, expected %#x", st.fcw_got,
				    st.fcw_want);
		else
			oracle_fail("ymm%u word %u is %#lx, expected %#lx", (st.bad - 1) / 4,
				    (st.bad - 1) % 4, (unsigned long)st.got[st.bad - 1],
				    (unsigned long)st.want[st.bad - 1]);
	}
	oracle_phase = "final";
	for (int i = 0; i < 3; i++)
		if (st.x87_got[i] != st.x87_want[i])
			oracle_fail("x87 st%d is %g, expected %g", i, st.x87_got[i],
				    st.x87_want[i]);
	if (!st.iterations)
		oracle_fail("the vector loop never completed a round");
	/* The control words were part of the restored state, not reset. */
	__asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fcw));
	if (mxcsr != st.mxcsr_want || fcw != st.fcw_want)
		oracle_fail("after the loop MXCSR %#x, FCW %#x", mxcsr, fcw);
	oracle_finish();
}
