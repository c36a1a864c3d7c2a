// SPDX-License-Identifier: GPL-2.0
/*
 * File locks of a parked process (LOCK records, after the FILE records).
 * For each open file, the locks /proc/PID/fdinfo shows under its first
 * descriptor, in the same order (the user engine reads them from there):
 * flock locks, then POSIX and OFD locks, then leases, each taken through
 * that file and owned by it (flock, OFD, lease) or by the process's
 * descriptor table (POSIX). Which are carried and which refused is
 * ghost_policy_lock()'s call.
 */
#include <linux/fdtable.h>
#include <linux/fs.h>
#include <linux/slab.h>
#include <linux/ghost.h>
#include <ghost_lock.h>
#include <ghost_policy.h>

#include "capture.h"

struct lock_buf {
	struct ghost_lock *v;
	unsigned int n, cap;
	bool lease;
};

static void collect(struct list_head *head, struct file *file,
		    struct files_struct *files, u64 file_id, struct lock_buf *b)
{
	struct file_lock *fl;

	list_for_each_entry(fl, head, fl_list) {
		struct ghost_lock *l;

		if (fl->fl_file != file ||
		    (fl->fl_owner != files && fl->fl_owner != file))
			continue;
		if (!(fl->fl_flags & (FL_POSIX | FL_FLOCK))) {
			b->lease = true;	/* FL_LEASE, FL_DELEG */
			continue;
		}
		if (b->n++ >= b->cap)
			continue;
		l = &b->v[b->n - 1];
		memset(l, 0, sizeof(*l));
		l->file_id = file_id;
		l->type = fl->fl_type == F_WRLCK ? F_WRLCK : F_RDLCK;
		if (fl->fl_flags & FL_FLOCK) {
			l->kind = GHOST_LOCK_FLOCK;
			continue;
		}
		l->kind = (fl->fl_flags & FL_OFDLCK) ? GHOST_LOCK_OFD :
						       GHOST_LOCK_POSIX;
		l->start = fl->fl_start;
		l->len = fl->fl_end == OFFSET_MAX ? 0 :
			 fl->fl_end - fl->fl_start + 1;
	}
}

/* The locks held through @e's open file, into @b (grown as needed). */
static int file_locks(const struct ghost_fd_entry *e,
		      struct files_struct *files, struct lock_buf *b)
{
	struct file_lock_context *ctx;
	int tries;

	ctx = locks_inode_context(file_inode(e->file));
	for (tries = 0; tries < 4; tries++) {
		b->n = 0;
		b->lease = false;
		if (!ctx)
			return 0;
		spin_lock(&ctx->flc_lock);
		collect(&ctx->flc_flock, e->file, files, e->file_id, b);
		collect(&ctx->flc_posix, e->file, files, e->file_id, b);
		collect(&ctx->flc_lease, e->file, files, e->file_id, b);
		spin_unlock(&ctx->flc_lock);
		if (b->n <= b->cap)
			return 0;
		kfree(b->v);
		b->cap = b->n + 4;
		b->v = kcalloc(b->cap, sizeof(*b->v), GFP_KERNEL_ACCOUNT);
		if (!b->v) {
			b->cap = 0;
			return -ENOMEM;
		}
	}
	return -EAGAIN;		/* another holder of the open file keeps locking */
}

int ghost_scan_locks(struct ghost_stream *s, struct files_struct *files,
		     const struct ghost_fd_entry *v, unsigned int n,
		     char *reason)
{
	struct lock_buf b = { 0 };
	unsigned int i, j;
	int err = 0, count = 0;

	for (i = 0; !err && i < n; i++) {
		struct ghost_lock_facts f = {
			.fd = v[i].fd,
			.file_kind = v[i].kind,
		};

		if (v[i].kind == GHOST_FILE_DUP)
			continue;	/* shown under the first descriptor */
		err = file_locks(&v[i], files, &b);
		if (err || (!b.n && !b.lease))
			continue;
		f.lease = b.lease;
		f.kind = b.n ? b.v[0].kind : 0;
		err = ghost_policy_lock(&f, reason, GHOST_REASON_LEN);
		for (j = 0; !err && j < b.n; j++) {
			if (s)
				err = ghost_section_write(s, GHOST_SEC_LOCK,
							  &b.v[j],
							  sizeof(b.v[j]),
							  NULL, 0);
			count++;
		}
	}
	kfree(b.v);
	return err ? err : count;
}
