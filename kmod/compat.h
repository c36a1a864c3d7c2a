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

/* 6.3 made vm_flags read-only behind helpers. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
#define ghost_vm_flags_clear(vma, flags) vm_flags_clear(vma, flags)
#else
#define ghost_vm_flags_clear(vma, flags) ((vma)->vm_flags &= ~(flags))
#endif

/* 6.5 dropped the vmas argument of get_user_pages_remote(). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 5, 0)
#define ghost_gup_remote(mm, start, nr, flags, pages) \
	get_user_pages_remote(mm, start, nr, flags, pages, NULL)
#else
#define ghost_gup_remote(mm, start, nr, flags, pages) \
	get_user_pages_remote(mm, start, nr, flags, pages, NULL, NULL)
#endif

/* 6.3 made rseq extensible and added task->rseq_len; before, it was 32. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
#define ghost_rseq_len(t) ((t)->rseq_len)
#define ghost_set_rseq_len(t, len) ((t)->rseq_len = (len))
#else
#define ghost_rseq_len(t) ((t)->rseq ? 32U : 0U)
#define ghost_set_rseq_len(t, len) do { } while (0)
#endif

#endif /* GHOST_COMPAT_H */
