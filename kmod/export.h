/* SPDX-License-Identifier: GPL-2.0 */
/* What export.c shares with snapshot.c: finding and checking the target. */
#ifndef GHOST_EXPORT_H
#define GHOST_EXPORT_H

#include <linux/sched.h>

#include "capture.h"

struct task_struct *ghost_pidfd_task(int fd, char *reason);
int ghost_check_target(struct task_struct *task, struct task_struct *snap,
		       char *reason);
int ghost_check_mem_fd(int fd, struct task_struct *task, struct mm_struct *mm,
		       char *reason);
int ghost_save_cpu(struct task_struct *task, struct ghost_cpu *cpu);

#endif /* GHOST_EXPORT_H */
