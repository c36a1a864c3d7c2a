// SPDX-License-Identifier: GPL-2.0
/*
 * Memory of a parked process: the mm layout, one VMA section per mapping,
 * and the pages that exist.
 *
 * "Exist" means a page table entry is there: present (but not the shared
 * zero page) or swapped out. Untouched pages are not written, and finding
 * them must not fault them in, so the page tables are walked directly (the
 * walk helpers are inlines; walk_page_range() is not exported). The pages
 * themselves are then taken with get_user_pages_remote(), which also brings
 * swapped ones back. Private file mappings carry only their anonymous
 * (copied-on-write) pages: the rest is the file's.
 */
#include <linux/highmem.h>
#include <linux/hugetlb.h>
#include <linux/mman.h>
#include <linux/mm.h>
#include <linux/pgtable.h>
#include <linux/slab.h>
#include <linux/ghost.h>

#include "capture.h"
#include "compat.h"

#define GUP_BATCH 64

/* "[vdso]", "[vvar]" and the like, or NULL for an ordinary mapping. */
const char *ghost_vma_special_name(struct vm_area_struct *vma)
{
	if (vma->vm_ops && vma->vm_ops->name)
		return vma->vm_ops->name(vma);
	return NULL;
}

/* GHOST_VMA_* flags of @vma, or a negative errno with a reason. */
static int classify(struct mm_struct *mm, struct vm_area_struct *vma,
		    char *reason)
{
	const char *special = ghost_vma_special_name(vma);
	u32 flags = 0;

	if (special) {
		if (!strcmp(special, "[vdso]"))
			return GHOST_VMA_VDSO;
		if (!strcmp(special, "[vvar]"))
			return GHOST_VMA_VVAR;
		ghost_reason(reason, "mapping %s at %#lx is not supported",
			     special, vma->vm_start);
		return -EOPNOTSUPP;
	}
	if (is_vm_hugetlb_page(vma)) {
		ghost_reason(reason, "hugetlbfs mapping at %#lx is not supported",
			     vma->vm_start);
		return -EOPNOTSUPP;
	}
	if (vma->vm_flags & (VM_IO | VM_PFNMAP | VM_MIXEDMAP)) {
		ghost_reason(reason, "device mapping at %#lx is not supported",
			     vma->vm_start);
		return -EOPNOTSUPP;
	}
	if (vma->vm_file) {
		if (!ghost_path_reachable(&vma->vm_file->f_path)) {
			const char *what = (vma->vm_flags & VM_MAYSHARE) ?
				"shared anonymous or SysV shared memory" :
				"mapping of a deleted file";

			ghost_reason(reason, "%s at %#lx is not supported",
				     what, vma->vm_start);
			return -EOPNOTSUPP;
		}
		flags |= GHOST_VMA_FILE;
		if (vma->vm_flags & VM_MAYSHARE)
			flags |= GHOST_VMA_SHARED;
	} else if (vma->vm_flags & VM_MAYSHARE) {
		ghost_reason(reason, "shared anonymous memory at %#lx is not supported",
			     vma->vm_start);
		return -EOPNOTSUPP;
	} else if (mm->brk > mm->start_brk && vma->vm_start <= mm->start_brk &&
		   vma->vm_end >= mm->brk) {
		flags |= GHOST_VMA_HEAP;
	}
	if (vma->vm_flags & VM_GROWSDOWN)
		flags |= GHOST_VMA_GROWSDOWN;
	if (vma->vm_start <= mm->start_stack && mm->start_stack < vma->vm_end)
		flags |= GHOST_VMA_STACK;
	return flags;
}

int ghost_check_mm(struct mm_struct *mm, char *reason)
{
	struct vm_area_struct *vma;
	int err = 0;

	mmap_read_lock(mm);
	{
		VMA_ITERATOR(vmi, mm, 0);

		for_each_vma(vmi, vma) {
			err = classify(mm, vma, reason);
			if (err < 0)
				break;
			err = 0;
		}
	}
	mmap_read_unlock(mm);
	return err;
}

/* ---- which pages exist --------------------------------------------------- */

typedef int (*run_fn)(void *arg, unsigned long addr, unsigned long nr);

struct runs {
	run_fn fn;
	void *arg;
	unsigned long start, nr;
};

static int runs_flush(struct runs *r)
{
	int err = 0;

	if (r->nr)
		err = r->fn(r->arg, r->start, r->nr);
	r->nr = 0;
	return err;
}

static int runs_add(struct runs *r, unsigned long addr, unsigned long nr)
{
	int err = 0;

	if (r->nr && r->start + r->nr * PAGE_SIZE == addr) {
		r->nr += nr;
		return 0;
	}
	err = runs_flush(r);
	r->start = addr;
	r->nr = nr;
	return err;
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

/* Calls r->fn for each run of existing pages in [addr, end). */
static int walk_existing(struct mm_struct *mm, unsigned long addr,
			 unsigned long end, bool anon_only, struct runs *r)
{
	int err;

	while (addr < end) {
		pgd_t *pgd = pgd_offset(mm, addr);
		unsigned long next;
		p4d_t *p4d;
		pud_t *pud, pudv;
		pmd_t *pmd, pmdv;
		pte_t *ptes;
		int i, n;

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
		pmdv = READ_ONCE(*pmd);
		next = pmd_addr_end(addr, end);
		if (pmd_none(pmdv))
			goto hole;
		if (!pmd_present(pmdv) || pmd_trans_huge(pmdv)) {
			/* A huge page, or one being migrated: all there. */
			if (anon_only && pmd_present(pmdv) &&
			    !PageAnon(pmd_page(pmdv)))
				goto hole;
			err = runs_add(r, addr, (next - addr) >> PAGE_SHIFT);
			if (err)
				return err;
			addr = next;
			continue;
		}
		if (pmd_bad(pmdv))
			goto hole;
		ptes = pte_offset_map(pmd, addr);
		n = (next - addr) >> PAGE_SHIFT;
		for (i = 0, err = 0; i < n && !err; i++) {
			unsigned long a = addr + i * PAGE_SIZE;

			if (pte_exists(ptep_get(ptes + i), anon_only))
				err = runs_add(r, a, 1);
			else
				err = runs_flush(r);
		}
		pte_unmap(ptes);
		if (err)
			return err;
		addr = next;
		continue;
hole:
		err = runs_flush(r);
		if (err)
			return err;
		addr = next;
	}
	return runs_flush(r);
}

static int count_run(void *arg, unsigned long addr, unsigned long nr)
{
	*(u64 *)arg += nr;
	return 0;
}

struct page_writer {
	struct ghost_stream *s;
	struct mm_struct *mm;
	struct page *pages[GUP_BATCH];
};

static int write_run(void *arg, unsigned long addr, unsigned long nr)
{
	struct page_writer *w = arg;
	struct ghost_stream *s = w->s;
	struct ghost_pages p = { .addr = addr, .nr_pages = nr };
	u64 hdr_end = s->off + sizeof(struct ghost_section) + sizeof(p);
	u32 pad = (PAGE_SIZE - (hdr_end & ~PAGE_MASK)) & ~PAGE_MASK;
	int err;

	p.data_offset = sizeof(p) + pad;
	err = ghost_section_begin(s, GHOST_SEC_PAGES, sizeof(p),
				  p.data_offset + (u64)nr * PAGE_SIZE);
	if (!err)
		err = ghost_stream_write(s, &p, sizeof(p));
	if (!err)
		err = ghost_stream_write_zeros(s, pad);

	while (!err && nr) {
		long got = ghost_gup_remote(w->mm, addr,
					    min_t(unsigned long, nr, GUP_BATCH),
					    FOLL_FORCE, w->pages);
		long i;

		if (got <= 0)
			return got ? got : -EFAULT;
		for (i = 0; i < got; i++) {
			if (!err) {
				void *v = kmap_local_page(w->pages[i]);

				err = ghost_stream_write(s, v, PAGE_SIZE);
				kunmap_local(v);
			}
			put_page(w->pages[i]);
		}
		addr += got * PAGE_SIZE;
		nr -= got;
	}
	return err;	/* the payload is whole pages: no padding */
}

static void fill_mm(struct ghost_mm *m, struct mm_struct *mm)
{
	int i;

	m->start_code = mm->start_code;
	m->end_code = mm->end_code;
	m->start_data = mm->start_data;
	m->end_data = mm->end_data;
	m->start_brk = mm->start_brk;
	m->brk = mm->brk;
	m->start_stack = mm->start_stack;
	m->arg_start = mm->arg_start;
	m->arg_end = mm->arg_end;
	m->env_start = mm->env_start;
	m->env_end = mm->env_end;
	m->vdso = (unsigned long)mm->context.vdso;

	/* auxv up to and including the AT_NULL pair */
	for (i = 0; i + 1 < min_t(int, ARRAY_SIZE(mm->saved_auxv),
				  GHOST_AUXV_WORDS); i += 2) {
		m->auxv[i] = mm->saved_auxv[i];
		m->auxv[i + 1] = mm->saved_auxv[i + 1];
		if (mm->saved_auxv[i] == AT_NULL)
			break;
	}
	m->auxv_words = i + 2;
}

static int write_vma(struct ghost_stream *s, struct mm_struct *mm,
		     struct vm_area_struct *vma, char *buf,
		     struct page_writer *w, char *reason)
{
	struct ghost_vma v = {
		.start = vma->vm_start,
		.end = vma->vm_end,
		.pgoff = vma->vm_pgoff,
	};
	const char *path = NULL;
	struct runs r;
	bool carry;
	int flags, err;

	flags = classify(mm, vma, reason);
	if (flags < 0)
		return flags;
	v.flags = flags;
	v.prot = ((vma->vm_flags & VM_READ) ? PROT_READ : 0) |
		 ((vma->vm_flags & VM_WRITE) ? PROT_WRITE : 0) |
		 ((vma->vm_flags & VM_EXEC) ? PROT_EXEC : 0);
	if (flags & GHOST_VMA_FILE) {
		path = d_path(&vma->vm_file->f_path, buf, PATH_MAX);
		if (IS_ERR(path)) {
			ghost_reason(reason, "cannot name the file mapped at %#lx",
				     vma->vm_start);
			return PTR_ERR(path);
		}
		v.path_len = strlen(path);
	}

	/* Shared mappings live in their file; vDSO and vvar are the kernel's. */
	carry = !(flags & (GHOST_VMA_SHARED | GHOST_VMA_VDSO | GHOST_VMA_VVAR));
	if (carry) {
		r = (struct runs){ .fn = count_run, .arg = &v.nr_pages };
		err = walk_existing(mm, vma->vm_start, vma->vm_end,
				    flags & GHOST_VMA_FILE, &r);
		if (err)
			return err;
	}
	err = ghost_section_write(s, GHOST_SEC_VMA, &v, sizeof(v), path,
				  v.path_len);
	if (err || !v.nr_pages)
		return err;
	r = (struct runs){ .fn = write_run, .arg = w };
	return walk_existing(mm, vma->vm_start, vma->vm_end,
			     flags & GHOST_VMA_FILE, &r);
}

int ghost_write_mm(struct ghost_stream *s, struct mm_struct *mm, u32 vdso_size,
		   u32 vdso_crc, char *reason)
{
	struct vm_area_struct *vma;
	struct page_writer *w;
	struct ghost_mm *m;
	char *buf;
	int err = -ENOMEM;

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	w = kzalloc(sizeof(*w), GFP_KERNEL);
	buf = kmalloc(PATH_MAX, GFP_KERNEL);
	if (!m || !w || !buf)
		goto out;
	w->s = s;
	w->mm = mm;

	mmap_read_lock(mm);
	fill_mm(m, mm);
	m->vdso_size = vdso_size;
	m->vdso_crc32c = vdso_crc;
	{
		VMA_ITERATOR(vmi, mm, 0);

		for_each_vma(vmi, vma)
			m->nr_vmas++;
	}
	err = ghost_section_write(s, GHOST_SEC_MM, m, sizeof(*m), NULL, 0);
	if (!err) {
		VMA_ITERATOR(vmi, mm, 0);

		for_each_vma(vmi, vma) {
			err = write_vma(s, mm, vma, buf, w, reason);
			if (err)
				break;
		}
	}
	mmap_read_unlock(mm);
out:
	kfree(buf);
	kfree(w);
	kfree(m);
	return err;
}
