/* SPDX-License-Identifier: GPL-2.0 OR LGPL-2.1-or-later */
/*
 * What an image reader knows of the record sizes, one table for the
 * kernel's reader (kmod/stage.c) and libghost's (libghost/src/image.cpp).
 * Not uapi: it is a reader's knowledge of the versions it reads, built from
 * the uapi structs and their version-1 sizes.
 */
#ifndef GHOST_FORMAT_H
#define GHOST_FORMAT_H

#ifdef __KERNEL__
#include <linux/stat.h>
#else
#include <sys/stat.h>
#endif
#include <linux/types.h>
#include <linux/ghost.h>

/*
 * The record size of a section of @type in images of @version as this
 * reader knows it; version 1's is also the smallest a reader takes. 0: a
 * type it does not know.
 */
static inline __u32 ghost_record_size(__u32 type, __u32 version)
{
	switch (type) {
	case GHOST_SEC_TASK:
		return sizeof(struct ghost_task);
	case GHOST_SEC_REGS:
		return sizeof(struct ghost_regs);
	case GHOST_SEC_XSTATE:
		return sizeof(struct ghost_xstate);
	case GHOST_SEC_SIGNALS:
		return sizeof(struct ghost_signals);
	case GHOST_SEC_FS:
		return sizeof(struct ghost_fs);
	case GHOST_SEC_RLIMITS:
		return sizeof(struct ghost_rlimits);
	case GHOST_SEC_MM:
		return version == 1 ? GHOST_MM_SIZE_VER1 : sizeof(struct ghost_mm);
	case GHOST_SEC_VMA:
		return sizeof(struct ghost_vma);
	case GHOST_SEC_PAGES:
		return sizeof(struct ghost_pages);
	case GHOST_SEC_FILE:
		return version == 1 ? GHOST_FILE_SIZE_VER1 : sizeof(struct ghost_file);
	case GHOST_SEC_END:
		return version == 1 ? GHOST_END_SIZE_VER1 : sizeof(struct ghost_end);
	case GHOST_SEC_CREDS:
		return version == 1 ? 0 : sizeof(struct ghost_creds);
	case GHOST_SEC_ATTRS:
		return version == 1 ? 0 : sizeof(struct ghost_attrs);
	case GHOST_SEC_LOCK:
		return version == 1 ? 0 : sizeof(struct ghost_lock);
	case GHOST_SEC_PARENT:
		return version == 1 ? 0 : sizeof(struct ghost_parent);
	default:
		return 0;
	}
}

/*
 * The smallest record a reader takes for @type in images of @version: the
 * version-1 size, or for a section version 1 did not have, its size (0: a
 * type this reader does not know in @version).
 */
static inline __u32 ghost_record_min_size(__u32 type, __u32 version)
{
	__u32 v1 = ghost_record_size(type, 1);

	return v1 || version == 1 ? v1 : ghost_record_size(type, version);
}

/*
 * Whether a FILE record of kind INHERIT may have @mode: a pipe or a terminal
 * (ghost_policy.h decides which files are inherited). Any other would hand
 * the image whatever the restorer has open at that number.
 */
static inline int ghost_file_inheritable(__u32 mode)
{
	return S_ISFIFO(mode) || S_ISCHR(mode);
}

/*
 * Whether a FILE record of kind PATH may have @mode: what the exporter
 * reopens by path (a regular file, a directory, a memory-class device).
 * Opening anything else could block (a FIFO) or act on another process.
 */
static inline int ghost_file_reopenable(__u32 mode)
{
	return S_ISREG(mode) || S_ISDIR(mode) || S_ISCHR(mode);
}

/*
 * Whether the pages an image carries for a private file mapping lie within
 * the file as it is now: @end_page is the file page after the last carried
 * one (the mapping's offset in pages plus the pages up to the end of its
 * last run), @size the file's bytes. A page past the end of a file faults
 * with SIGBUS, for a private copy as well, so no restore could place it:
 * both engines refuse such an image before their point of no return. (A
 * process keeps pages it copied before its file was cut short; its image
 * restores again once the file is as long as it was.)
 */
static inline int ghost_pages_within_file(__u64 end_page, __u64 size,
					  __u64 page_size)
{
	return end_page <= size / page_size + (size % page_size != 0);
}

/* Arguments: the mapping's start, the file's size, the end, the path (last: long). */
#define GHOST_FILE_SHORT_REASON \
	"the file mapped at %#llx is %llu bytes now, the image has its pages to byte %llu (grow it back): %s"

#endif /* GHOST_FORMAT_H */
