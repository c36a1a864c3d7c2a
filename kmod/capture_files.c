// SPDX-License-Identifier: GPL-2.0
/*
 * Open file descriptors of a parked process: which are recorded by path,
 * which inherited and which refused is ghost_policy_fd()'s call, shared
 * with the user engine (common/ghost_policy.h). Inherited ones must be held
 * by the importer at the same number (as CRIU's --inherit-fd).
 */
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/ghost.h>
#include <ghost_policy.h>

#include "capture.h"

struct fd_list {
	struct files_struct *files;
	struct ghost_fd_entry *v;
	unsigned int n, cap;
};

/* Under files->file_lock: must not sleep. */
static int collect_fd(const void *arg, struct file *file, unsigned int fd)
{
	struct fd_list *l = (struct fd_list *)arg;

	if (l->n < l->cap) {
		l->v[l->n].fd = fd;
		l->v[l->n].cloexec = close_on_exec(fd, files_fdtable(l->files));
		l->v[l->n].file = get_file(file);
	}
	l->n++;
	return 0;
}

static void iterate(struct task_struct *task, struct fd_list *l)
{
	task_lock(task);
	l->files = task->files;
	l->n = 0;
	if (l->files)
		iterate_fd(l->files, 0, collect_fd, l);
	task_unlock(task);
}

/* Drops what get_fds() took; @l is empty afterwards (a second call is none). */
static void put_fds(struct fd_list *l)
{
	unsigned int i;

	for (i = 0; i < min(l->n, l->cap); i++)
		fput(l->v[i].file);
	kvfree(l->v);
	l->v = NULL;
	l->n = 0;
	l->cap = 0;
}

/* Takes a reference on each open file of the (parked) @task. */
static int get_fds(struct task_struct *task, struct fd_list *l)
{
	memset(l, 0, sizeof(*l));
	iterate(task, l);		/* count */
	if (!l->n)
		return 0;
	l->cap = l->n;
	l->v = kvcalloc(l->cap, sizeof(*l->v), GFP_KERNEL_ACCOUNT);
	if (!l->v)
		return -ENOMEM;
	iterate(task, l);
	/* Parked, it opens nothing; a table shared with another process may. */
	if (l->n > l->cap) {
		l->n = l->cap;
		put_fds(l);
		return -EAGAIN;
	}
	return 0;
}

/*
 * A file of /proc/PID/ whose process was reaped: release_task() dropped the
 * /proc/PID directory from the dcache (proc_flush_pid()), so a dentry on
 * the way up is unhashed while this one is still held open.
 */
static bool dead_proc_file(const struct path *path)
{
	struct dentry *d, *parent;
	bool dead = false;

	if (path->dentry->d_sb->s_magic != PROC_SUPER_MAGIC)
		return false;
	d = dget(path->dentry);
	while (!dead && !IS_ROOT(d)) {
		dead = d_unhashed(d);
		parent = dget_parent(d);
		dput(d);
		d = parent;
	}
	dput(d);
	return dead;
}

/* enum ghost_file_kind of @f, or a negative errno with a reason. */
static int classify(const struct ghost_fd_entry *e, pid_t pid, char *buf,
		    char *reason)
{
	struct inode *inode = file_inode(e->file);
	const char *path = d_path(&e->file->f_path, buf, PATH_MAX);
	struct ghost_fd_facts f = {
		.fd = e->fd,
		.mode = inode->i_mode & S_IFMT,
		.reachable = ghost_path_reachable(&e->file->f_path),
		.deleted = d_unlinked(e->file->f_path.dentry) &&
			   !(e->file->f_path.mnt->mnt_flags & MNT_INTERNAL),
		.dead_proc = dead_proc_file(&e->file->f_path),
		.path = IS_ERR(path) ? NULL : path,
		.pid = pid,
	};

	if (S_ISCHR(inode->i_mode)) {
		f.major = imajor(inode);
		f.minor = iminor(inode);
	}
	return ghost_policy_fd(&f, reason, GHOST_REASON_LEN);
}

/* @pos: the file offset (0 for GHOST_FILE_DUP). */
static int write_one(struct ghost_stream *s, const struct ghost_fd_entry *e,
		     int kind, u64 pos, char *buf, char *reason)
{
	struct ghost_file f = {
		.fd = e->fd,
		.kind = kind,
		.flags = e->file->f_flags,
		.fd_flags = e->cloexec ? FD_CLOEXEC : 0,
		.pos = pos,
		.mode = file_inode(e->file)->i_mode & S_IFMT,
		.file_id = e->file_id,
	};
	const char *path = d_path(&e->file->f_path, buf, PATH_MAX);

	if (IS_ERR(path)) {
		ghost_reason(reason, "cannot name the file of fd %u", e->fd);
		return PTR_ERR(path);
	}
	f.path_len = strlen(path);
	return ghost_section_write(s, GHOST_SEC_FILE, &f, sizeof(f), path,
				   f.path_len);
}

struct by_file {
	unsigned long file;		/* the struct file's address */
	unsigned int i;			/* its index in the fd list */
};

static int cmp_by_file(const void *a, const void *b)
{
	const struct by_file *x = a, *y = b;

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/*
 * For each descriptor of @l the first one with the same open file (itself
 * when none comes before it), by sorting: a table may hold a million
 * descriptors, too many to compare each with those before it.
 */
static unsigned int *first_sharers(const struct fd_list *l)
{
	struct by_file *v = kvmalloc_array(l->n, sizeof(*v), GFP_KERNEL_ACCOUNT);
	unsigned int *first = kvmalloc_array(l->n, sizeof(*first),
					     GFP_KERNEL_ACCOUNT);
	unsigned int i, lead = 0;

	if (!v || !first) {
		kvfree(v);
		kvfree(first);
		return NULL;
	}
	for (i = 0; i < l->n; i++)
		v[i] = (struct by_file){ (unsigned long)l->v[i].file, i };
	sort(v, l->n, sizeof(*v), cmp_by_file, NULL);
	for (i = 0; i < l->n; i++) {
		if (!i || v[i].file != v[i - 1].file)
			lead = v[i].i;
		first[v[i].i] = lead;
	}
	kvfree(v);
	return first;
}

static int scan_fds(struct task_struct *task, struct ghost_stream *s,
		    char *reason)
{
	unsigned int *first = NULL;
	struct fd_list l;
	unsigned int i;
	u64 ids = 0;
	char *buf;
	int err;

	buf = kmalloc(PATH_MAX, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	err = get_fds(task, &l);
	if (!err && l.n) {
		first = first_sharers(&l);
		if (!first)
			err = -ENOMEM;
	}
	for (i = 0; !err && i < l.n; i++) {
		unsigned int j = first[i];
		int kind;

		/* Up to a million descriptors, each named and classified. */
		err = ghost_go_on();
		if (err)
			break;

		/* A dup of an earlier descriptor: one open file, one offset. */
		if (j < i) {
			l.v[i].file_id = l.v[j].file_id;
			l.v[i].kind = GHOST_FILE_DUP;
			if (s)
				err = write_one(s, &l.v[i], GHOST_FILE_DUP, 0,
						buf, reason);
			continue;
		}
		l.v[i].file_id = ++ids;
		kind = classify(&l.v[i], task_pid_vnr(task), buf, reason);
		l.v[i].kind = kind;
		if (kind < 0)
			err = kind;
		else if (s)
			err = write_one(s, &l.v[i], kind, l.v[i].file->f_pos,
					buf, reason);
	}
	if (!err)			/* after every FILE record */
		err = ghost_scan_locks(s, l.files, l.v, l.n, reason);
	if (l.v)
		put_fds(&l);
	kvfree(first);
	kfree(buf);
	return err;
}

/* The number of locks the image will carry, or a refusal. */
int ghost_check_files(struct task_struct *task, char *reason)
{
	return scan_fds(task, NULL, reason);
}

/*
 * @locks: what ghost_check_files() counted, which the header announced. A
 * lock taken since through an open file another process shares with the
 * target (a flock() of a forked server's) would follow the FILE records of
 * an image whose header says none do: such an export is refused.
 */
int ghost_write_files(struct ghost_stream *s, struct task_struct *task,
		      int locks, char *reason)
{
	int n = scan_fds(task, s, reason);

	if (n > 0 && !locks) {
		ghost_reason(reason,
			     "a file of pid %d was locked during the export (through a process sharing it): try again",
			     task_pid_vnr(task));
		return -EAGAIN;
	}
	return n < 0 ? n : 0;
}
