/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Import: an image is first read whole and checked into a staged image
 * (stage.c), which holds everything that can fail; only then is the caller
 * rebuilt from it (restore.c), past the point of no return.
 */
#ifndef GHOST_IMPORT_H
#define GHOST_IMPORT_H

#include <linux/path.h>
#include <linux/ghost.h>

#include "internal.h"

struct fpstate;
struct ghost_late;

struct staged_run {
	unsigned long addr;
	unsigned long nr_pages;
	u64 data_at;			/* direct: where its page data lies */
	struct page **pages;		/* NULL when read direct */
	unsigned long *lent;		/* bitmap: page borrowed from a memory ghost */
	size_t pages_cap;		/* allocated entries of @pages */
	size_t lent_cap;		/* allocated words of @lent */
};

struct staged_vma {
	struct ghost_vma v;
	struct file *file;		/* GHOST_VMA_FILE: reopened */
	unsigned int nr_runs;
	size_t runs_cap;
	struct staged_run *runs;
};

struct staged_file {
	struct ghost_file f;
	struct file *file;		/* PATH: reopened; INHERIT: NULL */
};

/* A lock the image holds; OFD and flock are taken when staged, POSIX after. */
struct staged_lock {
	struct ghost_lock l;
	struct file *file;		/* the reopened file (a reference) */
	int fd;
};

struct ghost_staged {
	/* who prepared it (import.c): nobody else may restore it */
	struct pid *owner;
	const struct cred *cred;
	struct mm_struct *owner_mm;	/* grabbed: compared, never used */
	unsigned int fp_size;		/* the owner's fpstate->size, as @fp */
	struct ghost_image_header hdr;
	struct ghost_task task;
	struct ghost_attrs attrs;	/* when has_attrs, else zero */
	bool has_attrs;
	struct ghost_creds *creds;	/* CREDS record + groups, NULL if none */
	bool for_user;			/* GHOST_IMPORT_OWNER, not root's image */
	struct cred *img_cred;		/* @creds, for opening files (creds.c) */
	struct ghost_regs regs;
	struct fpstate *fp;		/* current's fpstate with the image's xstate */
	u32 pkru;
	bool has_pkru;
	struct ghost_signals *sig;
	u32 umask;
	struct path cwd;
	struct ghost_rlimits rlim;
	u64 rlim_max_then[GHOST_NRLIMITS];	/* the caller's hard limits, staging */
	bool may_raise_limits;		/* then: CAP_SYS_RESOURCE, not for_user */
	struct ghost_mm mm;
	unsigned int nr_vmas;
	struct staged_vma *vmas;
	unsigned int nr_files;
	size_t files_cap;
	struct staged_file *files;
	u64 fd_end;			/* highest installed fd + 1, 0 if none */
	u64 last_file_id;		/* of the last file record that was not a DUP */
	unsigned int nr_by_id;		/* @files that are not DUPs, by file id */
	size_t by_id_cap;
	unsigned int *by_id;
	unsigned int nr_locks;
	size_t locks_cap;
	struct staged_lock *locks;
	u64 bytes;
	/*
	 * GHOST_IMPORT_DIRECT: page data is read by @late from the image file
	 * after the point of no return, and the XXH64 of the @end_at bytes
	 * before the END record checked against @end_sum then (late_pages.c).
	 * NULL: the page data is staged.
	 */
	struct ghost_late *late;
	u64 end_at;
	u64 end_sum;
};

/* stage.c */
__printf(2, 3) int ghost_bad(char *reason, const char *fmt, ...);
int ghost_stage(struct ghost_stream *s, const struct ghost_import *im,
		struct ghost_staged **out, char *reason);
void ghost_staged_free(struct ghost_staged *st);
int ghost_check_rlimits_now(const struct ghost_staged *st, char *reason);
const struct staged_vma *ghost_staged_vma(const struct ghost_staged *st,
					  u32 flag);
const struct staged_file *ghost_staged_file(const struct ghost_staged *st,
					    u64 file_id);
int ghost_check_descriptors_now(const struct ghost_staged *st, char *reason);

/* creds.c */
struct ghost_import;
int ghost_creds_stage(struct ghost_staged *st, struct ghost_creds *c,
		      char *reason);
int ghost_creds_owner(const struct ghost_staged *st, u32 owner, char *reason);
const struct cred *ghost_creds_override(const struct ghost_staged *st);
void ghost_creds_revert(const struct cred *old);
int ghost_creds_copy_out(const struct ghost_staged *st,
			 struct ghost_import *im);
int ghost_creds_check_now(const struct ghost_staged *st, char *reason);
bool ghost_creds_switched(const struct ghost_staged *st);
void ghost_creds_free(struct ghost_staged *st);
/* vma_attrs.c */
int ghost_check_vma_attrs(const struct ghost_staged *st, char *reason);
int ghost_check_vma_addrs(const struct ghost_staged *st, char *reason);
unsigned long ghost_vm_mmap(struct file *file, const struct ghost_vma *v,
			    unsigned long flags);

/* import_locks.c */
int ghost_stage_lock(struct ghost_staged *st, const struct ghost_lock *l,
		     char *reason);
void ghost_staged_locks_free(struct ghost_staged *st);
int ghost_check_posix_locks(const struct ghost_staged *st, char *reason);
int ghost_restore_locks(struct ghost_staged *st);

/* vdso.c */
int ghost_check_vdso(const struct ghost_staged *st, char *reason);

/* attrs.c */
int ghost_check_attrs_import(const struct ghost_staged *st, char *reason);
int ghost_check_attrs_caller(const struct ghost_staged *st, char *reason);
void ghost_restore_dumpable(const struct ghost_staged *st);
void ghost_restore_attrs(const struct ghost_staged *st);

/* late_pages.c: GHOST_IMPORT_DIRECT's page data, past the point of no return */
struct ghost_late *ghost_late_begin(struct file *file, loff_t base);
int ghost_late_read(struct ghost_late *r, const struct staged_run *run,
		    unsigned long first, struct page **pages, unsigned int nr);
int ghost_late_end(struct ghost_late *r, const struct ghost_staged *st);
void ghost_late_free(struct ghost_late *r);

/* restore.c: past the point of no return; a failure is fatal. */
int ghost_restore(struct ghost_staged *st, struct file *self);

/* import.c */
struct ghost_import;
int ghost_import(struct ghost *g, struct ghost_import *arg, struct file *self,
		 long *ax);

/* restore.c */
bool ghost_vma_is_vdso(struct vm_area_struct *vma);

#endif /* GHOST_IMPORT_H */
