// SPDX-License-Identifier: GPL-2.0
/*
 * GHOST_IOC_EXPORT: turn a live process into a ghost image.
 *
 * The target is held still in its own context: a task_work queued with
 * TWA_SIGNAL runs on its way back to user mode (a blocking system call is
 * interrupted the way a signal would interrupt it). There it saves its own
 * registers and FPU state, which are then consistent, and parks. While it is
 * parked the caller reads the rest (memory, files, signals) and writes the
 * image, then lets the target go on, stop or die as asked.
 *
 * The target comes as a pidfd, and the right to export it as a descriptor
 * of its /proc/PID/mem that the caller could open (see check_mem_fd()).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cred.h>
#include <linux/elf.h>
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/freezer.h>
#include <linux/magic.h>
#include <linux/module.h>
#include <linux/ktime.h>
#include <linux/pid.h>
#include <linux/regset.h>
#include <linux/sched/coredump.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/task_work.h>
#include <linux/timekeeping.h>
#include <linux/ghost.h>
#include <ghost_policy.h>

#include "capture.h"
#include "compat.h"
#include "export.h"
#include "import.h"
#include "internal.h"

enum { CAP_PENDING, CAP_PARKED, CAP_ABANDONED };

struct ghost_freeze {
	struct callback_head work;
	refcount_t ref;
	atomic_t state;
	struct completion parked;	/* the target saved its CPU state */
	struct completion release;	/* the caller is done with it */
	ktime_t parked_at;
	struct ghost_cpu cpu;
};

static void freeze_put(struct ghost_freeze *f)
{
	if (refcount_dec_and_test(&f->ref)) {
		kvfree(f->cpu.xstate);
		kfree(f);
	}
}

static const struct user_regset *
find_regset(struct task_struct *task, unsigned int note)
{
	const struct user_regset_view *view = task_user_regset_view(task);
	int i;

	for (i = 0; i < view->n; i++)
		if (view->regsets[i].core_note_type == note)
			return &view->regsets[i];
	return NULL;
}

/*
 * A system call interrupted to run this work is restarted by the kernel
 * right after it (ax = -ERESTART*). The image must restart it too, so it
 * holds the registers as the restart leaves them (ghost_policy_restart()).
 * A call that uses a restart block (relative nanosleep, poll with a
 * timeout) is re-issued: a sleep that wrote what it had left into its rem
 * argument sleeps that (ghost_policy_sleep_left()), any other waits its
 * whole timeout again rather than fail with EINTR.
 */
static void fixup_restart(struct ghost_regs *r)
{
	ghost_policy_sleep_left(r->ax, r->orig_ax, r->si, r->r10, &r->di, &r->dx);
	ghost_policy_restart(&r->ax, &r->orig_ax, &r->ip, false);
}

/*
 * The registers and FPU state of @task: current on its way to user mode
 * (freeze_work()), or a task stopped under ptrace by current, whose state
 * its context switch saved (snapshot.c), as PTRACE_GETREGSET reads it.
 */
int ghost_save_cpu(struct task_struct *task, struct ghost_cpu *cpu)
{
	const struct user_regset *rs = find_regset(task, NT_PRSTATUS);
	int n;

	BUILD_BUG_ON(sizeof(struct ghost_regs) != sizeof(struct user_regs_struct));
	if (!rs)
		return -EOPNOTSUPP;
	n = regset_get(task, rs, sizeof(cpu->regs), &cpu->regs);
	if (n < 0)
		return n;
	fixup_restart(&cpu->regs);

	rs = find_regset(task, NT_X86_XSTATE);
	if (!rs)
		return -EOPNOTSUPP;
	n = regset_get_alloc(task, rs, rs->n * rs->size, &cpu->xstate);
	if (n < 0)
		return n;
	cpu->xstate_size = n;
	cpu->xfeatures = task->thread.fpu.fpstate->user_xfeatures;
	return 0;
}

static void freeze_work(struct callback_head *work)
{
	struct ghost_freeze *f = container_of(work, struct ghost_freeze, work);

	if (atomic_read(&f->state) == CAP_PENDING) {
		f->cpu.err = ghost_save_cpu(current, &f->cpu);
		if (atomic_cmpxchg(&f->state, CAP_PENDING, CAP_PARKED) ==
		    CAP_PENDING) {
			f->parked_at = ktime_get();
			complete(&f->parked);
			/* A SIGKILL ends the wait; the caller holds the mm. */
			wait_for_completion_killable(&f->release);
		}
	}
	freeze_put(f);
	/*
	 * The reference freeze() took for this work: an export given up on
	 * (a target asleep past GHOST_PARK_WITHIN_S) leaves the work queued
	 * after its ghost is closed, and the module must still be there when
	 * it runs. Only this function's return is left to run after it.
	 */
	module_put(THIS_MODULE);
}

/*
 * Any child, a zombie one too: it stays listed until it is reaped. Modules
 * cannot take tasklist_lock (not exported); list_empty() is one READ_ONCE()
 * of the head, and a fork or a reap racing with it could as well have come
 * just after the lock was dropped. A snapshot export's target has one child
 * that does not count, its snapshot (@snap), which it cannot reap while it
 * is held; the pointers are compared, never followed.
 */
static bool has_children(struct task_struct *task, struct task_struct *snap)
{
	struct list_head *first = READ_ONCE(task->children.next);

	if (first == &task->children)
		return false;
	return !snap || first != &snap->sibling ||
	       READ_ONCE(snap->sibling.next) != &task->children;
}

/*
 * Whether @task's memory (MMF_MULTIPROCESS: set by a clone(CLONE_VM) of
 * another process, never cleared, so a process whose sibling has gone is
 * refused too) or descriptor table is another process's as well.
 */
static void shares(struct task_struct *task, bool *mm, bool *files)
{
	task_lock(task);
	*mm = task->mm && test_bit(MMF_MULTIPROCESS, &task->mm->flags);
	*files = task->files && atomic_read(&task->files->count) > 1;
	task_unlock(task);
}

/*
 * What can be refused before the target is disturbed. A snapshot export's
 * target (@snap set) is stopped under ptrace by the caller, which
 * ghost_export_snapshot() checked; a plain export's must be neither.
 */
int ghost_check_target(struct task_struct *task, struct task_struct *snap,
		       char *reason)
{
	struct ghost_target_facts t = {
		.pid = task_pid_vnr(task),
		.kthread_or_exiting = task->flags & (PF_KTHREAD | PF_EXITING),
		.self = same_thread_group(task, current),
		.threads = get_nr_threads(task),
		.children = has_children(task, snap),
		.traced = !snap && task->ptrace,
		.stopped = !snap && task_is_stopped_or_traced(task),
	};
	int err;

	shares(task, &t.shares_mm, &t.shares_files);
	err = ghost_policy_target(&t, reason, GHOST_REASON_LEN);
	/* before parking it, which would wait for it in vain */
	if (!err && freezing(task)) {
		char path[64];

		ghost_freezer_path(task, path, sizeof(path));
		err = ghost_policy_frozen(t.pid, path, reason, GHOST_REASON_LEN);
	}
	return err ? err : ghost_check_attrs(task, reason);
}

/* The process a pidfd names (a reference), or NULL with a reason. */
struct task_struct *ghost_pidfd_task(int fd, char *reason)
{
	struct task_struct *task = NULL;
	struct fd f = fdget(fd);
	struct pid *pid;

	if (!f.file) {
		ghost_reason(reason, "pidfd %d is not an open descriptor", fd);
		return NULL;
	}
	pid = ghost_pidfd_pid(f.file);
	if (!pid)
		ghost_reason(reason, "fd %d is not a pidfd (see pidfd_open(2))", fd);
	else
		task = get_pid_task(pid, PIDTYPE_PID);
	if (pid && !task)
		ghost_reason(reason, "the process of pidfd %d has exited", fd);
	fdput(f);
	return task;
}

/*
 * The access check is the kernel's own: opening /proc/PID/mem ran
 * ptrace_may_access(PTRACE_MODE_ATTACH_FSCREDS) with the LSM and Yama hooks,
 * and the open file holds the mm it was opened for. It must be @task's mm
 * now: after an execve the descriptor names the old one.
 */
int ghost_check_mem_fd(int fd, struct task_struct *task, struct mm_struct *mm,
		       char *reason)
{
	struct fd f = fdget(fd);
	int err = 0;

	if (!f.file) {
		ghost_reason(reason, "mem_fd %d is not an open descriptor", fd);
		return -EBADF;
	}
	if (file_inode(f.file)->i_sb->s_magic != PROC_SUPER_MAGIC ||
	    strcmp(f.file->f_path.dentry->d_name.name, "mem")) {
		ghost_reason(reason, "mem_fd %d is not a /proc/PID/mem descriptor", fd);
		err = -EINVAL;
	} else if (f.file->private_data != mm) {
		ghost_reason(reason,
			     "mem_fd %d is not the memory of pid %d now (another process, or it ran execve since the open)",
			     fd, task_pid_vnr(task));
		err = -ESTALE;
	}
	fdput(f);
	return err;
}

/* The target, parked, must still be what was checked: no execve between. */
static int check_unchanged(struct task_struct *task, struct mm_struct *mm,
			   const struct cred *cred, char *reason)
{
	bool same;

	task_lock(task);
	same = task->mm == mm && rcu_access_pointer(task->real_cred) == cred &&
	       rcu_access_pointer(task->cred) == cred;
	task_unlock(task);
	if (same)
		return 0;
	ghost_reason(reason, "pid %d changed its memory or credentials (execve?) during the export",
		     task_pid_vnr(task));
	return -ESTALE;
}

/* How long an export waits for its target to park, in seconds. */
#define GHOST_PARK_WITHIN_S 30

/* Parks @task in its own context; on success @f holds its CPU state. */
static int freeze(struct task_struct *task, struct ghost_freeze *f)
{
	long left;
	int err;

	init_task_work(&f->work, freeze_work);
	refcount_set(&f->ref, 2);
	atomic_set(&f->state, CAP_PENDING);
	init_completion(&f->parked);
	init_completion(&f->release);

	__module_get(THIS_MODULE);	/* put by freeze_work() */
	err = task_work_add(task, &f->work, TWA_SIGNAL);
	if (err) {
		module_put(THIS_MODULE);
		refcount_set(&f->ref, 1);
		return -ESRCH;		/* exiting */
	}
	/*
	 * A target that stopped, or sleeps uninterruptibly, since it was
	 * checked does not run the work: the exporter gives up after a while
	 * instead of holding the ghost for ever.
	 */
	left = wait_for_completion_killable_timeout(&f->parked,
						    GHOST_PARK_WITHIN_S * HZ);
	if (left <= 0) {
		/* Given up: the work, when it runs, must not park. */
		err = left ? -EINTR : -ETIMEDOUT;
		if (atomic_cmpxchg(&f->state, CAP_PENDING, CAP_ABANDONED) ==
		    CAP_PENDING)
			return err;
		complete(&f->release);
		return err;
	}
	return 0;
}

long ghost_export(struct ghost *g, struct ghost_export *e)
{
	u32 fate = e->flags & GHOST_EXPORT_FLAGS;
	const struct cred *tcred = NULL;
	struct task_struct *task = NULL;
	struct mm_struct *mm = NULL;
	struct ghost_freeze *f;
	struct ghost_stream s;
	struct ghost_res *res;
	long err;
	int locks;

	if (e->flags & GHOST_EXPORT_SNAPSHOT)
		return ghost_export_snapshot(g, e);
	if (e->flags & GHOST_EXPORT_FINISH)
		return ghost_export_finish(g, e);
	memset(e->reason, 0, sizeof(e->reason));
	e->bytes = 0;
	e->frozen_ns = 0;
	if ((e->flags & ~GHOST_EXPORT_FLAGS) || hweight32(fate) != 1 ||
	    !ghost_all_zero(e->resv, ARRAY_SIZE(e->resv)))
		return -EINVAL;

	mutex_lock(&g->lock);
	res = g->res;
	if (!res) {
		ghost_reason(e->reason, "no resource object is plugged into the ghost");
		err = -ENXIO;
		goto out_unlock;
	}
	task = ghost_pidfd_task(e->pidfd, e->reason);
	if (!task) {
		err = -ESRCH;
		goto out_unlock;
	}
	err = ghost_check_target(task, NULL, e->reason);
	if (err)
		goto out_task;
	mm = get_task_mm(task);
	if (!mm) {
		ghost_reason(e->reason, "pid %d has no memory (exiting?)",
			     task_pid_vnr(task));
		err = -ESRCH;
		goto out_task;
	}
	err = ghost_check_mem_fd(e->mem_fd, task, mm, e->reason);
	if (err)
		goto out_mm;
	/*
	 * Refused before it is parked too, as far as can be known while it
	 * runs: parking interrupts what it sleeps in, and a few calls return
	 * EINTR then rather than restart (epoll_wait(), sigtimedwait()).
	 * Checked again once parked, when it cannot change.
	 */
	locks = ghost_check_task(task, mm, e->reason);
	if (locks < 0) {
		err = locks;
		goto out_mm;
	}
	tcred = get_task_cred(task);
	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f) {
		err = -ENOMEM;
		goto out_mm;
	}

	err = freeze(task, f);
	if (err) {
		if (err == -ETIMEDOUT)
			ghost_reason(e->reason,
				     "pid %d did not stop within %d s (stopped, or asleep in D state)",
				     task_pid_vnr(task), GHOST_PARK_WITHIN_S);
		else
			ghost_reason(e->reason, err == -EINTR ?
				     "interrupted while waiting for pid %d to stop" :
				     "pid %d exited", task_pid_vnr(task));
		goto out_freeze;
	}
	if (f->cpu.err) {
		err = f->cpu.err;
		ghost_reason(e->reason, "reading the registers of pid %d failed",
			     task_pid_vnr(task));
		goto out_release;
	}
	err = check_unchanged(task, mm, tcred, e->reason);
	/*
	 * Checked again now that it cannot change: a thread or a child it
	 * made between the first check and parking would otherwise be left
	 * out of the image without a word (and a thread would write to the
	 * memory while it is read).
	 */
	if (!err)
		err = ghost_check_target(task, NULL, e->reason);
	if (err)
		goto out_release;

	/* Refusals that need the target still come before any byte is written. */
	locks = ghost_check_task(task, mm, e->reason);
	if (locks < 0) {
		err = locks;
		goto out_release;
	}

	/* A staged image may share the pages this export rewrites. */
	ghost_staged_free(g->staged);
	g->staged = NULL;
	ghost_snapshot_drop(g);
	if (res->ops->truncate)
		res->ops->truncate(res);
	ghost_stream_init(&s, res);
	err = ghost_write_image(&s, task, mm, &f->cpu, locks, e->reason);
	e->bytes = s.off;
	if (err)
		goto out_release;

	if (fate == GHOST_EXPORT_KILL)
		send_sig_info(SIGKILL, SEND_SIG_PRIV, task);
	else if (fate == GHOST_EXPORT_STOP)
		send_sig_info(SIGSTOP, SEND_SIG_PRIV, task);
out_release:
	e->frozen_ns = ktime_to_ns(ktime_sub(ktime_get(), f->parked_at));
	complete(&f->release);
out_freeze:
	freeze_put(f);
out_mm:
	if (tcred)
		put_cred(tcred);
	mmput(mm);
out_task:
	ghost_event(GHOST_CMD_EXPORTED, task, e->flags, e->bytes, e->frozen_ns,
		    err, e->reason);
	put_task_struct(task);
	mutex_unlock(&g->lock);
	return err;
out_unlock:
	mutex_unlock(&g->lock);
	ghost_event(GHOST_CMD_EXPORTED, NULL, e->flags, e->bytes, e->frozen_ns,
		    err, e->reason);
	return err;
}
