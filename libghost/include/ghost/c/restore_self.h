/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Rebuild the calling process from a ghost (ghost.ko), in C.
 *
 * GHOST_IOC_IMPORT restores in place and the running kernel's vDSO must sit
 * where the image had it. A module cannot move the vDSO, so this does it
 * between the two import calls, with arch_prctl(ARCH_MAP_VDSO_64) (a stable
 * system call CRIU uses for the same purpose). After the vDSO moved, no libc
 * function that uses it (time functions) may be called until the import.
 * In the same way, between the calls, it makes itself what no module can
 * make it: the leader of a new session (setsid()) or of its own process
 * group (setpgid(0, 0)) if the image's process was, and registered for
 * the image's membarrier commands. The ids themselves cannot be restored.
 * It calls syscall(2), which glibc declares only with _DEFAULT_SOURCE: build
 * with -std=gnu11 (the compilers' default) or define _GNU_SOURCE.
 */
#ifndef GHOST_C_RESTORE_SELF_H
#define GHOST_C_RESTORE_SELF_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/ghost.h>
#include <linux/membarrier.h>

#include "ghost/c/assume_creds.h"

#ifndef ARCH_MAP_VDSO_64
#define ARCH_MAP_VDSO_64 0x2003
#endif

/* Unmaps this process's [vvar] and [vdso] and maps them at @vvar_start. */
static inline int ghost_move_vdso(unsigned long vvar_start)
{
	unsigned long start[4], end[4];
	int n = 0, i;
	char line[256];
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return -1;
	while (n < 4 && fgets(line, sizeof(line), f)) {
		if (strstr(line, "[vvar]") || strstr(line, "[vdso]")) {
			if (sscanf(line, "%lx-%lx", &start[n], &end[n]) == 2)
				n++;
		}
	}
	fclose(f);
	for (i = 0; i < n; i++)
		if (syscall(SYS_munmap, start[i], end[i] - start[i]))
			return -1;
	return syscall(SYS_arch_prctl, ARCH_MAP_VDSO_64, vvar_start) < 0 ? -1 : 0;
}

/*
 * What GHOST_IMPORT_PREPARE said this process must make itself: membarrier
 * registrations, then a new session or its own process group. A process
 * that leads its group cannot start a session (setsid() fails): libghost
 * restarts from a fresh child, which does not. 0, or -1 with errno and
 * im->reason.
 */
static inline int ghost_become_image(struct ghost_import *im)
{
	static const struct {
		__u32 bit;
		int cmd;
	} mb[] = {
		{ GHOST_MEMBARRIER_GLOBAL_EXPEDITED, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED },
		{ GHOST_MEMBARRIER_PRIVATE_EXPEDITED, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED },
		{ GHOST_MEMBARRIER_PRIVATE_EXPEDITED_SYNC_CORE,
		  MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE },
		{ GHOST_MEMBARRIER_PRIVATE_EXPEDITED_RSEQ,
		  MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ },
	};
	unsigned int i;

	for (i = 0; i < sizeof(mb) / sizeof(mb[0]); i++) {
		if ((im->membarrier & mb[i].bit) &&
		    syscall(SYS_membarrier, mb[i].cmd, 0, 0)) {
			snprintf(im->reason, sizeof(im->reason),
				 GHOST_MEMBARRIER_REASON, im->membarrier);
			errno = EOPNOTSUPP;
			return -1;
		}
	}
	if (im->attrs & GHOST_ATTRS_SESSION_LEADER) {
		if (getsid(0) != getpid() && setsid() < 0) {
			snprintf(im->reason, sizeof(im->reason),
				 GHOST_SETSID_REASON, (int)getpid());
			errno = EPERM;
			return -1;
		}
	} else if ((im->attrs & GHOST_ATTRS_GROUP_LEADER) &&
		   getpgid(0) != getpid() && setpgid(0, 0)) {
		snprintf(im->reason, sizeof(im->reason),
			 "cannot make the restarter lead its own process group: %s",
			 strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The image's CPU limit, which a module can set but not enforce
 * (GHOST_IMPORT_ATTRS_CPU_LIMIT): sets RLIMIT_CPU's soft limit to it (at
 * most the hard limit this process has now; the import then sets both as
 * the image had them), which arms the CPU timer. SIGXCPU is blocked until
 * the import sets the image's signal mask: this process's CPU time may be
 * past the limit already, and the signal is for the restored process (the
 * kernel sends it again after each further second). @old keeps what
 * ghost_disarm_cpu_limit() puts back if the import fails.
 */
struct ghost_cpu_limit_saved {
	struct rlimit lim;
	sigset_t mask;
	int armed;
};

static inline int ghost_arm_cpu_limit(const struct ghost_import *im,
				      struct ghost_cpu_limit_saved *old)
{
	struct rlimit lim;
	sigset_t xcpu;

	old->armed = 0;
	if (!(im->attrs & GHOST_IMPORT_ATTRS_CPU_LIMIT))
		return 0;
	if (getrlimit(RLIMIT_CPU, &old->lim))
		return -1;
	lim = old->lim;
	lim.rlim_cur = im->cpu_limit < lim.rlim_max ? im->cpu_limit : lim.rlim_max;
	sigemptyset(&xcpu);
	sigaddset(&xcpu, SIGXCPU);
	if (sigprocmask(SIG_BLOCK, &xcpu, &old->mask))
		return -1;
	if (setrlimit(RLIMIT_CPU, &lim)) {
		int err = errno;

		sigprocmask(SIG_SETMASK, &old->mask, NULL);
		errno = err;
		return -1;
	}
	old->armed = 1;
	return 0;
}

static inline void ghost_disarm_cpu_limit(const struct ghost_cpu_limit_saved *old)
{
	int err = errno;

	if (old->armed) {
		setrlimit(RLIMIT_CPU, &old->lim);
		sigprocmask(SIG_SETMASK, &old->mask, NULL);
	}
	errno = err;
}

/*
 * Restores the image behind ghost descriptor @g into this process. Returns
 * only on failure: -1 with errno set and im->reason filled when the module
 * gave one. An image with credentials the caller may not assume is refused
 * with the caller unchanged; one it may is restored as them: the caller
 * switches to them (ghost_assume_creds()) just before the last call. A
 * failure after PREPARE leaves the caller alive, but its vDSO may have
 * moved and its credentials may be the image's. @flags: 0 or
 * GHOST_IMPORT_STOPPED (the restored process stops before it runs; given
 * to both calls, so a module without it refuses before anything changed)
 * and GHOST_IMPORT_OWNER (the image must run as uid @owner and as nothing
 * more, checked before any file it names is opened; a module without it
 * refuses the first call with EINVAL or E2BIG and no reason).
 */
static inline int ghost_restore_self_as(int g, struct ghost_import *im,
					__u32 flags, __u32 owner)
{
	const size_t creds_max = sizeof(struct ghost_creds) +
				 GHOST_NGROUPS_MAX * sizeof(__u32);
	struct ghost_cpu_limit_saved cpu;
	struct ghost_creds *creds = (struct ghost_creds *)malloc(creds_max);
	int err;

	if (!creds)
		return -1;
	memset(&cpu, 0, sizeof(cpu));
	memset(im, 0, sizeof(*im));
	im->size = sizeof(*im);
	im->flags = GHOST_IMPORT_PREPARE | flags;
	im->owner = (flags & GHOST_IMPORT_OWNER) ? owner : 0;
	im->creds = (__u64)(unsigned long)creds;
	im->creds_size = creds_max;
	if (ioctl(g, GHOST_IOC_IMPORT, im))
		goto fail;
	/*
	 * The image's pages will be this process's memory: from here on no
	 * one may open /proc/PID/mem (which keeps reading after a later
	 * PR_SET_DUMPABLE 0) or ptrace it. Again after a change of
	 * credentials, which sets suid_dumpable (1 on some systems).
	 */
	if (im->attrs & GHOST_ATTRS_NOT_DUMPABLE) {
		/*
		 * Its loginuid first: once not dumpable, /proc/self is root's,
		 * and a caller that is not root could no longer write it.
		 */
		if (im->creds_len && ghost_creds_loginuid(creds->loginuid)) {
			ghost_creds_fail(im->reason, sizeof(im->reason),
					 "writing /proc/self/loginuid");
			goto fail;
		}
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	}
	if (im->creds_len && ghost_creds_own_session(creds, im->reason, sizeof(im->reason)))
		goto fail;
	if (ghost_become_image(im))
		goto fail;
	if (im->vdso_start && im->vdso_start != getauxval(AT_SYSINFO_EHDR) &&
	    ghost_move_vdso(im->vvar_start)) {
		snprintf(im->reason, sizeof(im->reason),
			 "cannot move the vDSO to %#llx: %s",
			 (unsigned long long)im->vvar_start, strerror(errno));
		goto fail;
	}
	if (im->creds_len &&
	    ghost_assume_creds(creds, (const __u32 *)(creds + 1), im->reason,
			       sizeof(im->reason)))
		goto fail;
	if (im->attrs & GHOST_ATTRS_NOT_DUMPABLE)
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (ghost_arm_cpu_limit(im, &cpu)) {
		snprintf(im->reason, sizeof(im->reason),
			 "cannot set the image's CPU time limit of %llu s: %s",
			 (unsigned long long)im->cpu_limit, strerror(errno));
		goto fail;
	}
	im->flags = flags;
	im->creds = 0;
	im->creds_size = 0;
	ioctl(g, GHOST_IOC_IMPORT, im);
	ghost_disarm_cpu_limit(&cpu);
fail:
	err = errno;
	free(creds);
	errno = err;
	return -1;	/* a successful import does not return here */
}

/* ghost_restore_self_as() without an owner to check. */
static inline int ghost_restore_self_flags(int g, struct ghost_import *im,
					   __u32 flags)
{
	return ghost_restore_self_as(g, im, flags & ~GHOST_IMPORT_OWNER, 0);
}

/* ghost_restore_self_flags() without flags. */
static inline int ghost_restore_self(int g, struct ghost_import *im)
{
	return ghost_restore_self_flags(g, im, 0);
}

/*
 * ghost_restore_self_flags() with GHOST_IMPORT_DIRECT (page data read from
 * an image file straight into place, Documentation/ioctl-api.md) where the
 * module has it: a module without it refuses the flag on the first call,
 * before anything changed, and the import is then made as it can.
 */
static inline int ghost_restore_self_direct_as(int g, struct ghost_import *im,
					       __u32 flags, __u32 owner)
{
	ghost_restore_self_as(g, im, flags | GHOST_IMPORT_DIRECT, owner);
	if (errno != EINVAL || im->reason[0])
		return -1;
	return ghost_restore_self_as(g, im, flags, owner);
}

/* ghost_restore_self_direct_as() without an owner to check. */
static inline int ghost_restore_self_direct(int g, struct ghost_import *im,
					    __u32 flags)
{
	return ghost_restore_self_direct_as(g, im, flags & ~GHOST_IMPORT_OWNER, 0);
}

#endif /* GHOST_C_RESTORE_SELF_H */
