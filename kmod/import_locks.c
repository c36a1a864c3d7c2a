// SPDX-License-Identifier: GPL-2.0
/*
 * The image's file locks, taken again on the reopened files.
 *
 * OFD and flock locks belong to the open file: they are taken when the
 * image is staged, on the staged file, and go with it if the import fails
 * (the last fput() removes them). POSIX locks belong to the process's
 * descriptor table, and any close of a descriptor of the file drops them:
 * staging only tests them (vfs_test_lock(), with the caller's table as the
 * owner, so its own locks do not count), and the restore takes them after
 * the caller's descriptors are closed and the image's installed. A holder
 * that took a conflicting lock in between makes that fail after the point
 * of no return.
 */
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <ghost_lock.h>

#include "import.h"

/* A request for @l on @file, owned by @owner. */
static struct file_lock *make_lock(const struct ghost_lock *l,
				   struct file *file, fl_owner_t owner)
{
	struct file_lock *fl = locks_alloc_lock();

	if (!fl)
		return NULL;
	fl->fl_file = file;
	fl->fl_owner = owner;
	fl->fl_pid = current->tgid;
	fl->fl_type = l->type == GHOST_LOCK_WRLCK ? F_WRLCK : F_RDLCK;
	switch (l->kind) {
	case GHOST_LOCK_FLOCK:
		fl->fl_flags = FL_FLOCK;
		fl->fl_start = 0;
		fl->fl_end = OFFSET_MAX;
		break;
	case GHOST_LOCK_OFD:
		fl->fl_flags = FL_POSIX | FL_OFDLCK;
		fallthrough;
	default:
		if (l->kind == GHOST_LOCK_POSIX)
			fl->fl_flags = FL_POSIX;
		fl->fl_start = l->start;
		fl->fl_end = l->len ? l->start + l->len - 1 : OFFSET_MAX;
		break;
	}
	return fl;
}

/* Takes @l on @file now, without waiting: -EAGAIN if someone holds it. */
static int take(const struct ghost_lock *l, struct file *file,
		fl_owner_t owner)
{
	struct file_lock *fl = make_lock(l, file, owner);
	int err;

	if (!fl)
		return -ENOMEM;
	if (l->kind == GHOST_LOCK_FLOCK)
		err = file->f_op->flock ? file->f_op->flock(file, F_SETLK, fl) :
			locks_lock_inode_wait(file_inode(file), fl);
	else
		err = vfs_lock_file(file, F_SETLK, fl, NULL);
	locks_free_lock(fl);
	return err;
}

/* Would the caller's table get POSIX lock @l on @file? 1 if not. */
static int posix_conflicts(const struct ghost_lock *l, struct file *file)
{
	struct file_lock *fl = make_lock(l, file, current->files);
	int err;

	if (!fl)
		return -ENOMEM;
	err = vfs_test_lock(file, fl);
	if (!err)
		err = fl->fl_type != F_UNLCK;
	locks_free_lock(fl);
	return err;
}

static int conflict(const struct staged_lock *sl, char *reason)
{
	char *buf = kmalloc(PATH_MAX, GFP_KERNEL);
	const char *path = buf ? d_path(&sl->file->f_path, buf, PATH_MAX) :
				 ERR_PTR(-ENOMEM);

	ghost_lock_conflict(reason, GHOST_REASON_LEN, &sl->l, sl->fd,
			    IS_ERR(path) ? "?" : path);
	kfree(buf);
	return -EAGAIN;
}

int ghost_stage_lock(struct ghost_staged *st, const struct ghost_lock *l,
		     char *reason)
{
	const char *why = ghost_lock_malformed(l);
	const struct staged_file *sf;
	struct staged_lock *sl;
	fmode_t need;
	int err;

	if (why)
		return ghost_bad(reason, "the lock section of file id %llu %s",
				 l->file_id, why);
	sf = ghost_staged_file(st, l->file_id);
	if (!sf || sf->f.kind != GHOST_FILE_PATH || !sf->file)
		return ghost_bad(reason,
				 "a lock names file id %llu, which the image does not reopen by path",
				 l->file_id);
	/*
	 * As fcntl() and flock() would take it: a POSIX or OFD lock needs the
	 * file open for its type, flock() open for reading or writing; neither
	 * takes one on an O_PATH file, which needs no access to the file.
	 */
	need = l->type == GHOST_LOCK_WRLCK ? FMODE_WRITE : FMODE_READ;
	if (l->kind == GHOST_LOCK_FLOCK)
		need = FMODE_READ | FMODE_WRITE;
	if ((sf->file->f_mode & FMODE_PATH) || !(sf->file->f_mode & need))
		return ghost_bad(reason, "the %s lock of fd %d needs the file open for %s",
				 ghost_lock_kind_name(l->kind), sf->f.fd,
				 need == FMODE_WRITE ? "writing" :
				 need == FMODE_READ ? "reading" : "reading or writing");

	err = ghost_array_reserve((void **)&st->locks, &st->locks_cap,
				  st->nr_locks, st->nr_locks + 1,
				  sizeof(*st->locks), GFP_KERNEL_ACCOUNT);
	if (err)
		return err;
	sl = &st->locks[st->nr_locks++];
	sl->l = *l;
	sl->fd = sf->f.fd;
	sl->file = get_file(sf->file);
	/* POSIX locks are tested once all these are held (below). */
	if (l->kind == GHOST_LOCK_POSIX)
		return 0;
	err = take(l, sl->file, sl->file);
	if (err == -EAGAIN || err == -EWOULDBLOCK)
		return conflict(sl, reason);
	if (err)
		ghost_reason(reason, "cannot take the %s lock of fd %d again (error %d)",
			     ghost_lock_kind_name(l->kind), sl->fd, err);
	return err;
}

/*
 * The image's POSIX locks tested once all its OFD and flock locks are held
 * (and again by the final call, against whatever others took since): an
 * OFD lock recorded after a POSIX one on the same bytes would make
 * ghost_restore_locks() fail past the point of no return.
 */
int ghost_check_posix_locks(const struct ghost_staged *st, char *reason)
{
	unsigned int i;
	int err;

	for (i = 0; i < st->nr_locks; i++) {
		const struct staged_lock *sl = &st->locks[i];

		if (sl->l.kind != GHOST_LOCK_POSIX)
			continue;
		err = posix_conflicts(&sl->l, sl->file);
		if (err == 1 || err == -EAGAIN || err == -EWOULDBLOCK)
			return conflict(sl, reason);
		if (err) {
			ghost_reason(reason, "cannot test the POSIX lock of fd %d (error %d)",
				     sl->fd, err);
			return err;
		}
	}
	return 0;
}

int ghost_restore_locks(struct ghost_staged *st)
{
	unsigned int i;
	int err;

	for (i = 0; i < st->nr_locks; i++) {
		const struct staged_lock *sl = &st->locks[i];

		if (sl->l.kind != GHOST_LOCK_POSIX)
			continue;
		err = take(&sl->l, sl->file, current->files);
		if (err) {
			pr_warn_ratelimited("ghost: pid %d: POSIX lock of fd %d lost (error %d)\n",
					    current->tgid, sl->fd, err);
			return err;
		}
	}
	return 0;
}

void ghost_staged_locks_free(struct ghost_staged *st)
{
	unsigned int i;

	for (i = 0; i < st->nr_locks; i++)
		fput(st->locks[i].file);
	kvfree(st->locks);
}
