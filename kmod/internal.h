/* SPDX-License-Identifier: GPL-2.0 */
/* Declarations shared between the files of ghost.ko. */
#ifndef GHOST_INTERNAL_H
#define GHOST_INTERNAL_H

#include <linux/fs.h>
#include <linux/types.h>

/* device.c: the /dev/ghost character device. */
int ghost_device_init(void);
void ghost_device_exit(void);

/* ioctl.c: ioctl dispatch on /dev/ghost. */
long ghost_dev_ioctl(struct file *file, unsigned int cmd, unsigned long arg);

/* uarg.c: size-extensible ioctl arguments (see uapi/linux/ghost.h). */
int ghost_uarg_in(void *karg, size_t ksize, size_t min_size,
		  const void __user *uarg, u32 *usize);
int ghost_uarg_out(void __user *uarg, u32 usize, const void *karg,
		   size_t ksize);

#endif /* GHOST_INTERNAL_H */
