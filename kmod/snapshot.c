// SPDX-License-Identifier: GPL-2.0
/*
 * A copy-on-write export in two calls, GHOST_EXPORT_SNAPSHOT and then
 * GHOST_EXPORT_FINISH, so that a process which runs on is held only while
 * its state is read, not while its pages are copied.
 *
 * A module cannot make a task fork, so the caller does: it stops the
 * process under ptrace, has it fork (the child stops before it runs) and
 * puts its registers back. In that stop the first call reads everything but
 * the page contents from the process: the records before the memory and
 * the FILE and LOCK records go into buffers, the mappings and which of
 * their pages exist into a list, and the child's mm is kept. The caller
 * lets the process go on; the second call writes the image, the pages read
 * from the child, whose memory the fork left as the process's was.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cred.h>
#include <linux/pid.h>
#include <linux/ptrace.h>
#include <linux/rcupdate.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/ghost.h>

#include "capture.h"
#include "export.h"
#include "import.h"
#include "internal.h"

/* Records written at the snapshot, copied into the image when it is written. */
struct ghost_buf {
	struct ghost_res res;
	u8 *data;
	size_t len, cap;
};

static int buf_write(struct ghost_res *res, const void *p, size_t len)
{
	struct ghost_buf *b = container_of(res, struct ghost_buf, res);
	int err = ghost_array_reserve((void **)&b->data, &b->cap, b->len,
				      b->len + len, 1, GFP_KERNEL_ACCOUNT);

	if (err)
		return err;
	memcpy(b->data + b->len, p, len);
	b->len += len;
	return 0;
}

static const struct ghost_res_ops buf_ops = {
	.write = buf_write,
};

struct ghost_snapshot {
	struct ghost_buf head;		/* header to limits */
	struct ghost_buf files;		/* FILE and LOCK records */
	struct ghost_mm_snap *mm;	/* the process's mappings and runs */
	struct mm_struct *pages;	/* the fork's memory, which holds them */
	struct task_struct *task;	/* the process, for the event */
};

void ghost_snapshot_drop(struct ghost *g)
{
	struct ghost_snapshot *sn = g->snapshot;

	if (!sn)
		return;
	g->snapshot = NULL;
	kvfree(sn->head.data);
	kvfree(sn->files.data);
	ghost_mm_snap_free(sn->mm);
	if (sn->pages)
		mmput(sn->pages);
	if (sn->task)
		put_task_struct(sn->task);
	kfree(sn);
}

/* @t is stopped under ptrace by the calling thread. */
static bool held_by_caller(struct task_struct *t)
{
	bool held;

	rcu_read_lock();
	held = t->ptrace && rcu_dereference(t->parent) == current &&
	       task_is_traced(t);
	rcu_read_unlock();
	return held;
}

/*
 * The process and its fork, both in a ptrace stop of the caller: only the
 * caller can let them go, and it is in this call. The process's registers
 * and FPU state are read from where its switch out of the CPU put them, so
 * it must be off the CPU (the caller's own ptrace requests already waited
 * for that; a stop that has just begun may still be switching).
 */
static int check_pair(struct task_struct *task, struct task_struct *snap,
		      char *reason)
{
	bool fork;

	if (!held_by_caller(task)) {
		ghost_reason(reason,
			     "pid %d is not stopped under ptrace by the calling thread, as a snapshot export needs",
			     task_pid_vnr(task));
		return -EINVAL;
	}
	if (!held_by_caller(snap)) {
		ghost_reason(reason,
			     "the snapshot, pid %d, is not stopped under ptrace by the calling thread",
			     task_pid_vnr(snap));
		return -EINVAL;
	}
	rcu_read_lock();
	fork = rcu_dereference(snap->real_parent) == task &&
	       !same_thread_group(snap, task);
	rcu_read_unlock();
	if (!fork) {
		ghost_reason(reason, "the snapshot, pid %d, is not a child of pid %d",
			     task_pid_vnr(snap), task_pid_vnr(task));
		return -EINVAL;
	}
	/* Yielding, and not past a SIGKILL that ends the stop meanwhile. */
	while (READ_ONCE(task->on_cpu)) {
		if (!held_by_caller(task)) {
			ghost_reason(reason, "pid %d left its ptrace stop",
				     task_pid_vnr(task));
			return -ESRCH;
		}
		cond_resched();
	}
	return 0;
}

/* The process's memory and its fork's: two address spaces, each accessible. */
static int take_mms(struct ghost_export *e, struct task_struct *task,
		    struct task_struct *snap, struct mm_struct **mm,
		    struct mm_struct **smm)
{
	int err;

	*mm = get_task_mm(task);
	*smm = get_task_mm(snap);
	if (!*mm || !*smm) {
		ghost_reason(e->reason, "pid %d has no memory (exiting?)",
			     task_pid_vnr(*mm ? snap : task));
		return -ESRCH;
	}
	if (*mm == *smm) {
		ghost_reason(e->reason,
			     "the snapshot, pid %d, shares the memory of pid %d: it must be a fork (no CLONE_VM)",
			     task_pid_vnr(snap), task_pid_vnr(task));
		return -EINVAL;
	}
	err = ghost_check_mem_fd(e->mem_fd, task, *mm, e->reason);
	if (!err)
		err = ghost_check_mem_fd(e->snap_mem_fd, snap, *smm, e->reason);
	return err;
}

/* Reads the held @task into @sn; its memory is the layout only. */
static int capture(struct ghost_snapshot *sn, struct task_struct *task,
		   struct mm_struct *mm, char *reason)
{
	struct ghost_cpu cpu = { 0 };
	struct ghost_stream s;
	u32 vdso_size, vdso_crc;
	int locks, err;

	locks = ghost_check_task(task, mm, reason);
	if (locks < 0)
		return locks;
	err = ghost_vdso_of(mm, &vdso_size, &vdso_crc);
	if (err)
		return err;
	sn->mm = ghost_snap_mm(mm, vdso_size, vdso_crc, reason);
	if (IS_ERR(sn->mm)) {
		err = PTR_ERR(sn->mm);
		sn->mm = NULL;
		return err;
	}
	err = ghost_mm_snap_check_fork(sn->mm, reason);
	if (err)
		return err;
	err = ghost_save_cpu(task, &cpu);
	if (err) {
		ghost_reason(reason, "reading the registers of pid %d failed",
			     task_pid_vnr(task));
		goto out;
	}
	sn->head.res.ops = &buf_ops;
	sn->files.res.ops = &buf_ops;
	ghost_stream_init(&s, &sn->head.res);
	err = ghost_write_head(&s, task, mm, &cpu, vdso_size, locks, reason);
	if (err)
		goto out;
	ghost_stream_init(&s, &sn->files.res);
	err = ghost_write_files(&s, task, locks, reason);
	if (!err)
		err = ghost_check_alive(task, reason);
out:
	kvfree(cpu.xstate);
	return err;
}

long ghost_export_snapshot(struct ghost *g, struct ghost_export *e)
{
	struct mm_struct *mm = NULL, *smm = NULL;
	struct task_struct *task, *snap = NULL;
	struct ghost_snapshot *sn = NULL;
	long err;

	memset(e->reason, 0, sizeof(e->reason));
	e->bytes = 0;
	e->frozen_ns = 0;
	if (e->flags != (GHOST_EXPORT_RUN | GHOST_EXPORT_SNAPSHOT) ||
	    !ghost_all_zero(e->resv, ARRAY_SIZE(e->resv)))
		return -EINVAL;

	mutex_lock(&g->lock);
	ghost_snapshot_drop(g);
	if (!g->res) {
		ghost_reason(e->reason, "no resource object is plugged into the ghost");
		mutex_unlock(&g->lock);
		return -ENXIO;
	}
	task = ghost_pidfd_task(e->pidfd, e->reason);
	if (!task) {
		mutex_unlock(&g->lock);
		return -ESRCH;
	}
	snap = ghost_pidfd_task(e->snap_pidfd, e->reason);
	err = snap ? check_pair(task, snap, e->reason) : -ESRCH;
	if (!err)
		err = ghost_check_target(task, snap, e->reason);
	if (!err)
		err = take_mms(e, task, snap, &mm, &smm);
	if (!err) {
		sn = kzalloc(sizeof(*sn), GFP_KERNEL_ACCOUNT);
		err = sn ? capture(sn, task, mm, e->reason) : -ENOMEM;
	}
	/* The caller held it throughout, or what was read is not one state. */
	if (!err && !held_by_caller(task)) {
		ghost_reason(e->reason, "pid %d left its ptrace stop while it was read",
			     task_pid_vnr(task));
		err = -ESRCH;
	}
	if (!err) {
		sn->pages = smm;
		smm = NULL;
		get_task_struct(task);
		sn->task = task;
		g->snapshot = sn;
		sn = NULL;
	}
	if (sn) {
		g->snapshot = sn;	/* dropped at once, as any snapshot */
		ghost_snapshot_drop(g);
	}
	if (smm)
		mmput(smm);
	if (mm)
		mmput(mm);
	if (snap)
		put_task_struct(snap);
	/*
	 * No event for a refused snapshot: it exports nothing, and its caller
	 * either exports the plain way (which is announced) or reports the
	 * refusal itself; an event here would make one export look like two.
	 */
	if (err && !e->reason[0])
		ghost_reason(e->reason, "reading pid %d failed (error %ld)",
			     task_pid_vnr(task), err);
	put_task_struct(task);
	mutex_unlock(&g->lock);
	return err;
}

long ghost_export_finish(struct ghost *g, struct ghost_export *e)
{
	struct ghost_snapshot *sn;
	struct ghost_stream s;
	struct ghost_res *res;
	long err;

	memset(e->reason, 0, sizeof(e->reason));
	e->bytes = 0;
	e->frozen_ns = 0;
	if (e->flags != GHOST_EXPORT_FINISH ||
	    !ghost_all_zero(e->resv, ARRAY_SIZE(e->resv)))
		return -EINVAL;

	mutex_lock(&g->lock);
	sn = g->snapshot;
	res = g->res;
	if (!sn || !res) {
		ghost_reason(e->reason,
			     "this ghost keeps no snapshot to write (GHOST_EXPORT_SNAPSHOT first)");
		mutex_unlock(&g->lock);
		return -ENOENT;
	}
	/* A staged image may share the pages this export rewrites. */
	ghost_staged_free(g->staged);
	g->staged = NULL;
	if (res->ops->truncate)
		res->ops->truncate(res);
	ghost_stream_init(&s, res);
	ghost_stream_use_xxh64(&s, NULL, 0);	/* as write_header() did */
	err = ghost_stream_write(&s, sn->head.data, sn->head.len);
	if (!err)
		err = ghost_write_mm_snap(&s, sn->mm, sn->pages);
	if (!err)
		err = ghost_stream_write(&s, sn->files.data, sn->files.len);
	if (!err)
		err = ghost_write_end(&s);
	e->bytes = s.off;
	if (err && !e->reason[0])
		ghost_reason(e->reason, "writing the image failed (error %ld)", err);
	ghost_event(GHOST_CMD_EXPORTED, sn->task, GHOST_EXPORT_RUN, e->bytes,
		    0, err, e->reason);
	ghost_snapshot_drop(g);
	mutex_unlock(&g->lock);
	return err;
}
