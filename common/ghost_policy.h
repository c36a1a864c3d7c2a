/* SPDX-License-Identifier: GPL-2.0 OR LGPL-2.1-or-later */
/*
 * What ghost v1 exports and what it refuses, and the register rules an
 * export and an import share: one copy compiled by both engines, ghost.ko
 * (kmod/) and libghost's user engine (libghost/src/user/). Each engine
 * gathers plain facts in its own way (the kernel from its structures, the
 * user engine from /proc and ptrace) and asks these functions, so both give
 * the same answer and refuse with the same sentence. Not installed: it is
 * not part of the uapi.
 *
 * A refusal returns a negative errno and writes its reason into @reason
 * (@len bytes, GHOST_REASON_LEN in practice).
 */
#ifndef GHOST_POLICY_H
#define GHOST_POLICY_H

#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/mman.h>
#include <linux/stat.h>
#include <linux/string.h>
#include <linux/types.h>
#else
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <linux/types.h>
/* Kernel-internal values (include/linux/errno.h) ptrace shows in ax. */
#define ERESTARTSYS		512
#define ERESTARTNOINTR		513
#define ERESTARTNOHAND		514
#define ERESTART_RESTARTBLOCK	516
#endif
#include <asm/processor-flags.h>
#include <asm/unistd.h>
#include <linux/major.h>
#include <linux/ghost.h>

/* ---- the process as a whole ---------------------------------------------- */

/* Known before the process is disturbed. */
struct ghost_target_facts {
	int pid;
	bool kthread_or_exiting;
	bool self;		/* the exporter itself */
	int threads;
	/*
	 * Any child, zombies included: one that exited unreaped is still on
	 * the children list, and wait() would find it.
	 */
	bool children;
	bool traced;
	bool stopped;		/* stopped or in a ptrace stop */
	/*
	 * Its memory or descriptor table shared with another process
	 * (clone(CLONE_VM) or clone(CLONE_FILES) without CLONE_THREAD): that
	 * process would change them while the image is read. ghost.ko knows;
	 * the user engine asks kcmp(2) about the processes that can share
	 * them (sharing_of()).
	 */
	bool shares_mm;
	bool shares_files;
};

static inline int ghost_policy_target(const struct ghost_target_facts *t,
				      char *reason, size_t len)
{
	if (t->kthread_or_exiting) {
		snprintf(reason, len, "pid %d is a kernel thread or exiting",
			 t->pid);
		return -EPERM;
	}
	if (t->self) {
		snprintf(reason, len, "a process cannot export itself");
		return -EINVAL;
	}
	if (t->threads > 1) {
		snprintf(reason, len,
			 "pid %d has %d threads: multi-threaded export is not supported",
			 t->pid, t->threads);
		return -EOPNOTSUPP;
	}
	if (t->children) {
		snprintf(reason, len,
			 "pid %d has children: process trees are not supported",
			 t->pid);
		return -EOPNOTSUPP;
	}
	if (t->shares_mm || t->shares_files) {
		snprintf(reason, len,
			 "pid %d shares its %s with another process (clone(%s)): it cannot be exported alone",
			 t->pid, t->shares_mm ? "memory" : "descriptor table",
			 t->shares_mm ? "CLONE_VM" : "CLONE_FILES");
		return -EOPNOTSUPP;
	}
	if (t->traced) {
		snprintf(reason, len, "pid %d is being traced", t->pid);
		return -EBUSY;
	}
	if (t->stopped) {
		snprintf(reason, len,
			 "pid %d is stopped: continue it (SIGCONT) first", t->pid);
		return -EBUSY;
	}
	return 0;
}

/*
 * A process in a frozen or freezing cgroup v1 freezer cannot be held still
 * by either engine until it is thawed (it sleeps in the refrigerator, in D
 * state): refused at once, rather than waited for. @cgroup: the path of its
 * freezer cgroup.
 */
static inline int ghost_policy_frozen(int pid, const char *cgroup, char *reason,
				      size_t len)
{
	snprintf(reason, len,
		 "pid %d is frozen (cgroup freezer %s): it could not be held until thawed; thaw it first",
		 pid, cgroup);
	return -EBUSY;
}

/*
 * Signals whose queued information v1 cannot carry: the real-time ones,
 * from the kernel's SIGRTMIN (32; glibc's SIGRTMIN is a function and
 * higher).
 */
#define GHOST_RT_SIGMASK (~0ULL << (32 - 1))

/* Known once the process is held. */
struct ghost_task_facts {
	int pid;
	bool itimer_armed;	/* ITIMER_REAL, _VIRTUAL or _PROF */
	bool posix_timers;
	bool sysvsem_undo;	/* a SysV semaphore undo list */
	bool io_uring;
	__u64 pending;		/* bit N-1: signal N pending (thread or process) */
};

static inline int ghost_policy_task(const struct ghost_task_facts *t,
				    char *reason, size_t len)
{
	const char *what = NULL;

	if (t->itimer_armed)
		what = "has an armed interval timer";
	else if (t->posix_timers)
		what = "has POSIX timers";
	else if (t->sysvsem_undo)
		what = "holds SysV semaphore state";
	else if (t->io_uring)
		what = "uses io_uring";
	else if (t->pending & GHOST_RT_SIGMASK)
		what = "has queued real-time signals";
	if (!what)
		return 0;
	snprintf(reason, len, "pid %d %s: not supported", t->pid, what);
	return -EOPNOTSUPP;
}

/*
 * Process attributes that cannot be carried (the rest are, in the ATTRS
 * section). Known before the process is disturbed, checked again once it
 * is held: a seccomp filter would make the system calls the user engine
 * runs inside the process kill it.
 */
struct ghost_attrs_facts {
	int pid;
	int seccomp;		/* SECCOMP_MODE_*: 0 none, 1 strict, 2 filter */
	bool other_time_ns;	/* in another time namespace than the exporter */
	bool time_ns_for_children; /* unshare(CLONE_NEWTIME): children get another */
	/*
	 * In another user namespace than the exporter: its capabilities are
	 * that namespace's (full for its creator's first process), and would
	 * be restored as capabilities here.
	 */
	bool other_user_ns;
	/*
	 * Its root directory is not the one of its mount namespace (chroot):
	 * a restart would set it free of it (the image has no root).
	 */
	bool chrooted;
};

static inline int ghost_policy_attrs(const struct ghost_attrs_facts *a,
				     char *reason, size_t len)
{
	const char *what;

	if (a->seccomp == 1)
		what = "is in seccomp strict mode, which a restart would drop";
	else if (a->seccomp)
		what = "has a seccomp filter, which a restart would drop";
	else if (a->other_time_ns)
		what = "is in another time namespace than the exporter";
	else if (a->time_ns_for_children)
		what = "made a time namespace for its children (unshare(CLONE_NEWTIME))";
	else if (a->other_user_ns)
		what = "is in another user namespace than the exporter";
	else if (a->chrooted)
		what = "has a root directory of its own (chroot), which a restart would drop";
	else
		return 0;
	snprintf(reason, len, "pid %d %s: not supported", a->pid, what);
	return -EOPNOTSUPP;
}

/* @deleted: the directory was removed (" (deleted)" in its path). */
static inline int ghost_policy_cwd(int pid, bool reachable, bool deleted,
				   char *reason, size_t len)
{
	if (reachable)
		return 0;
	if (deleted) {
		snprintf(reason, len,
			 "the working directory of pid %d is a deleted directory: not supported",
			 pid);
		return -EOPNOTSUPP;
	}
	snprintf(reason, len, "the working directory of pid %d is unreachable",
		 pid);
	return -EOPNOTSUPP;
}

/* ---- mappings ------------------------------------------------------------ */

/*
 * Whether @v counts as data for RLIMIT_DATA (the kernel's
 * is_data_mapping(): private, writable, not a stack). The vDSO and vvar are
 * the kernel's own, never counted.
 */
static inline bool ghost_vma_is_data(const struct ghost_vma *v)
{
	return (v->prot & PROT_WRITE) &&
	       !(v->flags & (GHOST_VMA_SHARED | GHOST_VMA_GROWSDOWN |
			     GHOST_VMA_VDSO | GHOST_VMA_VVAR));
}

/*
 * The address space and data limits that may_expand_vm() applies to the
 * restored memory as a whole, under the importer's soft limits (the
 * image's are set only after its memory is made): refused before the point
 * of no return rather than failing after it. Sizes in KiB; a limit of
 * RLIM_INFINITY >> 10 or more is none. A soft data limit of 0 is
 * may_expand_vm()'s exception for valgrind: then the hard limit applies.
 *
 * And the number of mappings, under vm.max_map_count: do_mmap() refuses a
 * new mapping once the count is above it, so @nr_maps image records (with
 * the vDSO and vvar, and one page of the restorer's own beside them in the
 * user engine) all fit when @nr_maps is at most the limit. The image came
 * from a kernel whose limit admitted them; this one's may be lower.
 *
 * And the commit charge: under vm.overcommit_memory 0 (the heuristic, the
 * default) __vm_enough_memory() refuses one charged mapping
 * (ghost_vma_is_charged()) larger than RAM and swap together, which a
 * source with more of them, or with overcommit 1, could hold. Under 1
 * nothing is refused; under 2 the charge is checked against what every
 * process has committed at the time of each mmap(), which no earlier check
 * can promise: not modelled (@overcommit other than 0).
 */
struct ghost_vm_size_facts {
	__u64 total_kib, data_kib;
	__u64 as_kib, data_cur_kib, data_max_kib;
	__u64 nr_maps, max_map_count;
	__u64 charged_at, charged_kib;	/* the largest charged mapping */
	__u64 ram_swap_kib;		/* MemTotal + SwapTotal */
	__u32 overcommit;		/* vm.overcommit_memory */
};

/* vm.max_map_count when it cannot be read: the kernel's default. */
#define GHOST_DEFAULT_MAX_MAP_COUNT	65530

/*
 * Whether mmap_region() charges a mapping like @v made with protection
 * @prot against the commit limit (its accountable_mapping(): private,
 * writable, not MAP_NORESERVE, which counts under vm.overcommit_memory 0
 * and 1). The vDSO and vvar are the kernel's own.
 */
static inline bool ghost_vma_is_charged(const struct ghost_vma *v, __u32 prot)
{
	return (prot & PROT_WRITE) &&
	       !(v->flags & (GHOST_VMA_SHARED | GHOST_VMA_NORESERVE |
			     GHOST_VMA_VDSO | GHOST_VMA_VVAR));
}

static inline int ghost_policy_vm_size(const struct ghost_vm_size_facts *f,
				       char *reason, size_t len)
{
	if (f->total_kib > f->as_kib) {
		snprintf(reason, len,
			 "the image maps %llu KiB, above the caller's RLIMIT_AS (%llu KiB)",
			 (unsigned long long)f->total_kib, (unsigned long long)f->as_kib);
		return -ENOMEM;
	}
	if (f->data_kib > f->data_cur_kib &&
	    !(f->data_cur_kib == 0 && f->data_kib <= f->data_max_kib)) {
		snprintf(reason, len,
			 "the image has %llu KiB of private writable memory, above the caller's RLIMIT_DATA (%llu KiB)",
			 (unsigned long long)f->data_kib, (unsigned long long)f->data_cur_kib);
		return -ENOMEM;
	}
	if (f->nr_maps > f->max_map_count) {
		snprintf(reason, len,
			 "the image has %llu mappings, more than vm.max_map_count (%llu) allows here",
			 (unsigned long long)f->nr_maps,
			 (unsigned long long)f->max_map_count);
		return -ENOMEM;
	}
	if (f->overcommit == 0 && f->charged_kib > f->ram_swap_kib) {
		snprintf(reason, len,
			 "mapping at %#llx (%llu KiB) exceeds RAM+swap (%llu KiB), vm.overcommit_memory 0",
			 (unsigned long long)f->charged_at,
			 (unsigned long long)f->charged_kib,
			 (unsigned long long)f->ram_swap_kib);
		return -ENOMEM;
	}
	return 0;
}

struct ghost_vma_facts {
	__u64 start, end;
	const char *special;	/* "[vdso]", "[vvar]", ...: a special mapping */
	bool hugetlb;
	bool device;		/* VM_IO, VM_PFNMAP or VM_MIXEDMAP */
	bool file;		/* backed by a file (shared anonymous memory is) */
	bool reachable;		/* that file can be opened again by its path */
	/*
	 * An unreachable file's path as d_path() writes it, as
	 * /proc/PID/maps shows it ("/memfd:x (deleted)"); may be NULL.
	 */
	const char *path;
	bool shared;		/* VM_MAYSHARE */
	bool growsdown;
	/*
	 * Registered with a userfaultfd for missing pages: pages it lacks may
	 * still come from elsewhere (a lazy restart's pager), so they are not
	 * the zeros an image would restore them as.
	 */
	bool uffd_missing;
};

struct ghost_mm_facts {
	__u64 start_brk, brk, start_stack;
};

static inline bool ghost_policy_prefix(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

static inline bool ghost_policy_deleted(const char *path)
{
	static const char suffix[] = " (deleted)";
	size_t n = strlen(path), m = sizeof(suffix) - 1;

	return n >= m && !strcmp(path + n - m, suffix);
}

/*
 * The kernel's own names for files that never had a path: shared anonymous
 * memory is a shmem file named "dev/zero", SysV shared memory "SYSV<key>",
 * a memfd "memfd:<name>", an AIO ring (io_setup()) "[aio]"; all unlinked on
 * an internal mount.
 */
static inline int ghost_policy_unreachable_vma(const struct ghost_vma_facts *v,
					       char *reason, size_t len)
{
	unsigned long start = (unsigned long)v->start;
	const char *p = v->path;
	const char *what = "mapping of a deleted file";

	if (!p) {
		snprintf(reason, len,
			 "mapping of an unreachable file at %#lx is not supported",
			 start);
		return -EOPNOTSUPP;
	}
	if (ghost_policy_prefix(p, "/memfd:"))
		what = "memfd mapping";
	else if (ghost_policy_prefix(p, "/SYSV") && v->shared)
		what = "SysV shared memory";
	else if (!strcmp(p, "/dev/zero (deleted)") && v->shared)
		what = "shared anonymous memory";
	else if (!strcmp(p, "/[aio] (deleted)"))
		what = "AIO ring (io_setup)";
	else if (!ghost_policy_deleted(p))
		what = NULL;	/* an anonymous inode's file, another pseudo file */
	if (what)
		snprintf(reason, len, "%s at %#lx is not supported", what, start);
	else
		snprintf(reason, len, "mapping of %s at %#lx is not supported",
			 p, start);
	return -EOPNOTSUPP;
}

/* The GHOST_VMA_* flags of a mapping, or a refusal. */
static inline int ghost_policy_vma(const struct ghost_vma_facts *v,
				   const struct ghost_mm_facts *mm,
				   char *reason, size_t len)
{
	unsigned long start = (unsigned long)v->start;
	int flags = 0;

	if (v->special) {
		if (!strcmp(v->special, "[vdso]"))
			return GHOST_VMA_VDSO;
		/* 6.13+ splits the vvar area: [vvar] and [vvar_vclock]. */
		if (!strcmp(v->special, "[vvar]") ||
		    !strcmp(v->special, "[vvar_vclock]"))
			return GHOST_VMA_VVAR;
		snprintf(reason, len, "mapping %s at %#lx is not supported",
			 v->special, start);
		return -EOPNOTSUPP;
	}
	if (v->hugetlb) {
		snprintf(reason, len, "hugetlbfs mapping at %#lx is not supported",
			 start);
		return -EOPNOTSUPP;
	}
	if (v->device) {
		snprintf(reason, len, "device mapping at %#lx is not supported",
			 start);
		return -EOPNOTSUPP;
	}
	if (v->uffd_missing) {
		snprintf(reason, len,
			 "mapping at %#lx awaits pages from a userfaultfd (a lazy restart?): retry once they are in",
			 start);
		return -EBUSY;
	}
	if (v->file) {
		if (!v->reachable)
			return ghost_policy_unreachable_vma(v, reason, len);
		flags |= GHOST_VMA_FILE;
		if (v->shared)
			flags |= GHOST_VMA_SHARED;
	} else if (v->shared) {
		snprintf(reason, len,
			 "shared anonymous memory at %#lx is not supported", start);
		return -EOPNOTSUPP;
	} else if (mm->brk > mm->start_brk && v->start <= mm->start_brk &&
		   v->end >= mm->brk) {
		flags |= GHOST_VMA_HEAP;
	}
	if (v->growsdown)
		flags |= GHOST_VMA_GROWSDOWN;
	if (v->start <= mm->start_stack && mm->start_stack < v->end)
		flags |= GHOST_VMA_STACK;
	return flags;
}

/*
 * Guard pages (MADV_GUARD_INSTALL, Linux 6.13+) in a mapping, the first at
 * @addr: the image has no record for them, and restoring the mapping
 * without them would let the process read and write where it trapped.
 */
static inline int ghost_policy_guard(unsigned long addr, char *reason,
				     size_t len)
{
	snprintf(reason, len,
		 "guard pages (MADV_GUARD_INSTALL) at %#lx are not supported",
		 addr);
	return -EOPNOTSUPP;
}

/* ---- descriptors --------------------------------------------------------- */

struct ghost_fd_facts {
	unsigned int fd;
	unsigned int mode;	/* the inode's S_IFMT bits */
	unsigned int major, minor;	/* of a character device */
	bool reachable;		/* a file or directory: can be opened by path */
	bool deleted;		/* unlinked from a real file system */
	/*
	 * A file of /proc/PID/ whose process is gone (reaped), even if its
	 * pid now names another one.
	 */
	bool dead_proc;
	const char *path;	/* d_path(), readlink of /proc/PID/fd/N; or NULL */
	int pid;		/* the process's pid, as the exporter's /proc names it */
};

/*
 * Is @path a file of /proc/@pid/, the process's own (its /proc/self)? A
 * restart could not open it again: the pid is gone after a checkpoint that
 * kills, and names the original, not the copy, after one that does not.
 */
static inline bool ghost_policy_own_proc(const char *path, int pid)
{
	char dir[24];
	int n;

	if (!path || pid <= 0)
		return false;
	n = snprintf(dir, sizeof(dir), "/proc/%d/", pid);
	return n > 0 && !strncmp(path, dir, (size_t)n);
}

static inline bool ghost_policy_is_pty(unsigned int major, unsigned int minor)
{
	return (major >= UNIX98_PTY_MASTER_MAJOR &&
		major < UNIX98_PTY_MASTER_MAJOR + UNIX98_PTY_MAJOR_COUNT) ||
	       (major >= UNIX98_PTY_SLAVE_MAJOR &&
		major < UNIX98_PTY_SLAVE_MAJOR + UNIX98_PTY_MAJOR_COUNT) ||
	       (major == TTYAUX_MAJOR && minor == 2) ||
	       major == PTY_MASTER_MAJOR || major == PTY_SLAVE_MAJOR;
}

/*
 * The enum ghost_file_kind of a descriptor, or a refusal:
 *  - regular files, directories and memory-class devices (/dev/null, ...)
 *    are reopened by path;
 *  - pipes, FIFOs and terminals cannot be recreated on their own: the
 *    importer must hold one of the same kind at the same number;
 *  - everything else (sockets, pseudo-terminals, eventfd, epoll, O_PATH
 *    descriptors of symbolic links, ...) is refused, and so are a deleted
 *    device node or FIFO (the importer could not hold the same one), a
 *    file of a process that no longer exists and one of the process's own
 *    /proc directory.
 */
static inline int ghost_policy_fd(const struct ghost_fd_facts *f, char *reason,
				  size_t len)
{
	if (f->dead_proc) {
		snprintf(reason, len,
			 "fd %u is %s of a process that no longer exists", f->fd,
			 f->path ? f->path : "a /proc file");
		return -EOPNOTSUPP;
	}
	if (ghost_policy_own_proc(f->path, f->pid)) {
		snprintf(reason, len,
			 "fd %u is %s of the process itself, which a restart could not open again: not supported",
			 f->fd, f->path);
		return -EOPNOTSUPP;
	}
	if (S_ISLNK(f->mode)) {
		snprintf(reason, len,
			 "fd %u is an O_PATH descriptor of a symbolic link: not supported",
			 f->fd);
		return -EOPNOTSUPP;
	}
	if (f->deleted && (S_ISCHR(f->mode) || S_ISBLK(f->mode))) {
		snprintf(reason, len, "fd %u is a deleted device node: not supported",
			 f->fd);
		return -EOPNOTSUPP;
	}
	if (f->deleted && S_ISFIFO(f->mode)) {
		snprintf(reason, len, "fd %u is a deleted FIFO: not supported",
			 f->fd);
		return -EOPNOTSUPP;
	}
	if (S_ISREG(f->mode) || S_ISDIR(f->mode)) {
		if (f->reachable)
			return GHOST_FILE_PATH;
		if (f->path && ghost_policy_prefix(f->path, "/memfd:"))
			snprintf(reason, len, "fd %u is a memfd: not supported",
				 f->fd);
		else
			snprintf(reason, len,
				 "fd %u refers to a deleted file: not supported",
				 f->fd);
		return -EOPNOTSUPP;
	}
	if (S_ISFIFO(f->mode))
		return GHOST_FILE_INHERIT;
	if (S_ISCHR(f->mode)) {
		if (f->major == MEM_MAJOR)
			return GHOST_FILE_PATH;
		if (ghost_policy_is_pty(f->major, f->minor)) {
			snprintf(reason, len,
				 "fd %u is a pseudo-terminal: not supported", f->fd);
			return -EOPNOTSUPP;
		}
		if (f->major == TTY_MAJOR || f->major == TTYAUX_MAJOR)
			return GHOST_FILE_INHERIT;
		snprintf(reason, len,
			 "fd %u is a character device (%u:%u): not supported",
			 f->fd, f->major, f->minor);
		return -EOPNOTSUPP;
	}
	if (S_ISSOCK(f->mode)) {
		snprintf(reason, len,
			 "fd %u is a socket: sockets are not supported", f->fd);
		return -EOPNOTSUPP;
	}
	snprintf(reason, len, "fd %u (%s) is not supported", f->fd,
		 f->path ? f->path : "unnamed");
	return -EOPNOTSUPP;
}

/* ---- file locks ---------------------------------------------------------- */

/*
 * One lock the process holds through an open file, as /proc/PID/fdinfo
 * shows it under the file's first descriptor: flock and OFD locks the open
 * file owns, POSIX locks the process owns, leases.
 */
struct ghost_lock_facts {
	unsigned int fd;	/* the open file's first descriptor */
	int file_kind;		/* its enum ghost_file_kind */
	bool lease;		/* F_SETLEASE (or an NFS delegation) */
	__u32 kind;		/* else enum ghost_lock_kind */
};

/*
 * Locks are carried (LOCK records) on files reopened by path. A lease is
 * refused: the restored process could not get it back with the same
 * pending breaks, and another process's open waits for it to be broken. A
 * lock on an inherited file (pipe, FIFO, terminal) is refused: the
 * importer's descriptor there is not the image's open file.
 */
static inline int ghost_policy_lock(const struct ghost_lock_facts *l,
				    char *reason, size_t len)
{
	if (l->lease) {
		snprintf(reason, len,
			 "fd %u holds a lease (F_SETLEASE): leases are not supported",
			 l->fd);
		return -EOPNOTSUPP;
	}
	if (l->file_kind != GHOST_FILE_PATH) {
		snprintf(reason, len,
			 "fd %u holds a %s lock on an inherited file: not supported",
			 l->fd, l->kind == GHOST_LOCK_POSIX ? "POSIX" :
				l->kind == GHOST_LOCK_OFD ? "OFD" : "flock");
		return -EOPNOTSUPP;
	}
	return 0;
}

/* ---- registers ------------------------------------------------------------ */

/* The EFLAGS bits a user may set, as rt_sigreturn() allows them. */
#define GHOST_USER_EFLAGS \
	(X86_EFLAGS_AC | X86_EFLAGS_OF | X86_EFLAGS_DF | X86_EFLAGS_TF | \
	 X86_EFLAGS_SF | X86_EFLAGS_ZF | X86_EFLAGS_AF | X86_EFLAGS_PF | \
	 X86_EFLAGS_CF | X86_EFLAGS_RF)

/*
 * Registers of a task stopped on its way out of a system call, turned into
 * the user-mode state that runs the call again, as the kernel's own restart
 * would: a call interrupted with -ERESTART* gets ax back to its number and
 * ip on the syscall instruction (2 bytes) again. @restart_block: an
 * interrupted sleep keeps its remaining time (restart_syscall(2)), which
 * only the same task can use; otherwise it is re-issued with its original
 * arguments (see ghost_policy_sleep_left() for a sleep that said what it had
 * left). orig_ax becomes -1: the result is not inside a system call (and
 * both importers set it so anyway).
 */
static inline void ghost_policy_restart(__u64 *ax, __u64 *orig_ax, __u64 *ip,
					bool restart_block)
{
	if ((__s64)*orig_ax < 0)
		return;
	switch ((__s64)*ax) {
	case -ERESTARTSYS:
	case -ERESTARTNOINTR:
	case -ERESTARTNOHAND:
		*ax = *orig_ax;
		*ip -= 2;
		break;
	case -ERESTART_RESTARTBLOCK:
		*ax = restart_block ? __NR_restart_syscall : *orig_ax;
		*ip -= 2;
		break;
	}
	*orig_ax = (__u64)-1;
}

/* clock_nanosleep()'s flag for an absolute deadline (uapi linux/time.h). */
#define GHOST_TIMER_ABSTIME	0x01

/*
 * A relative nanosleep() or clock_nanosleep() interrupted with
 * -ERESTART_RESTARTBLOCK has already written the time it had left into its
 * rem argument, when the caller gave one (do_nanosleep()). A new task
 * cannot use the old one's restart block, so the call is re-issued with
 * rem as its request: it sleeps what was left, not its whole length again.
 * Without rem there is nothing to go by and the whole length is slept.
 * Call before ghost_policy_restart(), which overwrites ax.
 */
static inline void ghost_policy_sleep_left(__u64 ax, __u64 orig_ax, __u64 si,
					   __u64 r10, __u64 *di, __u64 *dx)
{
	if ((__s64)ax != -ERESTART_RESTARTBLOCK)
		return;
	if (orig_ax == __NR_nanosleep && si)
		*di = si;
	else if (orig_ax == __NR_clock_nanosleep &&
		 !(si & GHOST_TIMER_ABSTIME) && r10)
		*dx = r10;
}

#endif /* GHOST_POLICY_H */
