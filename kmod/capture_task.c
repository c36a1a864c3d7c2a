// SPDX-License-Identifier: GPL-2.0
/*
 * The image of a parked process: header, task, registers, FPU, signals,
 * working directory, limits; memory and files come from capture_mm.c and
 * capture_files.c. Everything that would make the image restore wrong is
 * refused first, with a reason, before a byte is written.
 */
#include <linux/fs_struct.h>
#include <linux/futex.h>
#include <linux/hrtimer.h>
#include <linux/mm.h>
#include <linux/personality.h>
#include <linux/resource.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <linux/ghost.h>
#include <ghost_policy.h>

#include "capture.h"
#include "compat.h"

/*
 * @task's signal handlers, locked, or NULL once it has been reaped: a
 * SIGKILL ends a target's park while its export goes on (export.c), and the
 * reaping clears task->sighand. __lock_task_sighand() is not exported; this
 * is its loop (the sighand cache is SLAB_TYPESAFE_BY_RCU).
 */
static struct sighand_struct *lock_sighand(struct task_struct *task,
					   unsigned long *flags)
{
	struct sighand_struct *sh;

	for (;;) {
		rcu_read_lock();
		sh = rcu_dereference(task->sighand);
		if (!sh) {
			rcu_read_unlock();
			return NULL;
		}
		spin_lock_irqsave(&sh->siglock, *flags);
		if (likely(sh == rcu_access_pointer(task->sighand))) {
			rcu_read_unlock();
			return sh;
		}
		spin_unlock_irqrestore(&sh->siglock, *flags);
		rcu_read_unlock();
	}
}

static int gone(struct task_struct *task, char *reason)
{
	ghost_reason(reason, "pid %d exited during the export", task_pid_vnr(task));
	return -ESRCH;
}

static u64 pending_mask(struct task_struct *task)
{
	return task->pending.signal.sig[0] |
	       task->signal->shared_pending.signal.sig[0];
}

/*
 * The refusals of ghost_policy_task(), from the parked @task's state; else
 * the number of file locks the image will carry (its header says whether
 * LOCK records follow). The caller has run ghost_check_target() (the
 * attributes among it) on the task as held, parked or in its ptrace stop.
 */
int ghost_check_task(struct task_struct *task, struct mm_struct *mm,
		     char *reason)
{
	struct signal_struct *sig = task->signal;
	struct ghost_task_facts t = {
		.pid = task_pid_vnr(task),
		.itimer_armed = hrtimer_is_queued(&sig->real_timer) ||
				sig->it[CPUCLOCK_PROF].expires ||
				sig->it[CPUCLOCK_VIRT].expires,
		.posix_timers = !list_empty(&sig->posix_timers),
	};
	struct sighand_struct *sh;
	unsigned long flags;
	int err;

#ifdef CONFIG_SYSVIPC
	t.sysvsem_undo = task->sysvsem.undo_list;
#endif
#ifdef CONFIG_IO_URING
	t.io_uring = task->io_uring;
#endif
	sh = lock_sighand(task, &flags);
	if (!sh)
		return gone(task, reason);
	t.pending = pending_mask(task);
	spin_unlock_irqrestore(&sh->siglock, flags);
	err = ghost_policy_task(&t, reason, GHOST_REASON_LEN);
	if (err)
		return err;

	err = ghost_check_mm(mm, reason);
	if (err)
		return err;
	return ghost_check_files(task, reason);
}

/*
 * File ids change what a DUP record means, and credentials who the process
 * runs as, so a reader must know them, and so must it the mapping attributes
 * (capture_mm.c), which it must restore; the vDSO record only adds a check,
 * which a reader may lack. A reader that skipped LOCK records would restore
 * a process without its locks, and one that does not know the ATTRS section
 * would drop what it holds. The END checksum is an XXH64 (cheap where the
 * crc32 instruction is emulated), which a reader must know to check.
 */
static int write_header(struct ghost_stream *s, struct task_struct *task,
			bool vdso, bool locks)
{
	u64 required = GHOST_IMAGE_FEAT_FILE_ID | GHOST_IMAGE_FEAT_VMA_ATTRS |
		       GHOST_IMAGE_FEAT_CREDS | GHOST_IMAGE_FEAT_ATTRS |
		       GHOST_IMAGE_FEAT_XXH64 |
		       (locks ? GHOST_IMAGE_FEAT_LOCKS : 0);
	struct ghost_image_header h = {
		.magic = GHOST_IMAGE_MAGIC,
		.version = GHOST_IMAGE_VERSION,
		.header_size = sizeof(h),
		.arch = GHOST_ARCH_X86_64,
		.page_size = PAGE_SIZE,
		.time_ns = ktime_get_real_ns(),
		.pid = task_pid_vnr(task),
		.features = required | (vdso ? GHOST_IMAGE_FEAT_VDSO_ID : 0),
		.required_features = required,
	};

	ghost_stream_use_xxh64(s, NULL, 0);
	return ghost_stream_write(s, &h, sizeof(h));
}

static int write_task(struct ghost_stream *s, struct task_struct *task)
{
	struct ghost_task t = {
		.personality = task->personality,
		.clear_child_tid = (unsigned long)task->clear_child_tid,
		.robust_list = (unsigned long)task->robust_list,
		.robust_list_len = sizeof(*task->robust_list),
	};

#ifdef CONFIG_RSEQ
	t.rseq = (unsigned long)task->rseq;
	t.rseq_len = ghost_rseq_len(task);
	t.rseq_sig = task->rseq_sig;
#endif
	get_task_comm(t.comm, task);
	return ghost_section_write(s, GHOST_SEC_TASK, &t, sizeof(t), NULL, 0);
}

static int write_cpu(struct ghost_stream *s, const struct ghost_cpu *cpu)
{
	struct ghost_xstate x = {
		.size = cpu->xstate_size,
		.xfeatures = cpu->xfeatures,
	};
	int err;

	err = ghost_section_write(s, GHOST_SEC_REGS, &cpu->regs,
				  sizeof(cpu->regs), NULL, 0);
	if (err)
		return err;
	return ghost_section_write(s, GHOST_SEC_XSTATE, &x, sizeof(x),
				   cpu->xstate, cpu->xstate_size);
}

static int write_signals(struct ghost_stream *s, struct task_struct *task,
			 char *reason)
{
	struct ghost_signals *sg = kzalloc(sizeof(*sg), GFP_KERNEL);
	struct sighand_struct *sh;
	unsigned long flags;
	int i, err;

	if (!sg)
		return -ENOMEM;
	sh = lock_sighand(task, &flags);
	if (!sh) {
		kfree(sg);
		return gone(task, reason);
	}
	for (i = 0; i < GHOST_NSIG; i++) {
		const struct sigaction *k = &sh->action[i].sa;

		sg->action[i].handler = (unsigned long)k->sa_handler;
		sg->action[i].flags = k->sa_flags;
		sg->action[i].restorer = (unsigned long)k->sa_restorer;
		sg->action[i].mask = k->sa_mask.sig[0];
	}
	/* Inside sigsuspend() and friends the real mask is the saved one. */
	sg->blocked = task->restore_sigmask ? task->saved_sigmask.sig[0] :
					      task->blocked.sig[0];
	sg->pending = pending_mask(task) &
		      ~(sigmask(SIGKILL) | sigmask(SIGSTOP));
	sg->altstack_sp = task->sas_ss_sp;
	sg->altstack_size = task->sas_ss_size;
	sg->altstack_flags = task->sas_ss_flags;
	spin_unlock_irqrestore(&sh->siglock, flags);

	err = ghost_section_write(s, GHOST_SEC_SIGNALS, sg, sizeof(*sg), NULL, 0);
	kfree(sg);
	return err;
}

static int write_fs(struct ghost_stream *s, struct task_struct *task,
		    char *reason)
{
	struct ghost_fs fs = { 0 };
	struct path pwd;
	char *buf, *p;
	int err;

	task_lock(task);
	if (!task->fs) {
		task_unlock(task);
		return -ESRCH;
	}
	get_fs_pwd(task->fs, &pwd);
	fs.umask = task->fs->umask;
	task_unlock(task);

	buf = kmalloc(PATH_MAX, GFP_KERNEL);
	if (!buf) {
		path_put(&pwd);
		return -ENOMEM;
	}
	p = d_path(&pwd, buf, PATH_MAX);
	err = ghost_policy_cwd(task_pid_vnr(task),
			       !IS_ERR(p) && ghost_path_reachable(&pwd),
			       d_unlinked(pwd.dentry), reason, GHOST_REASON_LEN);
	if (!err) {
		fs.cwd_len = strlen(p);
		err = ghost_section_write(s, GHOST_SEC_FS, &fs, sizeof(fs), p,
					  fs.cwd_len);
	}
	kfree(buf);
	path_put(&pwd);
	return err;
}

static int write_rlimits(struct ghost_stream *s, struct task_struct *task)
{
	struct ghost_rlimits r;
	int i;

	BUILD_BUG_ON(RLIM_NLIMITS != GHOST_NRLIMITS);
	task_lock(task->group_leader);
	for (i = 0; i < GHOST_NRLIMITS; i++) {
		r.rlim[i].cur = task->signal->rlim[i].rlim_cur;
		r.rlim[i].max = task->signal->rlim[i].rlim_max;
	}
	task_unlock(task->group_leader);
	return ghost_section_write(s, GHOST_SEC_RLIMITS, &r, sizeof(r), NULL, 0);
}

/*
 * The target is still there at the end of its image: a SIGKILL ends its
 * park while the export goes on, and its descriptors, say, may have gone
 * before they were read. Such an image is not finished (no END).
 */
int ghost_check_alive(struct task_struct *task, char *reason)
{
	return (READ_ONCE(task->flags) & PF_EXITING) ? gone(task, reason) : 0;
}

int ghost_write_end(struct ghost_stream *s)
{
	struct ghost_end end = { .bytes = s->off, .xxh64 = ghost_stream_sum(s) };

	return ghost_section_write(s, GHOST_SEC_END, &end, sizeof(end), NULL, 0);
}

/* Everything before the memory: header, task, credentials ... limits. */
int ghost_write_head(struct ghost_stream *s, struct task_struct *task,
		     struct mm_struct *mm, const struct ghost_cpu *cpu,
		     u32 vdso_size, int locks, char *reason)
{
	int err = write_header(s, task, vdso_size, locks);

	if (!err)
		err = write_task(s, task);
	if (!err)
		err = ghost_write_creds(s, task);
	if (!err)
		err = ghost_write_attrs(s, task, mm);
	if (!err)
		err = write_cpu(s, cpu);
	if (!err)
		err = write_signals(s, task, reason);
	if (!err)
		err = write_fs(s, task, reason);
	if (!err)
		err = write_rlimits(s, task);
	return err;
}

int ghost_vdso_of(struct mm_struct *mm, u32 *size, u32 *crc)
{
	int err;

	mmap_read_lock(mm);
	err = ghost_vdso_id(mm, size, crc);
	mmap_read_unlock(mm);
	return err;
}

int ghost_write_image(struct ghost_stream *s, struct task_struct *task,
		      struct mm_struct *mm, const struct ghost_cpu *cpu,
		      int locks, char *reason)
{
	u32 vdso_size, vdso_crc;
	int err;

	err = ghost_vdso_of(mm, &vdso_size, &vdso_crc);
	if (!err)
		err = ghost_write_head(s, task, mm, cpu, vdso_size, locks,
				       reason);
	if (!err)
		err = ghost_write_mm(s, mm, vdso_size, vdso_crc, reason);
	if (!err)
		err = ghost_write_files(s, task, locks, reason);
	if (!err)
		err = ghost_check_alive(task, reason);
	if (!err)
		err = ghost_write_end(s);
	if (err && !reason[0])
		ghost_reason(reason, "writing the image failed (error %d)", err);
	return err;
}
