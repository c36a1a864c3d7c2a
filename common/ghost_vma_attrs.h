/* SPDX-License-Identifier: GPL-2.0 OR LGPL-2.1-or-later */
/*
 * Mapping attributes (GHOST_VMA_MAYWRITE .. GHOST_VMA_RAND_READ, the
 * GHOST_VMA_ATTRS bits of ghost_vma.flags, with GHOST_IMAGE_FEAT_VMA_ATTRS):
 * what both image readers accept, and the sentences both importers give
 * when an image's attributes cannot be restored here. Compiled by ghost.ko
 * and libghost; not installed.
 */
#ifndef GHOST_VMA_ATTRS_H
#define GHOST_VMA_ATTRS_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdbool.h>
#include <linux/types.h>
#endif
#include <linux/ghost.h>

/*
 * Restart-time refusals, before the point of no return. The importer's
 * locked memory (mlock, GHOST_VMA_LOCKED) counts against its own
 * RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK, as mlock(2) would: KiB image,
 * KiB limit.
 */
#define GHOST_MEMLOCK_REASON \
	"the image locks %llu KiB of memory (mlock), above this caller's RLIMIT_MEMLOCK of %llu KiB (and no CAP_IPC_LOCK)"
/* madvise() advice the importing kernel does not take (no KSM, no THP). */
#define GHOST_ADVICE_REASON \
	"this kernel does not take %s, which the image's mapping at %#llx has (error %d)"
/* A MAP_SHARED mapping that may be made writable needs its file read-write. */
#define GHOST_MAYWRITE_REASON \
	"cannot open %s read-write for its shared mapping at %#llx, which may be made writable (error %d)"

/*
 * Whether a VMA record's attribute bits are well-formed: only with the
 * feature bit, never on the vDSO, and only combinations the kernel makes
 * (lock-on-fault is a kind of lock; one huge-page advice and one read
 * advice at a time; wipe-on-fork and KSM only on private memory).
 */
static inline bool ghost_vma_attrs_valid(__u32 flags, __u64 features)
{
	__u32 a = flags & GHOST_VMA_ATTRS;

	if (!a)
		return true;
	if (!(features & GHOST_IMAGE_FEAT_VMA_ATTRS) ||
	    (flags & (GHOST_VMA_VDSO | GHOST_VMA_VVAR)))
		return false;
	if ((a & GHOST_VMA_LOCKONFAULT) && !(a & GHOST_VMA_LOCKED))
		return false;
	if ((a & GHOST_VMA_HUGEPAGE) && (a & GHOST_VMA_NOHUGEPAGE))
		return false;
	if ((a & GHOST_VMA_SEQ_READ) && (a & GHOST_VMA_RAND_READ))
		return false;
	if ((a & GHOST_VMA_WIPEONFORK) && (flags & GHOST_VMA_FILE))
		return false;
	if ((a & GHOST_VMA_MERGEABLE) && (flags & GHOST_VMA_SHARED))
		return false;
	return true;
}

#endif /* GHOST_VMA_ATTRS_H */
