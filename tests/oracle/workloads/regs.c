// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-regs: general-purpose registers. An assembly loop loads all fifteen
 * (rsp aside) with distinct 64-bit values and compares each against its
 * copy on the stack, over and over, with no system call in the loop: the
 * checkpoint must interrupt it in user mode, where nothing — not even the
 * registers a system call would clobber (rax, rcx, rdx, rsi, rdi, r8-r11) —
 * may change. A register that changes is reported with its value. (The
 * sleeper and pipe workloads are checkpointed inside system calls.)
 */
#include "oracle.h"

struct spin_state {
	uint64_t iterations;	/* 0 */
	uint64_t bad_reg;	/* 8: index into reg_names, when it fails */
	uint64_t bad_value;	/* 16 */
	uint64_t want[15];	/* 24: in reg_names order */
};

static const char *const reg_names[] = {
	"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8",
	"r9", "r10", "r11", "r12", "r13", "r14", "r15",
};

int oracle_spin_regs(const volatile sig_atomic_t *stop, struct spin_state *st);

/*
 * Stack frame: 0 stop, 8 st, 16 round counter, 24 bad value, 32 bad index,
 * 40 + 8 * i the value of register i.
 */
#define FRAME "168"
#define LOAD(reg, i) "mov 40+8*" #i "(%rsp), %" #reg "\n\t"
#define CHECK(reg, i) "cmp 40+8*" #i "(%rsp), %" #reg "\n\t" "jne .Lregs_bad_" #reg "\n\t"
#define BAD(reg, i)							\
	".Lregs_bad_" #reg ":\n\t"					\
	"mov %" #reg ", 24(%rsp)\n\t"					\
	"movq $" #i ", 32(%rsp)\n\t"					\
	"jmp .Lregs_fail\n"

__asm__(
	".text\n"
	".globl oracle_spin_regs\n"
	".type oracle_spin_regs, @function\n"
	"oracle_spin_regs:\n\t"
	"push %rbx\n\tpush %rbp\n\tpush %r12\n\tpush %r13\n\tpush %r14\n\tpush %r15\n\t"
	"sub $" FRAME ", %rsp\n\t"
	"mov %rdi, 0(%rsp)\n\t"
	"mov %rsi, 8(%rsp)\n\t"
	"xor %ecx, %ecx\n"
	"1:\n\t"
	"mov 24(%rsi,%rcx,8), %rax\n\t"
	"mov %rax, 40(%rsp,%rcx,8)\n\t"
	"inc %ecx\n\t"
	"cmp $15, %ecx\n\t"
	"jne 1b\n"
	"2:\n\t"
	"movq $20000, 16(%rsp)\n\t"
	LOAD(rax, 0) LOAD(rbx, 1) LOAD(rcx, 2) LOAD(rdx, 3) LOAD(rsi, 4) LOAD(rdi, 5)
	LOAD(rbp, 6) LOAD(r8, 7) LOAD(r9, 8) LOAD(r10, 9) LOAD(r11, 10) LOAD(r12, 11)
	LOAD(r13, 12) LOAD(r14, 13) LOAD(r15, 14)
	"3:\n\t"
	CHECK(rax, 0) CHECK(rbx, 1) CHECK(rcx, 2) CHECK(rdx, 3) CHECK(rsi, 4) CHECK(rdi, 5)
	CHECK(rbp, 6) CHECK(r8, 7) CHECK(r9, 8) CHECK(r10, 9) CHECK(r11, 10) CHECK(r12, 11)
	CHECK(r13, 12) CHECK(r14, 13) CHECK(r15, 14)
	"decq 16(%rsp)\n\t"
	"jnz 3b\n\t"
	"mov 8(%rsp), %rax\n\t"
	"incq 0(%rax)\n\t"		/* st->iterations */
	"mov 0(%rsp), %rax\n\t"
	"cmpl $0, (%rax)\n\t"		/* *stop */
	"je 2b\n\t"
	"xor %eax, %eax\n\t"
	"jmp .Lregs_out\n"
	BAD(rax, 0) BAD(rbx, 1) BAD(rcx, 2) BAD(rdx, 3) BAD(rsi, 4) BAD(rdi, 5)
	BAD(rbp, 6) BAD(r8, 7) BAD(r9, 8) BAD(r10, 9) BAD(r11, 10) BAD(r12, 11)
	BAD(r13, 12) BAD(r14, 13) BAD(r15, 14)
	".Lregs_fail:\n\t"
	"mov 8(%rsp), %rax\n\t"
	"mov 32(%rsp), %rcx\n\t"
	"mov %rcx, 8(%rax)\n\t"
	"mov 24(%rsp), %rcx\n\t"
	"mov %rcx, 16(%rax)\n\t"
	"mov $1, %eax\n"
	".Lregs_out:\n\t"
	"add $" FRAME ", %rsp\n\t"
	"pop %r15\n\tpop %r14\n\tpop %r13\n\tpop %r12\n\tpop %rbp\n\tpop %rbx\n\t"
	"ret\n"
	".size oracle_spin_regs, .-oracle_spin_regs\n");

int main(int argc, char **argv)
{
	struct spin_state st = { 0 };

	oracle_init(argc, argv);
	/* Every value uses all 64 bits: a register cut to 32 shows. */
	for (int i = 0; i < 15; i++)
		st.want[i] = oracle_pat(i, 0x5EC5) | (1ULL << 63) | (1ULL << 40);
	oracle_ready();
	if (oracle_spin_regs(&oracle_stop, &st))
		oracle_fail("%s holds %#lx, expected %#lx", reg_names[st.bad_reg],
			    (unsigned long)st.bad_value, (unsigned long)st.want[st.bad_reg]);
	oracle_phase = "final";
	if (!st.iterations)
		oracle_fail("the register loop never completed a round");
	oracle_finish();
}
