// SPDX-License-Identifier: GPL-2.0
/*
 * Rebuilding the calling process from a staged image, past the point of no
 * return (the caller is killed if anything here fails).
 *
 * Only exported interfaces are used: vm_munmap()/vm_mmap() for the address
 * space, get_user_pages_remote() on our own mm for page contents,
 * close_fd()/get_unused_fd_flags()/fd_install() for descriptors,
 * sigprocmask() and send_sig_info() for signals. The rest are plain fields of
 * current, written under the locks their own system calls take (the
 * working directory as set_fs_pwd() does, the comm as set_task_comm()).
 */
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/fs_struct.h>
#include <linux/highmem.h>
#include <linux/mman.h>
#include <linux/mm.h>
#include <linux/rseq.h>
#include <linux/sched/mm.h>
#include <linux/sched/task_stack.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <asm/fpu/api.h>
#include <asm/fpu/types.h>
#include <asm/fsgsbase.h>
#include <asm/pkru.h>
#include <asm/segment.h>
#include <linux/ghost.h>
#include <ghost_policy.h>

#include "compat.h"
#include "import.h"

/* ---- memory --------------------------------------------------------------- */

bool ghost_vma_is_vdso(struct vm_area_struct *vma)
{
	const char *n = ghost_vma_special_name(vma);

	return n && (!strcmp(n, "[vdso]") || !strcmp(n, "[vvar]"));
}

/* Unmaps everything but the vDSO (kept when the image has one too). */
static int unmap_all(struct mm_struct *mm, bool keep_vdso)
{
	unsigned long from = 0;

	for (;;) {
		struct vm_area_struct *vma;
		unsigned long start = 0, len = 0;
		int err;

		mmap_read_lock(mm);
		{
			VMA_ITERATOR(vmi, mm, from);

			for_each_vma(vmi, vma) {
				if (keep_vdso && ghost_vma_is_vdso(vma))
					continue;
				start = vma->vm_start;
				len = vma->vm_end - start;
				break;
			}
		}
		mmap_read_unlock(mm);
		if (!len)
			return 0;
		err = vm_munmap(start, len);
		if (err)
			return err;
		from = start + len;
	}
}

/*
 * A run's pages are filled a batch at a time: get_user_pages_remote() on
 * our own mm faults the batch of the new mapping in with one call (no
 * exception taken per page, which under emulation costs more than the
 * copy), and the staged pages are copied into them. Read-only private
 * mappings are written the way a debugger would (FOLL_FORCE), as
 * access_process_vm() does; written pages of shared mappings are dirtied.
 * With GHOST_IMPORT_DIRECT (@late) the batch is read into them from the
 * image file instead.
 */
static int fill_run(const struct ghost_vma *v, const struct staged_run *run,
		    struct ghost_late *late)
{
	unsigned int flags = FOLL_WRITE | ((v->prot & PROT_WRITE) ? 0 : FOLL_FORCE);
	struct mm_struct *mm = current->mm;
	struct page *pages[GHOST_PAGE_BATCH];
	unsigned long done = 0;
	int err;

	while (done < run->nr_pages) {
		unsigned long n = min_t(unsigned long, run->nr_pages - done,
					GHOST_PAGE_BATCH);
		long got, i;

		mmap_read_lock(mm);
		got = ghost_gup_remote(mm, run->addr + done * PAGE_SIZE, n,
				       flags, pages);
		mmap_read_unlock(mm);
		if (got <= 0)
			return got ? got : -EFAULT;
		err = late ? ghost_late_read(late, run, done, pages, got) : 0;
		for (i = 0; i < got; i++) {
			if (!late)
				copy_highpage(pages[i], run->pages[done + i]);
			if (!PageAnon(pages[i]))
				set_page_dirty_lock(pages[i]);
			put_page(pages[i]);
		}
		if (err)
			return err;
		done += got;
	}
	return 0;
}

static int map_vma(const struct staged_vma *sv, struct ghost_late *late)
{
	const struct ghost_vma *v = &sv->v;
	unsigned long flags = MAP_FIXED, addr;
	unsigned int r;
	int err;

	flags |= (v->flags & GHOST_VMA_SHARED) ? MAP_SHARED : MAP_PRIVATE;
	if (!sv->file)
		flags |= MAP_ANONYMOUS;
	if (v->flags & GHOST_VMA_GROWSDOWN)
		flags |= MAP_GROWSDOWN;
	addr = ghost_vm_mmap(sv->file, v, flags);	/* with its attributes */
	if (IS_ERR_VALUE(addr))
		return addr;
	if (addr != v->start)
		return -EFAULT;

	for (r = 0; r < sv->nr_runs; r++) {
		err = fill_run(v, &sv->runs[r], late);
		if (err)
			return err;
	}
	return 0;
}

static int restore_mm(struct ghost_staged *st)
{
	struct ghost_late *late = st->late;
	struct mm_struct *mm = current->mm;
	const struct ghost_mm *m = &st->mm;
	unsigned int i;
	int err;

	err = unmap_all(mm, ghost_staged_vma(st, GHOST_VMA_VDSO));
	if (err)
		return err;
	for (i = 0; i < st->nr_vmas; i++) {
		if (st->vmas[i].v.flags & (GHOST_VMA_VDSO | GHOST_VMA_VVAR))
			continue;
		err = map_vma(&st->vmas[i], late);
		if (err)
			return err;
	}
	/* Before a descriptor changes: the caller's parent sees it die. */
	err = late ? ghost_late_end(late, st) : 0;
	if (err)
		return err;

	mmap_write_lock(mm);
	/* prctl(PR_SET_MM_MAP)'s locks: /proc/PID/cmdline reads under arg_lock */
	spin_lock(&mm->arg_lock);
	mm->start_code = m->start_code;
	mm->end_code = m->end_code;
	mm->start_data = m->start_data;
	mm->end_data = m->end_data;
	mm->start_brk = m->start_brk;
	mm->brk = m->brk;
	mm->start_stack = m->start_stack;
	mm->arg_start = m->arg_start;
	mm->arg_end = m->arg_end;
	mm->env_start = m->env_start;
	mm->env_end = m->env_end;
	spin_unlock(&mm->arg_lock);
	memset(mm->saved_auxv, 0, sizeof(mm->saved_auxv));
	memcpy(mm->saved_auxv, m->auxv, m->auxv_words * sizeof(m->auxv[0]));
	mmap_write_unlock(mm);
	return 0;
}

/* ---- descriptors ---------------------------------------------------------- */

/*
 * Every descriptor that is not inherited is closed; then the image's are
 * installed in ascending order. get_unused_fd_flags() hands out the lowest
 * free number, so gaps are filled with placeholders, closed at the end.
 */
static int restore_files(struct ghost_staged *st, struct file *self)
{
	unsigned int fd, max, i;
	int err = 0, n;

	rcu_read_lock();
	max = files_fdtable(current->files)->max_fds;
	rcu_read_unlock();
	/* st->files is in ascending fd order (stage_file() checks it). */
	for (fd = 0, i = 0; fd < max; fd++) {
		while (i < st->nr_files && st->files[i].f.fd < fd)
			i++;
		if (i == st->nr_files || st->files[i].f.fd != fd ||
		    st->files[i].f.kind != GHOST_FILE_INHERIT)
			close_fd(fd);
		if (!(fd % 1024))
			cond_resched();	/* up to GHOST_MAX_FD of them */
	}

	for (i = 0; i < st->nr_files && !err; i++) {
		struct staged_file *sf = &st->files[i];
		int flags = (sf->f.fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0;

		if (sf->f.kind == GHOST_FILE_INHERIT)
			continue;
		for (;;) {
			n = get_unused_fd_flags(flags);
			if (n < 0 || n >= sf->f.fd)
				break;
			fd_install(n, get_file(self));		/* a gap */
		}
		if (n != sf->f.fd) {
			if (n >= 0)
				put_unused_fd(n);
			err = n < 0 ? n : -EBUSY;
			break;
		}
		fd_install(n, sf->file);
		sf->file = NULL;
		cond_resched();
	}

	/*
	 * Close the placeholders, up to the table's size now: installing high
	 * descriptors grew it past @max.
	 */
	rcu_read_lock();
	max = files_fdtable(current->files)->max_fds;
	rcu_read_unlock();
	for (fd = 0; fd < max; fd++) {
		struct file *f = fget(fd);

		if (f == self)
			close_fd(fd);
		if (f)
			fput(f);
		if (!(fd % 1024))
			cond_resched();
	}
	return err;
}

/* ---- the rest of the task ------------------------------------------------- */

static void restore_fs(struct ghost_staged *st)
{
	struct fs_struct *fs = current->fs;
	struct path old;

	/* As set_fs_pwd(), which is not exported; st->cwd's reference moves. */
	spin_lock(&fs->lock);
	write_seqcount_begin(&fs->seq);
	old = fs->pwd;
	fs->pwd = st->cwd;
	write_seqcount_end(&fs->seq);
	spin_unlock(&fs->lock);
	st->cwd.dentry = NULL;
	path_put(&old);
	fs->umask = st->umask;
}

static void restore_limits(const struct ghost_staged *st)
{
	struct task_struct *leader = current->group_leader;
	int i;

	task_lock(leader);
	for (i = 0; i < GHOST_NRLIMITS; i++) {
		current->signal->rlim[i].rlim_cur = st->rlim.rlim[i].cur;
		current->signal->rlim[i].rlim_max = st->rlim.rlim[i].max;
	}
	task_unlock(leader);
}

static void restore_task(const struct ghost_staged *st)
{
	const struct ghost_task *t = &st->task;

	task_lock(current);
	strscpy_pad(current->comm, t->comm, sizeof(current->comm));
	task_unlock(current);
	current->personality = t->personality;
	current->clear_child_tid = (int __user *)(unsigned long)t->clear_child_tid;
	current->robust_list = (void __user *)(unsigned long)t->robust_list;
#ifdef CONFIG_RSEQ
	current->rseq = (struct rseq __user *)(unsigned long)t->rseq;
	current->rseq_sig = t->rseq_sig;
	ghost_set_rseq_len(current, t->rseq_len);
	current->rseq_event_mask = 0;
	rseq_set_notify_resume(current);	/* refresh cpu_id on the way out */
#endif
}

static void restore_signals(const struct ghost_staged *st)
{
	const struct ghost_signals *sg = st->sig;
	sigset_t blocked;
	int i;

	spin_lock_irq(&current->sighand->siglock);
	for (i = 0; i < GHOST_NSIG; i++) {
		struct sigaction *k = &current->sighand->action[i].sa;
		const struct ghost_sigaction *a = &sg->action[i];

		k->sa_handler = (__sighandler_t)(unsigned long)a->handler;
		k->sa_flags = a->flags;
		k->sa_restorer = (__sigrestore_t)(unsigned long)a->restorer;
		k->sa_mask.sig[0] = a->mask & ~(sigmask(SIGKILL) | sigmask(SIGSTOP));
	}
	/*
	 * As sigaltstack(2) with SS_DISABLE: no stack. The kernel takes any
	 * non-zero size for an enabled stack, whatever the flags say.
	 */
	if (sg->altstack_flags & GHOST_SS_DISABLE) {
		current->sas_ss_sp = 0;
		current->sas_ss_size = 0;
		current->sas_ss_flags = GHOST_SS_DISABLE;
	} else {
		current->sas_ss_sp = sg->altstack_sp;
		current->sas_ss_size = sg->altstack_size;
		current->sas_ss_flags = sg->altstack_flags;
	}
	spin_unlock_irq(&current->sighand->siglock);

	flush_signals(current);
	/*
	 * A kill that reached the importer during the import must still kill
	 * it. The flush dropped its pending bit, and a second SIGKILL would be
	 * ignored for a group already exiting, so put the bit back the way
	 * complete_signal() sets it.
	 */
	spin_lock_irq(&current->sighand->siglock);
	if (current->signal->flags & SIGNAL_GROUP_EXIT) {
		sigaddset(&current->pending.signal, SIGKILL);
		set_tsk_thread_flag(current, TIF_SIGPENDING);
	}
	spin_unlock_irq(&current->sighand->siglock);
	/* as rt_sigprocmask(2) does: SIGKILL and SIGSTOP are never blocked */
	blocked.sig[0] = sg->blocked & ~(sigmask(SIGKILL) | sigmask(SIGSTOP));
	sigprocmask(SIG_SETMASK, &blocked, NULL);
	for (i = 1; i < SIGRTMIN; i++)
		if (sg->pending & sigmask(i))
			send_sig_info(i, SEND_SIG_PRIV, current);
}

static void restore_cpu(const struct ghost_staged *st)
{
	struct fpstate *fp = current->thread.fpu.fpstate;
	struct pt_regs *regs = task_pt_regs(current);
	const struct ghost_regs *r = &st->regs;

	/*
	 * The validated state replaces the saved user FPU state; with
	 * TIF_NEED_FPU_LOAD set by kernel_fpu_begin, the exit to user mode
	 * loads it.
	 */
	kernel_fpu_begin_mask(0);
	memcpy(&fp->regs, &st->fp->regs, fp->size);
	kernel_fpu_end();
#ifdef CONFIG_X86_INTEL_MEMORY_PROTECTION_KEYS
	if (st->has_pkru) {
		current->thread.pkru = st->pkru;
		write_pkru(st->pkru);
	}
#endif

	regs->r15 = r->r15;
	regs->r14 = r->r14;
	regs->r13 = r->r13;
	regs->r12 = r->r12;
	regs->bp = r->bp;
	regs->bx = r->bx;
	regs->r11 = r->r11;
	regs->r10 = r->r10;
	regs->r9 = r->r9;
	regs->r8 = r->r8;
	regs->ax = r->ax;
	regs->cx = r->cx;
	regs->dx = r->dx;
	regs->si = r->si;
	regs->di = r->di;
	regs->ip = r->ip;
	regs->sp = r->sp;
	regs->flags = (regs->flags & ~GHOST_USER_EFLAGS) |
		      (r->flags & GHOST_USER_EFLAGS);
	/* Not in a system call any more: no restart on the way out. */
	regs->orig_ax = -1;

	/* fs and gs bases, as arch_prctl(ARCH_SET_FS/GS) does for current. */
	preempt_disable();
	loadsegment(fs, 0);
	x86_fsbase_write_cpu(r->fs_base);
	current->thread.fsindex = 0;
	current->thread.fsbase = r->fs_base;
	wrmsrl(MSR_KERNEL_GS_BASE, r->gs_base);	/* user gs while in kernel */
	current->thread.gsbase = r->gs_base;
	preempt_enable();
}

int ghost_restore(struct ghost_staged *st, struct file *self)
{
	int err;

	ghost_restore_dumpable(st);
	err = restore_mm(st);
	if (err)
		return err;
	/*
	 * Descriptors are installed under whichever RLIMIT_NOFILE admits the
	 * highest one (stage.c checked that one does): the image's may be
	 * below it, since lowering the limit closes nothing.
	 */
	if (st->fd_end <= st->rlim.rlim[RLIMIT_NOFILE].cur)
		restore_limits(st);
	err = restore_files(st, self);
	if (!err)	/* POSIX locks after the last close of the caller's */
		err = ghost_restore_locks(st);
	if (err)
		return err;
	restore_limits(st);
	restore_fs(st);
	restore_task(st);
	ghost_restore_attrs(st);
	restore_signals(st);
	restore_cpu(st);
	return 0;
}
