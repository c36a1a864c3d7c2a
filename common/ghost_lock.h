/* SPDX-License-Identifier: GPL-2.0 OR LGPL-2.1-or-later */
/*
 * LOCK records (struct ghost_lock), one copy for both image readers
 * (kmod/stage.c, libghost/src/image.cpp) and both importers: what a record
 * may hold, and the sentence an import fails with when another process
 * holds a conflicting lock now. Not uapi.
 */
#ifndef GHOST_LOCK_H
#define GHOST_LOCK_H

#ifdef __KERNEL__
#include <linux/kernel.h>
#include <linux/types.h>
#else
#include <stdio.h>
#include <linux/types.h>
#endif
#include <linux/ghost.h>

/* F_RDLCK and F_WRLCK of <asm-generic/fcntl.h>, as the record holds them. */
#define GHOST_LOCK_RDLCK 0
#define GHOST_LOCK_WRLCK 1

/* The largest file offset (the kernel's OFFSET_MAX, LLONG_MAX). */
#define GHOST_LOCK_OFFSET_MAX 0x7fffffffffffffffULL

static inline const char *ghost_lock_kind_name(__u32 kind)
{
	switch (kind) {
	case GHOST_LOCK_POSIX:
		return "POSIX";
	case GHOST_LOCK_OFD:
		return "OFD";
	case GHOST_LOCK_FLOCK:
		return "flock";
	default:
		return "unknown";
	}
}

/*
 * What is wrong with a LOCK record on its own, or NULL: the kind, the type,
 * the reserved words, the range (flock has none; a POSIX or OFD range ends
 * at the largest offset at most).
 */
static inline const char *ghost_lock_malformed(const struct ghost_lock *l)
{
	if (l->kind != GHOST_LOCK_POSIX && l->kind != GHOST_LOCK_OFD &&
	    l->kind != GHOST_LOCK_FLOCK)
		return "has an unknown kind";
	if (l->type != GHOST_LOCK_RDLCK && l->type != GHOST_LOCK_WRLCK)
		return "has an unknown type";
	if (l->resv[0] || l->resv[1])
		return "has non-zero reserved words";
	if (l->kind == GHOST_LOCK_FLOCK && (l->start || l->len))
		return "is a flock lock with a byte range";
	if (l->start > GHOST_LOCK_OFFSET_MAX || l->len > GHOST_LOCK_OFFSET_MAX ||
	    (l->len && l->len - 1 > GHOST_LOCK_OFFSET_MAX - l->start))
		return "has a byte range beyond the largest file offset";
	return NULL;
}

/*
 * The reason an import gives when it cannot take a lock of the image again
 * because another process holds a conflicting one now (both engines; before
 * the point of no return the caller is left as it was). @path may be long:
 * it comes last.
 */
static inline void ghost_lock_conflict(char *reason, size_t len,
				       const struct ghost_lock *l, int fd,
				       const char *path)
{
	const char *type = l->type == GHOST_LOCK_WRLCK ? "write" : "read";
	const char *what = "conflicts with another process's lock now";

	if (l->kind == GHOST_LOCK_FLOCK)
		snprintf(reason, len, "the flock %s lock of fd %d %s: %s", type,
			 fd, what, path);
	else if (l->len)
		snprintf(reason, len,
			 "the %s %s lock of fd %d (bytes %llu-%llu) %s: %s",
			 ghost_lock_kind_name(l->kind), type, fd,
			 (unsigned long long)l->start,
			 (unsigned long long)(l->start + l->len - 1), what, path);
	else
		snprintf(reason, len,
			 "the %s %s lock of fd %d (bytes %llu-EOF) %s: %s",
			 ghost_lock_kind_name(l->kind), type, fd,
			 (unsigned long long)l->start, what, path);
}

#endif /* GHOST_LOCK_H */
