// SPDX-License-Identifier: GPL-2.0
/*
 * GHOST_IOC_IMPORT: rebuild the calling process from an image, in place.
 *
 * The image is staged whole first (stage.c). With GHOST_IMPORT_PREPARE the
 * staged image is kept in the ghost and the call returns where the vDSO must
 * go; the caller moves it (arch_prctl(ARCH_MAP_VDSO_64), which no module can
 * do) and calls again. Then, if the vDSO is in place, the point of no return
 * is passed and restore.c rebuilds the caller. With GHOST_IMPORT_STOPPED it
 * is sent SIGSTOP last, so it stops before running the image. With
 * GHOST_IMPORT_DIRECT and an image file, the page data is not staged but
 * read into place after the point of no return (late_pages.c).
 */
#include <linux/compat.h>
#include <linux/cred.h>
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/mm.h>
#include <linux/fs_struct.h>
#include <linux/ptrace.h>
#include <linux/resource.h>
#include <linux/sched/coredump.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task_stack.h>
#include <linux/task_work.h>
#include <asm/fpu/types.h>
#include <asm/segment.h>
#include <linux/ghost.h>

#include "import.h"

#define GHOST_LATE_REASON \
	"checksum mismatch (xxh64) in the page data read after the point of no return: the image is damaged or changed since it was staged; the importer is killed"

static unsigned long current_vvar(void)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	unsigned long start = 0;

	VMA_ITERATOR(vmi, mm, 0);
	mmap_read_lock(mm);
	for_each_vma(vmi, vma) {
		if (ghost_vma_is_vdso(vma) &&
		    vma->vm_start != (unsigned long)mm->context.vdso) {
			start = vma->vm_start;
			break;
		}
	}
	mmap_read_unlock(mm);
	return start;
}

/*
 * What the importer itself must be, checked on every call before the image
 * is read: rebuilding it in place must not break another task that shares
 * its memory, descriptors or fs, and the image is 64-bit only.
 */
static int check_importer(char *reason)
{
	struct mm_struct *mm = current->mm;

	if (in_compat_syscall()) {
		ghost_reason(reason, "the importer is a 32-bit process: images are 64-bit");
		return -EOPNOTSUPP;
	}
	if (get_nr_threads(current) != 1) {
		ghost_reason(reason, "the importer must be single-threaded");
		return -EBUSY;
	}
	/* vfork children are not marked MMF_MULTIPROCESS; CLONE_VM ones are. */
	if (current->vfork_done || test_bit(MMF_MULTIPROCESS, &mm->flags)) {
		ghost_reason(reason,
			     "the importer shares its memory with another process (vfork or CLONE_VM)");
		return -EBUSY;
	}
	if (atomic_read(&current->files->count) != 1) {
		ghost_reason(reason,
			     "the importer shares its descriptor table with another process (CLONE_FILES)");
		return -EBUSY;
	}
	if (current->fs->users != 1) {
		ghost_reason(reason,
			     "the importer shares its working directory with another process (CLONE_FS)");
		return -EBUSY;
	}
	return 0;
}

/*
 * A staged image was checked for the task that prepared it: files opened
 * and limits compared with its credentials, the FPU state converted into
 * its FPU buffer size. Nobody else may restore it.
 */
static void own_staged(struct ghost_staged *st)
{
	st->owner = get_task_pid(current, PIDTYPE_TGID);
	st->cred = get_current_cred();
	st->owner_mm = current->mm;
	mmgrab(st->owner_mm);
	st->fp_size = current->thread.fpu.fpstate->size;
}

static int check_owner(const struct ghost_staged *st, char *reason)
{
	/* Its credentials may only have become the image's (creds.c). */
	if (st->owner == task_tgid(current) &&
	    (st->cred == current_cred() || ghost_creds_switched(st)) &&
	    st->owner_mm == current->mm &&
	    st->fp_size == current->thread.fpu.fpstate->size)
		return 0;
	if (st->owner != task_tgid(current))
		ghost_reason(reason,
			     "the image was prepared by pid %d: only that process may import it",
			     pid_vnr(st->owner));
	else
		ghost_reason(reason,
			     "the importer changed its credentials, memory or FPU state since it prepared the image");
	return -EPERM;
}

/* The last checks before the point of no return. */
static int check_caller(const struct ghost_staged *st, char *reason)
{
	const struct staged_vma *vdso = ghost_staged_vma(st, GHOST_VMA_VDSO);
	const struct staged_vma *vvar = ghost_staged_vma(st, GHOST_VMA_VVAR);
	unsigned long have = (unsigned long)current->mm->context.vdso;
	unsigned short gs;
	int err = ghost_creds_check_now(st, reason);

	if (!err)
		err = ghost_check_rlimits_now(st, reason);
	if (err)
		return err;
	if (vdso && (have != vdso->v.start ||
		     (vvar && current_vvar() != vvar->v.start))) {
		ghost_reason(reason,
			     "the vDSO is at %#lx, the image needs it at %#llx",
			     have, vdso->v.start);
		return -EADDRNOTAVAIL;
	}
	savesegment(gs, gs);
	if (gs) {
		ghost_reason(reason, "the importing process uses a GS selector");
		return -EBUSY;
	}
	err = ghost_check_vma_addrs(st, reason);
	if (!err)
		err = ghost_check_descriptors_now(st, reason);
	if (!err)
		err = ghost_check_posix_locks(st, reason);
	if (err)
		return err;
	return ghost_check_vma_attrs(st, reason);	/* its limit now */
}

/*
 * The ioctl system call returns an int, so the restored rax cannot travel
 * as its return value whole: this puts all 64 bits back on the way out to
 * user mode, after the syscall's return value was stored and before any
 * signal frame is built (TWA_SIGNAL work runs first in get_signal()).
 */
struct ax_work {
	struct callback_head cb;
	unsigned long ax;
};

static void set_ax(struct callback_head *cb)
{
	struct ax_work *w = container_of(cb, struct ax_work, cb);

	current_pt_regs()->ax = w->ax;
	kfree(w);
}

int ghost_import(struct ghost *g, struct ghost_import *im, struct file *self,
		 long *ax)
{
	struct ax_work *axw;
	const struct staged_vma *sv;
	struct ghost_staged *st;
	struct ghost_stream s;
	bool direct;
	int err;

	memset(im->reason, 0, sizeof(im->reason));
	im->bytes = 0;
	im->vvar_start = 0;
	im->vdso_start = 0;
	im->creds_len = 0;
	im->attrs = 0;		/* out fields: ignored on input */
	im->membarrier = 0;
	im->cpu_limit = 0;
	if ((im->flags & ~GHOST_IMPORT_FLAGS) || im->__pad)
		return -EINVAL;

	mutex_lock(&g->lock);
	if (!g->res) {
		ghost_reason(im->reason, "no resource object is plugged into the ghost");
		err = -ENXIO;
		goto out;
	}
	err = check_importer(im->reason);
	if (err)
		goto out;

	/* Taken out: a refused importer drops it; a prepared one is put back. */
	st = g->staged;
	g->staged = NULL;
	if (st) {
		err = check_owner(st, im->reason);
		if (!err && (im->flags & GHOST_IMPORT_OWNER))
			err = ghost_creds_owner(st, im->owner, im->reason);
		if (err) {
			ghost_staged_free(st);
			goto out;
		}
	} else {
		if (g->res->ops->rewind)
			g->res->ops->rewind(g->res);
		ghost_stream_init(&s, g->res);
		err = ghost_stage(&s, im, &st, im->reason);
		im->bytes = s.off;
		if (err)
			goto out;
		own_staged(st);
	}
	im->bytes = st->bytes;
	sv = ghost_staged_vma(st, GHOST_VMA_VVAR);
	im->vvar_start = sv ? sv->v.start : 0;
	sv = ghost_staged_vma(st, GHOST_VMA_VDSO);
	im->vdso_start = sv ? sv->v.start : 0;
	im->attrs = st->attrs.flags & (GHOST_ATTRS_SESSION_LEADER | GHOST_ATTRS_GROUP_LEADER |
				       GHOST_ATTRS_NOT_DUMPABLE);
	im->membarrier = st->attrs.membarrier;
	if (st->rlim.rlim[RLIMIT_CPU].cur != RLIM_INFINITY) {
		im->attrs |= GHOST_IMPORT_ATTRS_CPU_LIMIT;
		im->cpu_limit = st->rlim.rlim[RLIMIT_CPU].cur;
	}

	err = ghost_check_vdso(st, im->reason);
	if (!err)
		err = ghost_check_attrs_import(st, im->reason);
	if (!err && (im->flags & GHOST_IMPORT_PREPARE))
		err = ghost_creds_copy_out(st, im);
	if (!err && !(im->flags & GHOST_IMPORT_PREPARE))
		err = check_caller(st, im->reason);
	if (!err && !(im->flags & GHOST_IMPORT_PREPARE))
		err = ghost_check_attrs_caller(st, im->reason);
	if (err || (im->flags & GHOST_IMPORT_PREPARE)) {
		g->staged = st;		/* kept for the next call */
		goto out;
	}

	axw = kmalloc(sizeof(*axw), GFP_KERNEL);
	if (!axw) {
		g->staged = st;
		err = -ENOMEM;
		goto out;
	}
	/*
	 * The staged image is ours alone now (its pages are referenced, not
	 * borrowed under the lock): the rebuild, which maps and faults, runs
	 * without g->lock.
	 */
	mutex_unlock(&g->lock);

	/* The point of no return. */
	*ax = st->regs.ax;
	axw->ax = st->regs.ax;
	init_task_work(&axw->cb, set_ax);
	get_file(self);		/* restore_files() may close its descriptor */
	err = ghost_restore(st, self);
	direct = st->late;
	ghost_staged_free(st);
	fput(self);
	ghost_event(GHOST_CMD_IMPORTED, current, im->flags, im->bytes, 0, err,
		    direct && err == -EBADMSG ? GHOST_LATE_REASON : NULL);
	if (err) {
		/* Being killed makes copies fail: that is no failure of ours. */
		if (!fatal_signal_pending(current))
			pr_warn_ratelimited("ghost: import failed after the point of no return (%d): killing pid %d\n",
					    err, task_pid_nr(current));
		force_sig(SIGKILL);
		kfree(axw);
		return err;
	}
	if (task_work_add(current, &axw->cb, TWA_SIGNAL))
		kfree(axw);
	/*
	 * GHOST_IMPORT_STOPPED: a group stop on the way back to user mode
	 * (after set_ax), before the image runs one instruction.
	 */
	if (im->flags & GHOST_IMPORT_STOPPED)
		send_sig(SIGSTOP, current, 1);
	return 0;
out:
	mutex_unlock(&g->lock);
	if (err)
		ghost_event(GHOST_CMD_IMPORTED, current, im->flags, im->bytes, 0,
			    err, im->reason);
	return err;
}
