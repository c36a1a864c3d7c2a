// SPDX-License-Identifier: GPL-2.0
/*
 * Mapping attributes (GHOST_VMA_ATTRS): mlock, MAP_NORESERVE, the madvise
 * flags and the maximum protection of a shared file mapping, read from
 * vm_flags at export and given back at import.
 *
 * A module cannot call madvise() or mlock() (do_madvise(), mlock_fixup()
 * and khugepaged's entry points are not exported), and setting vm_flags of
 * a mapped VMA by hand would neither split nor merge VMAs as they do, nor
 * account or populate locked memory. So the import creates each VMA with
 * its attributes: vm_mmap() ORs mm->def_flags into a new mapping's flags
 * (as mlockall(MCL_FUTURE) uses it), and do_mmap()'s own work follows
 * from them — RLIMIT_MEMLOCK checked, locked_vm accounted, a VM_LOCKED
 * mapping populated (lock-on-fault: not), khugepaged told of a
 * VM_HUGEPAGE one, VMAs merged only with neighbours of the same flags.
 * MAP_NORESERVE is an mmap flag; KSM registers the mm through the exported
 * ksm_madvise(). The importer is single-threaded, so nothing else maps
 * while def_flags holds the image's attributes.
 */
#include <linux/capability.h>
#include <linux/ctype.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/ksm.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/ghost.h>
#include <ghost_policy.h>
#include <ghost_vma_attrs.h>

#include "capture.h"
#include "import.h"

static const struct {
	unsigned long vm;
	u32 ghost;
} attrs[] = {
	{ VM_MAYWRITE, GHOST_VMA_MAYWRITE },
	{ VM_LOCKED, GHOST_VMA_LOCKED },
	{ VM_LOCKONFAULT, GHOST_VMA_LOCKONFAULT },
	{ VM_NORESERVE, GHOST_VMA_NORESERVE },
	{ VM_DONTDUMP, GHOST_VMA_DONTDUMP },
	{ VM_WIPEONFORK, GHOST_VMA_WIPEONFORK },
	{ VM_DONTCOPY, GHOST_VMA_DONTFORK },
	{ VM_MERGEABLE, GHOST_VMA_MERGEABLE },
	{ VM_HUGEPAGE, GHOST_VMA_HUGEPAGE },
	{ VM_NOHUGEPAGE, GHOST_VMA_NOHUGEPAGE },
	{ VM_SEQ_READ, GHOST_VMA_SEQ_READ },
	{ VM_RAND_READ, GHOST_VMA_RAND_READ },
};

/* Given by mm->def_flags at import; the rest are mmap's own. */
#define DEF_FLAGS (VM_LOCKED | VM_LOCKONFAULT | VM_DONTDUMP | VM_WIPEONFORK | \
		   VM_DONTCOPY | VM_MERGEABLE | VM_HUGEPAGE | VM_NOHUGEPAGE | \
		   VM_SEQ_READ | VM_RAND_READ)

/* The GHOST_VMA_ATTRS of @vma (none for the vDSO, which is remapped). */
u32 ghost_vma_attrs(struct vm_area_struct *vma, u32 flags)
{
	u32 out = 0;
	size_t i;

	mmap_assert_locked(vma->vm_mm);
	if (flags & (GHOST_VMA_VDSO | GHOST_VMA_VVAR))
		return 0;
	for (i = 0; i < ARRAY_SIZE(attrs); i++)
		if (vma->vm_flags & attrs[i].vm)
			out |= attrs[i].ghost;
	return out;
}

static unsigned long vm_flags_of(u32 flags)
{
	unsigned long out = 0;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(attrs); i++)
		if (flags & attrs[i].ghost)
			out |= attrs[i].vm;
	return out & DEF_FLAGS;
}

/*
 * Before the point of no return: the locked mappings fit the caller's
 * RLIMIT_MEMLOCK (the limit vm_mmap() will check, as mlock() would), unless
 * it has CAP_IPC_LOCK. Its own locked memory is unmapped by then.
 */
int ghost_check_vma_attrs(const struct ghost_staged *st, char *reason)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK);
	u64 locked = 0;
	unsigned int i;

	for (i = 0; i < st->nr_vmas; i++)
		if (st->vmas[i].v.flags & GHOST_VMA_LOCKED)
			locked += st->vmas[i].v.end - st->vmas[i].v.start;
	if (!locked || locked <= limit || capable(CAP_IPC_LOCK))
		return 0;
	ghost_reason(reason, GHOST_MEMLOCK_REASON, locked >> 10,
		     (unsigned long long)(limit >> 10));
	return -EPERM;
}

/*
 * Whether [start, end) meets the caller's [vdso] or [vvar], which the
 * restore keeps: a mapping there would have to split or replace them,
 * which fails (or silently drops the vDSO) past the point of no return.
 */
static bool meets_kept_vdso(struct mm_struct *mm, unsigned long start,
			    unsigned long end)
{
	struct vm_area_struct *vma;
	bool meets = false;

	mmap_read_lock(mm);
	{
		VMA_ITERATOR(vmi, mm, start);

		for_each_vma_range(vmi, vma, end)
			meets |= ghost_vma_is_vdso(vma);
	}
	mmap_read_unlock(mm);
	return meets;
}

/*
 * A number as any process reads it from /proc: the line of /proc/meminfo
 * that starts with @key ("SwapTotal:"), or with no @key a sysctl's value.
 * The values asked for (sysctl_max_map_count, sysctl_overcommit_memory,
 * total_swap_pages) are not exported. @dflt where the caller sees no /proc.
 */
static u64 proc_number(const char *path, const char *key, u64 dflt)
{
	struct file *f = filp_open(path, O_RDONLY, 0);
	char *buf, *at = NULL, *end;
	loff_t pos = 0;
	ssize_t n = -ENOMEM;
	u64 v = dflt;

	if (IS_ERR(f))
		return dflt;
	buf = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (buf)
		n = kernel_read(f, buf, PAGE_SIZE - 1, &pos);
	fput(f);
	if (n > 0) {
		buf[n] = '\0';
		at = key ? strstr(buf, key) : buf;
	}
	if (at) {
		at = skip_spaces(at + (key ? strlen(key) : 0));
		for (end = at; isdigit(*end); end++)
			;
		*end = '\0';
		if (kstrtou64(at, 10, &v))
			v = dflt;
	}
	kfree(buf);
	return v;
}

/*
 * The commit charge facts (ghost_policy_vm_size()): the largest mapping
 * vm_mmap() will charge, and what vm.overcommit_memory 0 holds it to.
 */
static void charge_facts(const struct ghost_staged *st,
			 struct ghost_vm_size_facts *size)
{
	unsigned int i;

	for (i = 0; i < st->nr_vmas; i++) {
		const struct ghost_vma *v = &st->vmas[i].v;
		u64 kib = (v->end - v->start) >> 10;

		if (ghost_vma_is_charged(v, v->prot) && kib > size->charged_kib) {
			size->charged_kib = kib;
			size->charged_at = v->start;
		}
	}
	size->overcommit = proc_number("/proc/sys/vm/overcommit_memory", NULL, 0);
	size->ram_swap_kib = (totalram_pages() << (PAGE_SHIFT - 10)) +
			     proc_number("/proc/meminfo", "SwapTotal:", 0);
}

/*
 * What vm_mmap() would refuse after the point of no return, asked before it,
 * under the caller's limits (the image's are set after its memory is made):
 * where the caller may map (below vm.mmap_min_addr only with CAP_SYS_RAWIO,
 * and as its security module allows: security_mmap_addr(), reached through
 * get_unmapped_area() with MAP_FIXED, which changes nothing), and the address
 * space and data limits may_expand_vm() applies to the new mm as a whole,
 * the number of mappings vm.max_map_count admits, and the commit charge
 * vm.overcommit_memory 0 admits.
 */
int ghost_check_vma_addrs(const struct ghost_staged *st, char *reason)
{
	bool keep_vdso = ghost_staged_vma(st, GHOST_VMA_VDSO);
	struct ghost_vm_size_facts size = {};
	unsigned long total = 0, data = 0;
	unsigned int i;

	for (i = 0; i < st->nr_vmas; i++) {
		const struct ghost_vma *v = &st->vmas[i].v;
		unsigned long addr, pages = (v->end - v->start) >> PAGE_SHIFT;

		total += pages;
		if (v->flags & (GHOST_VMA_VDSO | GHOST_VMA_VVAR))
			continue;	/* the kernel's own, checked by ghost_check_vdso() */
		if (ghost_vma_is_data(v))
			data += pages;
		if (keep_vdso && meets_kept_vdso(current->mm, v->start, v->end)) {
			ghost_reason(reason,
				     "the mapping at %#llx-%#llx overlaps this kernel's vDSO or vvar",
				     v->start, v->end);
			return -EADDRINUSE;
		}
		addr = get_unmapped_area(NULL, v->start, v->end - v->start, 0,
					 MAP_FIXED);
		if (IS_ERR_VALUE(addr)) {
			ghost_reason(reason,
				     "the mapping at %#llx may not be made here (error %ld: below vm.mmap_min_addr?)",
				     v->start, (long)addr);
			return (int)(long)addr;
		}
	}
	size.total_kib = total << (PAGE_SHIFT - 10);
	size.data_kib = data << (PAGE_SHIFT - 10);
	size.as_kib = rlimit(RLIMIT_AS) >> 10;
	size.data_cur_kib = rlimit(RLIMIT_DATA) >> 10;
	size.data_max_kib = rlimit_max(RLIMIT_DATA) >> 10;
	size.nr_maps = st->nr_vmas;
	size.max_map_count = proc_number("/proc/sys/vm/max_map_count", NULL,
					 GHOST_DEFAULT_MAX_MAP_COUNT);
	charge_facts(st, &size);
	return ghost_policy_vm_size(&size, reason, GHOST_REASON_LEN);
}

/* vm_mmap() of one image VMA with its attributes; see the top of the file. */
unsigned long ghost_vm_mmap(struct file *file, const struct ghost_vma *v,
			    unsigned long flags)
{
	struct mm_struct *mm = current->mm;
	unsigned long def = vm_flags_of(v->flags), old, addr;

	if (v->flags & GHOST_VMA_NORESERVE)
		flags |= MAP_NORESERVE;
	mmap_write_lock(mm);
	old = mm->def_flags;
	mm->def_flags = (old & ~DEF_FLAGS) | def;
	mmap_write_unlock(mm);

	addr = vm_mmap(file, v->start, v->end - v->start, v->prot, flags,
		       file ? v->pgoff << PAGE_SHIFT : 0);

	mmap_write_lock(mm);
	mm->def_flags = old;
	/* ksm_madvise() registers the mm with KSM; the flag is there already. */
	if (!IS_ERR_VALUE(addr) && (v->flags & GHOST_VMA_MERGEABLE)) {
		struct vm_area_struct *vma = find_vma(mm, addr);
		unsigned long f;
		int err = -EFAULT;

		if (vma && vma->vm_start <= addr) {
			f = vma->vm_flags & ~VM_MERGEABLE;
			err = ksm_madvise(vma, vma->vm_start, vma->vm_end,
					  MADV_MERGEABLE, &f);
		}
		if (err)
			addr = err;
	}
	mmap_write_unlock(mm);
	return addr;
}
