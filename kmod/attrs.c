// SPDX-License-Identifier: GPL-2.0
/*
 * Process attributes (GHOST_SEC_ATTRS): at export, what is refused (a
 * seccomp filter, a time namespace: ghost_policy_attrs()) and what the
 * image records; at import, whether the caller may be given the image's
 * values, whether it made itself what only it can make itself (a session
 * or group leader, membarrier registrations: restore_self.h does it
 * between GHOST_IMPORT_PREPARE and the import), and past the point of no
 * return the rest, each written as its own system call writes it.
 */
#include <linux/bitops.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/dcache.h>
#include <linux/fs_struct.h>
#include <linux/mm.h>
#include <linux/nsproxy.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/sched/coredump.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/seccomp.h>
#include <linux/ghost.h>
#include <ghost_policy.h>

#include "capture.h"
#include "import.h"

/* ---- export ---------------------------------------------------------------- */

/*
 * Whether @task's root directory is a directory below its namespace's root,
 * as /proc/PID/root shows it: d_path() names the root of another mount
 * namespace "/" too, and a chroot's directory by its path.
 */
static bool chrooted(struct task_struct *task)
{
	struct path root = {};
	bool other = false;
	char *buf, *p;

	task_lock(task);
	if (task->fs)
		get_fs_root(task->fs, &root);
	task_unlock(task);
	if (!root.mnt)
		return false;
	buf = (char *)__get_free_page(GFP_KERNEL);
	if (buf) {
		p = d_path(&root, buf, PAGE_SIZE);
		other = !IS_ERR(p) && strcmp(p, "/");
		free_page((unsigned long)buf);
	}
	path_put(&root);
	return other;
}

int ghost_check_attrs(struct task_struct *task, char *reason)
{
	struct ghost_attrs_facts a = { .pid = task_pid_vnr(task) };

#ifdef CONFIG_SECCOMP
	a.seccomp = READ_ONCE(task->seccomp.mode);
#endif
#ifdef CONFIG_TIME_NS
	task_lock(task);
	if (task->nsproxy) {
		a.other_time_ns = task->nsproxy->time_ns != current->nsproxy->time_ns;
		a.time_ns_for_children = task->nsproxy->time_ns_for_children !=
					 task->nsproxy->time_ns;
	}
	task_unlock(task);
#endif
	rcu_read_lock();
	a.other_user_ns = __task_cred(task)->user_ns != current_user_ns();
	rcu_read_unlock();
	a.chrooted = chrooted(task);
	return ghost_policy_attrs(&a, reason, GHOST_REASON_LEN);
}

/* The GHOST_MEMBARRIER_* registrations of @mm. */
static u32 membarrier_of(struct mm_struct *mm)
{
	u32 r = 0;
#ifdef CONFIG_MEMBARRIER
	int st = atomic_read(&mm->membarrier_state);

	if (st & MEMBARRIER_STATE_GLOBAL_EXPEDITED_READY)
		r |= GHOST_MEMBARRIER_GLOBAL_EXPEDITED;
	if (st & MEMBARRIER_STATE_PRIVATE_EXPEDITED_READY)
		r |= GHOST_MEMBARRIER_PRIVATE_EXPEDITED;
	if (st & MEMBARRIER_STATE_PRIVATE_EXPEDITED_SYNC_CORE_READY)
		r |= GHOST_MEMBARRIER_PRIVATE_EXPEDITED_SYNC_CORE;
	if (st & MEMBARRIER_STATE_PRIVATE_EXPEDITED_RSEQ_READY)
		r |= GHOST_MEMBARRIER_PRIVATE_EXPEDITED_RSEQ;
#endif
	return r;
}

/* Whether @task leads its session and its process group. */
static u32 leader_flags(struct task_struct *task)
{
	u32 f = 0;

	rcu_read_lock();
	if (task_session(task) == task_tgid(task))
		f |= GHOST_ATTRS_SESSION_LEADER;
	if (task_pgrp(task) == task_tgid(task))
		f |= GHOST_ATTRS_GROUP_LEADER;
	rcu_read_unlock();
	return f;
}

int ghost_write_attrs(struct ghost_stream *s, struct task_struct *task,
		      struct mm_struct *mm)
{
	struct ghost_attrs a = {
		.flags = leader_flags(task),
		.oom_score_adj = READ_ONCE(task->signal->oom_score_adj),
		.membarrier = membarrier_of(mm),
		.nice = task_nice(task),
		.timerslack_ns = READ_ONCE(task->timer_slack_ns),
	};

	if (task_no_new_privs(task))
		a.flags |= GHOST_ATTRS_NO_NEW_PRIVS;
	if (test_bit(MMF_DISABLE_THP, &mm->flags))
		a.flags |= GHOST_ATTRS_THP_DISABLE;
	if (task->signal->is_child_subreaper)
		a.flags |= GHOST_ATTRS_CHILD_SUBREAPER;
	if (get_dumpable(mm) != SUID_DUMP_USER)
		a.flags |= GHOST_ATTRS_NOT_DUMPABLE;
	return ghost_section_write(s, GHOST_SEC_ATTRS, &a, sizeof(a), NULL, 0);
}

/* ---- import ---------------------------------------------------------------- */

/*
 * May the caller have the image's values? The rules of setpriority(2) and
 * of a write to /proc/self/oom_score_adj; raising either is always allowed.
 * A caller's no_new_privs, which cannot be cleared, stays.
 */
int ghost_check_attrs_import(const struct ghost_staged *st, char *reason)
{
	const struct ghost_attrs *a = &st->attrs;

	if (!st->has_attrs)
		return 0;
	if (a->nice < task_nice(current) && !can_nice(current, a->nice)) {
		ghost_reason(reason, GHOST_NICE_REASON, a->nice, task_nice(current));
		return -EACCES;
	}
	if (a->oom_score_adj < READ_ONCE(current->signal->oom_score_adj_min) &&
	    !capable(CAP_SYS_RESOURCE)) {
		ghost_reason(reason, GHOST_OOM_REASON, a->oom_score_adj);
		return -EACCES;
	}
	return 0;
}

/*
 * On the last call, what the caller had to do itself after PREPARE
 * (GHOST_IOC_IMPORT's @attrs and @membarrier). A caller already leading its
 * session or group keeps leading it; registrations cannot be undone.
 */
int ghost_check_attrs_caller(const struct ghost_staged *st, char *reason)
{
	u32 f = st->attrs.flags, have = leader_flags(current), missing;

	if ((f & GHOST_ATTRS_SESSION_LEADER) && !(have & GHOST_ATTRS_SESSION_LEADER)) {
		ghost_reason(reason, "the image led a session: setsid() after PREPARE");
		return -EPERM;
	}
	if ((f & GHOST_ATTRS_GROUP_LEADER) && !(have & GHOST_ATTRS_GROUP_LEADER)) {
		ghost_reason(reason, "the image led a group: setpgid(0, 0) after PREPARE");
		return -EPERM;
	}
	missing = st->attrs.membarrier & ~membarrier_of(current->mm);
	if (missing) {
		ghost_reason(reason, "register for membarrier %#x after GHOST_IMPORT_PREPARE",
			     missing);
		return -EPERM;
	}
	return 0;
}

/* set_dumpable() is not exported: the same bits, set as it sets them. */
static void ghost_set_dumpable(struct mm_struct *mm, int value)
{
	set_mask_bits(&mm->flags, MMF_DUMPABLE_MASK, value);
}

/*
 * Past the point of no return, before the first page of the image goes in:
 * as prctl(PR_SET_DUMPABLE, 0). The memory is the caller's, so whoever
 * could read it while it was dumpable (a /proc/PID/mem opened then keeps
 * reading) would read the image's pages. Only ever lowered: a process the
 * import's change of credentials made not dumpable stays so.
 */
void ghost_restore_dumpable(const struct ghost_staged *st)
{
	if (st->has_attrs && (st->attrs.flags & GHOST_ATTRS_NOT_DUMPABLE))
		ghost_set_dumpable(current->mm, SUID_DUMP_DISABLE);
}

/* Past the point of no return. An image without ATTRS keeps the caller's. */
void ghost_restore_attrs(const struct ghost_staged *st)
{
	const struct ghost_attrs *a = &st->attrs;
	struct mm_struct *mm = current->mm;

	if (!st->has_attrs)
		return;
	if (a->flags & GHOST_ATTRS_NO_NEW_PRIVS)
		task_set_no_new_privs(current);
	/* as prctl(PR_SET_THP_DISABLE) */
	mmap_write_lock(mm);
	if (a->flags & GHOST_ATTRS_THP_DISABLE)
		set_bit(MMF_DISABLE_THP, &mm->flags);
	else
		clear_bit(MMF_DISABLE_THP, &mm->flags);
	mmap_write_unlock(mm);
	/*
	 * As prctl(PR_SET_CHILD_SUBREAPER); the image had no children to
	 * mark has_child_subreaper.
	 */
	current->signal->is_child_subreaper = !!(a->flags & GHOST_ATTRS_CHILD_SUBREAPER);
	/* as prctl(PR_SET_TIMERSLACK): 0 is the default */
	current->timer_slack_ns = a->timerslack_ns ? a->timerslack_ns :
				  current->default_timer_slack_ns;
	set_user_nice(current, a->nice);
	/* as a write to /proc/self/oom_score_adj (checked above) */
	current->signal->oom_score_adj = a->oom_score_adj;
	if (has_capability_noaudit(current, CAP_SYS_RESOURCE))
		current->signal->oom_score_adj_min = a->oom_score_adj;
}
