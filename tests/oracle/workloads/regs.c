// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-regs: general-purpose registers. An assembly loop loads ten
 * registers with distinct 64-bit values and checks them over and over
 * without touching them, with a 1 ms nanosleep now and then, so the
 * checkpoint catches the process either in user mode in the middle of the
 * loop or inside the system call. A register that changes is reported
 * with its value. rax, rcx, rdi, rsi and r11 are the loop's own scratch and
 * syscall registers and are not checked; rsp and rip are checked by the
 * program working at all.
 */
#include "oracle.h"

struct spin_state {
	uint64_t iterations;	/* 0 */
	uint64_t bad_reg;	/* 8: index into reg_names, when it fails */
	uint64_t bad_value;	/* 16 */
};

static const char *const reg_names[] = {
	"rbx", "rbp", "rdx", "r8", "r9", "r10", "r12", "r13", "r14", "r15",
};

int oracle_spin_regs(const volatile sig_atomic_t *stop, struct spin_state *st);

#define CHECK(reg, idx, val)					\
	"movabs $" val ", %rax\n\t"				\
	"cmp %rax, %" #reg "\n\t"				\
	"je 3f\n\t"						\
	"mov %" #reg ", %rax\n\t"				\
	"mov $" #idx ", %ecx\n\t"				\
	"jmp 8f\n"						\
	"3:\n\t"

#define LOAD(reg, val) "movabs $" val ", %" #reg "\n\t"

#define R_RBX 0x1111111111111111
#define R_RBP 0x2222222222222222
#define R_RDX 0x3333333333333333
#define R_R8  0x4444444444444444
#define R_R9  0x5555555555555555
#define R_R10 0x6666666666666666
#define R_R12 0x7777777777777777
#define R_R13 0x0123456789abcdef
#define R_R14 0x7edcba9876543210
#define R_R15 0x0f0e0d0c0b0a0908
#define STR(x) STR2(x)
#define STR2(x) #x

/*
 * int oracle_spin_regs(stop, st): 0 when *stop became non-zero with every
 * register intact, 1 with st->bad_* filled in.
 * Stack: 0 stop, 8 st, 16 struct timespec {0, 1 ms}.
 */
__asm__(
	".text\n"
	".globl oracle_spin_regs\n"
	".type oracle_spin_regs, @function\n"
	"oracle_spin_regs:\n\t"
	"push %rbx\n\tpush %rbp\n\tpush %r12\n\tpush %r13\n\tpush %r14\n\tpush %r15\n\t"
	"sub $40, %rsp\n\t"
	"mov %rdi, 0(%rsp)\n\t"
	"mov %rsi, 8(%rsp)\n\t"
	"movq $0, 16(%rsp)\n\t"
	"movq $1000000, 24(%rsp)\n\t"
	LOAD(rbx, STR(R_RBX)) LOAD(rbp, STR(R_RBP)) LOAD(rdx, STR(R_RDX))
	LOAD(r8, STR(R_R8)) LOAD(r9, STR(R_R9)) LOAD(r10, STR(R_R10))
	LOAD(r12, STR(R_R12)) LOAD(r13, STR(R_R13)) LOAD(r14, STR(R_R14))
	LOAD(r15, STR(R_R15))
	"1:\n\t"
	"mov $20000, %r11d\n"
	"2:\n\t"
	CHECK(rbx, 0, STR(R_RBX)) CHECK(rbp, 1, STR(R_RBP)) CHECK(rdx, 2, STR(R_RDX))
	CHECK(r8, 3, STR(R_R8)) CHECK(r9, 4, STR(R_R9)) CHECK(r10, 5, STR(R_R10))
	CHECK(r12, 6, STR(R_R12)) CHECK(r13, 7, STR(R_R13)) CHECK(r14, 8, STR(R_R14))
	CHECK(r15, 9, STR(R_R15))
	"dec %r11d\n\t"
	"jnz 2b\n\t"
	"mov 8(%rsp), %rax\n\t"
	"incq 0(%rax)\n\t"
	"mov 0(%rsp), %rax\n\t"
	"cmpl $0, (%rax)\n\t"
	"jne 9f\n\t"
	"lea 16(%rsp), %rdi\n\t"	/* nanosleep(&ts, NULL) */
	"xor %esi, %esi\n\t"
	"mov $35, %eax\n\t"
	"syscall\n\t"
	"jmp 1b\n"
	"8:\n\t"			/* bad: index in ecx, value in rax */
	"mov 8(%rsp), %rsi\n\t"
	"mov %rcx, 8(%rsi)\n\t"
	"mov %rax, 16(%rsi)\n\t"
	"mov $1, %eax\n\t"
	"jmp 10f\n"
	"9:\n\t"
	"xor %eax, %eax\n"
	"10:\n\t"
	"add $40, %rsp\n\t"
	"pop %r15\n\tpop %r14\n\tpop %r13\n\tpop %r12\n\tpop %rbp\n\tpop %rbx\n\t"
	"ret\n"
	".size oracle_spin_regs, .-oracle_spin_regs\n");

int main(int argc, char **argv)
{
	struct spin_state st = { 0 };

	oracle_init(argc, argv);
	oracle_ready();
	if (oracle_spin_regs(&oracle_stop, &st))
		oracle_fail("%s holds %#lx", reg_names[st.bad_reg], (unsigned long)st.bad_value);
	oracle_phase = "final";
	if (!st.iterations)
		oracle_fail("the register loop never completed a round");
	oracle_finish();
}
