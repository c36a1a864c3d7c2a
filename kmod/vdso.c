// SPDX-License-Identifier: GPL-2.0
/*
 * The identity of a vDSO: the size of the [vdso] mapping and the crc32c of
 * its bytes. Export records the target's; import compares it with the
 * importer's own, because a restored process keeps calling into the vDSO
 * at the addresses it had (its code, its symbol offsets), and another
 * kernel's vDSO of the same size may have them elsewhere.
 */
#include <linux/crc32c.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/ghost.h>

#include "capture.h"
#include "compat.h"
#include "import.h"

/* Of @mm, whose mmap lock the caller holds; *size is 0 when it has none. */
int ghost_vdso_id(struct mm_struct *mm, u32 *size, u32 *crc)
{
	unsigned long start = (unsigned long)mm->context.vdso;
	struct vm_area_struct *vma;
	unsigned long addr;
	u32 c = ~0U;

	lockdep_assert_held(&mm->mmap_lock);
	*size = 0;
	*crc = 0;
	vma = start ? vma_lookup(mm, start) : NULL;
	if (!vma || vma->vm_start != start)
		return 0;
	for (addr = vma->vm_start; addr < vma->vm_end; addr += PAGE_SIZE) {
		struct page *pg;
		long got = ghost_gup_remote(mm, addr, 1, FOLL_FORCE, &pg);
		void *v;

		if (got != 1)
			return got < 0 ? got : -EFAULT;
		v = kmap_local_page(pg);
		c = crc32c(c, v, PAGE_SIZE);
		kunmap_local(v);
		put_page(pg);
	}
	*size = vma->vm_end - vma->vm_start;
	*crc = ~c;
	return 0;
}

/* An image that recorded its vDSO needs this kernel's to be the same. */
int ghost_check_vdso(const struct ghost_staged *st, char *reason)
{
	struct mm_struct *mm = current->mm;
	u32 size, crc;
	int err;

	if (!(st->hdr.features & GHOST_IMAGE_FEAT_VDSO_ID))
		return 0;
	mmap_read_lock(mm);
	err = ghost_vdso_id(mm, &size, &crc);
	mmap_read_unlock(mm);
	if (err)
		return err;
	if (size != st->mm.vdso_size || crc != st->mm.vdso_crc32c) {
		ghost_reason(reason, GHOST_VDSO_MISMATCH_REASON, st->mm.vdso_size,
			     st->mm.vdso_crc32c, size, crc);
		return -EOPNOTSUPP;
	}
	return 0;
}
