/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between kernel versions, in one place. The target is Debian
 * 12's 6.1; newer kernels changed a few driver-model signatures.
 */
#ifndef GHOST_COMPAT_H
#define GHOST_COMPAT_H

#include <linux/version.h>
#include <linux/device.h>

/* 6.4 dropped the owner argument of class_create(). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
#define ghost_class_create(name) class_create(name)
#else
#define ghost_class_create(name) class_create(THIS_MODULE, name)
#endif

/* 6.2 made the device argument of device_type.devnode const. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
#define GHOST_DEVNODE_CONST const
#else
#define GHOST_DEVNODE_CONST
#endif

#endif /* GHOST_COMPAT_H */
