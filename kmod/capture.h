/* SPDX-License-Identifier: GPL-2.0 */
/* Reading a parked process into an image (capture_*.c). */
#ifndef GHOST_CAPTURE_H
#define GHOST_CAPTURE_H

#include <linux/dcache.h>
#include <linux/mount.h>
#include <linux/path.h>
#include <linux/sched.h>
#include <linux/ghost.h>

#include "internal.h"

/* What the target saves of itself, in its own context. */
struct ghost_cpu {
	int err;
	struct ghost_regs regs;
	void *xstate;			/* NT_X86_XSTATE layout, kvmalloc'd */
	unsigned int xstate_size;
	u64 xfeatures;
};

/*
 * Can @path be opened again by name? Not if it was unlinked, nor if it
 * lives on an internal mount or is a pseudo file (shared anonymous memory,
 * memfd, SysV shm, anonymous inodes): their dentry is its own root.
 */
static inline bool ghost_path_reachable(const struct path *path)
{
	struct dentry *d = path->dentry;

	return !d_unlinked(d) && !(path->mnt->mnt_flags & MNT_INTERNAL) &&
	       !(IS_ROOT(d) && d != path->mnt->mnt_root);
}

/* capture_task.c */
int ghost_check_task(struct task_struct *task, struct mm_struct *mm,
		     char *reason);
int ghost_write_image(struct ghost_stream *s, struct task_struct *task,
		      struct mm_struct *mm, const struct ghost_cpu *cpu,
		      int locks, char *reason);
/* The parts of ghost_write_image(), for a snapshot export (snapshot.c) */
int ghost_vdso_of(struct mm_struct *mm, u32 *size, u32 *crc);
int ghost_write_head(struct ghost_stream *s, struct task_struct *task,
		     struct mm_struct *mm, const struct ghost_cpu *cpu,
		     u32 vdso_size, int locks, char *reason);
int ghost_write_end(struct ghost_stream *s);
int ghost_check_alive(struct task_struct *task, char *reason);

/* attrs.c */
int ghost_check_attrs(struct task_struct *task, char *reason);
int ghost_write_attrs(struct ghost_stream *s, struct task_struct *task,
		      struct mm_struct *mm);
/* creds.c */
int ghost_write_creds(struct ghost_stream *s, struct task_struct *task);

/* capture_mm.c */
int ghost_check_mm(struct mm_struct *mm, char *reason);
int ghost_write_mm(struct ghost_stream *s, struct mm_struct *mm, u32 vdso_size,
		   u32 vdso_crc, char *reason);
/* The layout of an mm now, its pages written later from it or a fork of it */
struct ghost_mm_snap;
struct ghost_mm_snap *ghost_snap_mm(struct mm_struct *mm, u32 vdso_size,
				    u32 vdso_crc, char *reason);
int ghost_write_mm_snap(struct ghost_stream *s, struct ghost_mm_snap *ms,
			struct mm_struct *pages);
void ghost_mm_snap_free(struct ghost_mm_snap *ms);
int ghost_mm_snap_check_fork(const struct ghost_mm_snap *ms, char *reason);

/* vma_attrs.c: mlock, madvise flags, may-write; under mmap_lock */
u32 ghost_vma_attrs(struct vm_area_struct *vma, u32 flags);

/* vdso.c */
int ghost_vdso_id(struct mm_struct *mm, u32 *size, u32 *crc);

/* pagewalk.c: runs of existing pages, collected under mmap_lock */
struct ghost_run {
	unsigned long addr;
	unsigned long nr;
};

struct ghost_runs {
	struct ghost_run *v;
	size_t nr, cap;
	u64 pages;			/* sum of the runs' lengths */
};

int ghost_collect_runs(struct mm_struct *mm, unsigned long addr,
		       unsigned long end, bool anon_only, struct ghost_runs *r);
void ghost_runs_free(struct ghost_runs *r);

/* capture_files.c: an open descriptor of the parked task */
struct ghost_fd_entry {
	unsigned int fd;
	bool cloexec;
	struct file *file;
	u64 file_id;			/* ghost_file.file_id */
	int kind;			/* enum ghost_file_kind */
};

int ghost_check_files(struct task_struct *task, char *reason);
int ghost_write_files(struct ghost_stream *s, struct task_struct *task,
		      int locks, char *reason);

/* capture_locks.c: with @s NULL, only counts (and refuses) */
int ghost_scan_locks(struct ghost_stream *s, struct files_struct *files,
		     const struct ghost_fd_entry *v, unsigned int n,
		     char *reason);

#endif /* GHOST_CAPTURE_H */
