/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The two descriptors GHOST_IOC_EXPORT takes for its target, in C: a pidfd
 * (no pid reuse race) and the target's /proc/PID/mem opened by the caller.
 * The open of /proc/PID/mem is the access check (the kernel's ptrace rule,
 * LSMs and Yama included); the pidfd is opened first, so that if the pid
 * was reused in between, the module sees two different processes and
 * refuses.
 */
#ifndef GHOST_C_EXPORT_TARGET_H
#define GHOST_C_EXPORT_TARGET_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <linux/ghost.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/*
 * Fills @e->pidfd and @e->mem_fd for @pid. On failure returns -1 with errno
 * from the step that failed and *@step naming it ("pidfd_open" or
 * "/proc/PID/mem"); nothing stays open.
 */
static inline int ghost_export_target_open(struct ghost_export *e, pid_t pid,
					   const char **step)
{
	char path[64];
	int pidfd, mem, err;

	*step = "pidfd_open";
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -1;
	*step = "/proc/PID/mem";
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	mem = open(path, O_RDONLY | O_CLOEXEC);
	if (mem < 0) {
		err = errno;
		close(pidfd);
		errno = err;
		return -1;
	}
	e->pidfd = pidfd;
	e->mem_fd = mem;
	return 0;
}

static inline void ghost_export_target_close(struct ghost_export *e)
{
	if (e->pidfd >= 0)
		close(e->pidfd);
	if (e->mem_fd >= 0)
		close(e->mem_fd);
	e->pidfd = -1;
	e->mem_fd = -1;
}

#endif /* GHOST_C_EXPORT_TARGET_H */
