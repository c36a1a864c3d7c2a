/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * ghost: process virtualization for Linux clusters.
 *
 * This header is the contract between ghost.ko and user space: the ioctls on
 * /dev/ghost and (from image format v1 on) the records of a ghost image.
 * Kernel C and userland C/C++ both include it.
 *
 * Rules every struct here follows (see Documentation/ioctl-api.md):
 *  - fixed-size __u16/__u32/__u64 fields, natural alignment, explicit padding;
 *  - pointers travel as __u64;
 *  - the first field is __u32 size: the caller sets it to the sizeof() it was
 *    compiled with. The module accepts smaller (older) structs by treating
 *    the missing tail as zero, and larger (newer) ones only when the part it
 *    does not know is all zero (E2BIG otherwise). Output is copied back up to
 *    the smaller of the two sizes. Structs grow only at the end;
 *  - unknown flags and non-zero reserved or padding fields give EINVAL.
 *
 * Because the size travels inside the struct, the module dispatches on the
 * ioctl type and number only; the size bits of the command are not checked.
 */
#ifndef _UAPI_LINUX_GHOST_H
#define _UAPI_LINUX_GHOST_H

#include <linux/const.h>
#include <linux/ioctl.h>
#include <linux/types.h>

#define GHOST_DEVICE_NAME "ghost"

/* 0xB8 is unused in Documentation/userspace-api/ioctl/ioctl-number.rst (6.1). */
#define GHOST_IOC_MAGIC 0xB8

/* Version of this interface. A new major means an incompatible change. */
#define GHOST_ABI_MAJOR 0
#define GHOST_ABI_MINOR 1
#define GHOST_ABI_PATCH 0

/*
 * Feature bits reported by GHOST_IOC_VERSION. A bit is set only when the
 * loaded module implements the feature completely; tools must test the bit
 * rather than the version numbers.
 */
#define GHOST_FEAT_EXPORT         _BITULL(0) /* GHOST_IOC_EXPORT */
#define GHOST_FEAT_IMPORT         _BITULL(1) /* GHOST_IOC_IMPORT */
#define GHOST_FEAT_BACKEND_MEMORY _BITULL(2) /* memory resource object */
#define GHOST_FEAT_BACKEND_FILE   _BITULL(3) /* file/pipe resource object */
#define GHOST_FEAT_BACKEND_NET    _BITULL(4) /* stream socket resource object */
#define GHOST_FEAT_EVENTS         _BITULL(5) /* generic netlink "ghost" events */

/* All bits this header knows about, so tools can name unknown ones. */
#define GHOST_FEAT_ALL \
	(GHOST_FEAT_EXPORT | GHOST_FEAT_IMPORT | GHOST_FEAT_BACKEND_MEMORY | \
	 GHOST_FEAT_BACKEND_FILE | GHOST_FEAT_BACKEND_NET | GHOST_FEAT_EVENTS)

/**
 * struct ghost_version - argument of GHOST_IOC_VERSION
 * @size:          in: sizeof(struct ghost_version) as compiled by the caller
 * @flags:         in: must be 0
 * @major:         out: GHOST_ABI_MAJOR of the module
 * @minor:         out: GHOST_ABI_MINOR of the module
 * @patch:         out: GHOST_ABI_PATCH of the module
 * @__pad:         must be 0
 * @image_version: out: image format version export writes (0: no export)
 * @image_min:     out: oldest image format version import accepts (0: none)
 * @features:      out: GHOST_FEAT_* bits implemented by the module
 * @resv:          must be 0
 */
struct ghost_version {
	__u32 size;
	__u32 flags;
	__u16 major;
	__u16 minor;
	__u16 patch;
	__u16 __pad;
	__u32 image_version;
	__u32 image_min;
	__u64 features;
	__u64 resv[4];
};

#define GHOST_VERSION_SIZE_VER0 64 /* sizeof first published struct */

/* Query the module's interface version and features; on /dev/ghost. */
#define GHOST_IOC_VERSION _IOWR(GHOST_IOC_MAGIC, 0x00, struct ghost_version)

#endif /* _UAPI_LINUX_GHOST_H */
