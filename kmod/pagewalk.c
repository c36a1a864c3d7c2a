// SPDX-License-Identifier: GPL-2.0
/*
 * Which pages of a mapping exist: the runs an image carries.
 *
 * "Exist" means a page table entry is there: present (but not the shared
 * zero page) or swapped out. Untouched pages are not carried, and finding
 * them must not fault them in, so the page tables are read directly (the
 * walk helpers are inlines; walk_page_range() is not exported).
 *
 * The runs are collected once, under mmap_lock, and that one list is both
 * counted into the VMA record and copied: a page reclaimed in between
 * (MADV_FREE) is then read back as zeros, never dropped from a run whose
 * length was already written. Nothing sleeps between pte_offset_map() and
 * pte_unmap() (from 6.5 on that span is an RCU read-side section): each
 * page table is first read into a bitmap, and the runs grow after.
 */
#include <linux/bitmap.h>
#include <linux/mm.h>
#include <linux/pgtable.h>
#include <linux/slab.h>

#include "capture.h"
#include "compat.h"

static int runs_add(struct ghost_runs *r, unsigned long addr,
		    unsigned long nr)
{
	struct ghost_run *last = r->nr ? &r->v[r->nr - 1] : NULL;
	int err;

	r->pages += nr;
	if (last && last->addr + last->nr * PAGE_SIZE == addr) {
		last->nr += nr;
		return 0;
	}
	err = ghost_array_reserve((void **)&r->v, &r->cap, r->nr, r->nr + 1,
				  sizeof(*r->v), GFP_KERNEL_ACCOUNT);
	if (err)
		return err;
	r->v[r->nr++] = (struct ghost_run){ .addr = addr, .nr = nr };
	return 0;
}

static bool pte_exists(pte_t pte, bool anon_only)
{
	unsigned long pfn;

	if (pte_none(pte))
		return false;
	if (!pte_present(pte))
		return true;	/* swapped or migrating: real data */
	pfn = pte_pfn(pte);
	if (is_zero_pfn(pfn) || !pfn_valid(pfn))
		return false;
	return !anon_only || PageAnon(pfn_to_page(pfn));
}

/*
 * Marks in @map the pages of [addr, next) (one page table's worth at most)
 * that exist; -EAGAIN when the page table went away meanwhile.
 */
static int scan_ptes(pmd_t *pmd, unsigned long addr, unsigned long next,
		     bool anon_only, unsigned long *map)
{
	unsigned int i, n = (next - addr) >> PAGE_SHIFT;
	pte_t *ptes = ghost_pte_offset_map(pmd, addr);

	if (!ptes)
		return -EAGAIN;
	bitmap_zero(map, PTRS_PER_PTE);
	for (i = 0; i < n; i++)
		if (pte_exists(ptep_get(ptes + i), anon_only))
			__set_bit(i, map);
	pte_unmap(ptes);
	return 0;
}

static int add_ptes(struct ghost_runs *r, unsigned long addr,
		    unsigned long next, const unsigned long *map)
{
	unsigned int n = (next - addr) >> PAGE_SHIFT;
	unsigned int start, end;
	int err;

	for_each_set_bitrange(start, end, map, n) {
		err = runs_add(r, addr + start * PAGE_SIZE, end - start);
		if (err)
			return err;
	}
	return 0;
}

/*
 * The runs of existing pages in [addr, end) of @mm, appended to @r. The
 * caller holds mmap_lock for reading.
 */
int ghost_collect_runs(struct mm_struct *mm, unsigned long addr,
		       unsigned long end, bool anon_only, struct ghost_runs *r)
{
	DECLARE_BITMAP(map, PTRS_PER_PTE);
	int err;

	/* mmap_assert_locked() would call dump_mm(), which is not exported */
	lockdep_assert_held(&mm->mmap_lock);
	while (addr < end) {
		pgd_t *pgd = pgd_offset(mm, addr);
		unsigned long next;
		p4d_t *p4d;
		pud_t *pud, pudv;
		pmd_t *pmd, pmdv;

		next = pgd_addr_end(addr, end);
		if (pgd_none(*pgd) || pgd_bad(*pgd))
			goto hole;
		p4d = p4d_offset(pgd, addr);
		next = p4d_addr_end(addr, end);
		if (p4d_none(*p4d) || p4d_bad(*p4d))
			goto hole;
		pud = pud_offset(p4d, addr);
		pudv = READ_ONCE(*pud);
		next = pud_addr_end(addr, end);
		if (pud_none(pudv) || pud_bad(pudv))
			goto hole;
		pmd = pmd_offset(pud, addr);
		next = pmd_addr_end(addr, end);
again:
		pmdv = READ_ONCE(*pmd);
		if (pmd_none(pmdv))
			goto hole;
		if (!pmd_present(pmdv) || pmd_trans_huge(pmdv)) {
			/*
			 * A huge page, or one being migrated: all there. One
			 * not anonymous is the file's or, in an anonymous
			 * mapping, the huge zero page (is_huge_zero_pmd() is
			 * not exported): nothing to carry either way.
			 */
			if (pmd_present(pmdv) && !PageAnon(pmd_page(pmdv)))
				goto hole;
			err = runs_add(r, addr, (next - addr) >> PAGE_SHIFT);
			if (err)
				return err;
			goto hole;
		}
		if (pmd_bad(pmdv))
			goto hole;
		err = scan_ptes(pmd, addr, next, anon_only, map);
		if (err == -EAGAIN)
			goto again;
		err = add_ptes(r, addr, next, map);
		if (err)
			return err;
hole:
		addr = next;
	}
	return 0;
}

void ghost_runs_free(struct ghost_runs *r)
{
	kvfree(r->v);
	*r = (struct ghost_runs){};
}
