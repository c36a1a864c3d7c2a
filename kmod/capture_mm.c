// SPDX-License-Identifier: GPL-2.0
/*
 * Memory of a parked process: the mm layout, one VMA section per mapping,
 * and the pages that exist.
 *
 * Which pages exist is pagewalk.c's; the pages themselves are then taken
 * with get_user_pages_remote(), which also brings swapped ones back.
 * Private file mappings carry only their anonymous (copied-on-write)
 * pages: the rest is the file's.
 */
#include <linux/highmem.h>
#include <linux/hugetlb.h>
#include <linux/mman.h>
#include <linux/mm.h>
#include <linux/pgtable.h>
#include <linux/slab.h>
#include <linux/userfaultfd_k.h>
#include <linux/ghost.h>
#include <ghost_policy.h>

#include "capture.h"
#include "compat.h"

/* "[vdso]", "[vvar]" and the like, or NULL for an ordinary mapping. */
const char *ghost_vma_special_name(struct vm_area_struct *vma)
{
	if (vma->vm_ops && vma->vm_ops->name)
		return vma->vm_ops->name(vma);
	return NULL;
}

/*
 * GHOST_VMA_* flags of @vma, or a negative errno with a reason
 * (ghost_policy.h decides; @buf, PATH_MAX bytes, names an unreachable file).
 */
static int classify(struct mm_struct *mm, struct vm_area_struct *vma,
		    char *buf, char *reason)
{
	struct ghost_vma_facts v = {
		.start = vma->vm_start,
		.end = vma->vm_end,
		.special = ghost_vma_special_name(vma),
		.hugetlb = is_vm_hugetlb_page(vma),
		.device = vma->vm_flags & (VM_IO | VM_PFNMAP | VM_MIXEDMAP),
		.file = vma->vm_file,
		.shared = vma->vm_flags & VM_MAYSHARE,
		.growsdown = vma->vm_flags & VM_GROWSDOWN,
		.uffd_missing = userfaultfd_missing(vma),
	};
	struct ghost_mm_facts m = {
		.start_brk = mm->start_brk,
		.brk = mm->brk,
		.start_stack = mm->start_stack,
	};

	if (vma->vm_file) {
		v.reachable = ghost_path_reachable(&vma->vm_file->f_path);
		if (!v.reachable) {
			const char *p = d_path(&vma->vm_file->f_path, buf,
					       PATH_MAX);

			v.path = IS_ERR(p) ? NULL : p;
		}
	}
	return ghost_policy_vma(&v, &m, reason, GHOST_REASON_LEN);
}

int ghost_check_mm(struct mm_struct *mm, char *reason)
{
	struct vm_area_struct *vma;
	char *buf = kmalloc(PATH_MAX, GFP_KERNEL);
	int err = 0;

	if (!buf)
		return -ENOMEM;
	mmap_read_lock(mm);
	{
		VMA_ITERATOR(vmi, mm, 0);

		for_each_vma(vmi, vma) {
			err = classify(mm, vma, buf, reason);
			if (err < 0)
				break;
			err = 0;
		}
	}
	mmap_read_unlock(mm);
	kfree(buf);
	return err;
}

/* ---- writing the pages ------------------------------------------------- */

/*
 * What one mapping contributes to the image, read under mmap_lock and
 * written after it is dropped: the stream may be a file or a socket, whose
 * write path must not run under an mmap_lock (it can take locks, such as
 * i_rwsem, that rank above it).
 */
struct vma_snap {
	struct ghost_vma v;
	char *path;			/* FILE: kmalloc'd */
	struct ghost_runs runs;
};

struct page_writer {
	struct ghost_stream *s;
	struct mm_struct *mm;
	struct page *pages[GHOST_PAGE_BATCH];
};

/* One PAGES section: pinned in batches under mmap_lock, written after. */
static int write_run(struct page_writer *w, const struct ghost_run *run)
{
	struct ghost_stream *s = w->s;
	struct ghost_pages p = { .addr = run->addr, .nr_pages = run->nr };
	u64 hdr_end = s->off + sizeof(struct ghost_section) + sizeof(p);
	u32 pad = (PAGE_SIZE - (hdr_end & ~PAGE_MASK)) & ~PAGE_MASK;
	unsigned long addr = run->addr, nr = run->nr;
	int err;

	p.data_offset = sizeof(p) + pad;
	err = ghost_section_begin(s, GHOST_SEC_PAGES, sizeof(p),
				  p.data_offset + (u64)nr * PAGE_SIZE);
	if (!err)
		err = ghost_stream_write(s, &p, sizeof(p));
	if (!err)
		err = ghost_stream_write_zeros(s, pad);

	while (!err && nr) {
		long got, i;

		mmap_read_lock(w->mm);
		got = ghost_gup_remote(w->mm, addr,
				       min_t(unsigned long, nr, GHOST_PAGE_BATCH),
				       FOLL_FORCE, w->pages);
		mmap_read_unlock(w->mm);
		if (got <= 0)
			return got ? got : -EFAULT;
		err = ghost_stream_write_pages(s, w->pages, got);
		for (i = 0; i < got; i++)
			put_page(w->pages[i]);
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

/* Reads @vma into @snap; under mmap_lock. */
static int snap_vma(struct mm_struct *mm, struct vm_area_struct *vma,
		    struct vma_snap *snap, char *buf, char *reason)
{
	struct ghost_vma *v = &snap->v;
	int flags;

	flags = classify(mm, vma, buf, reason);
	if (flags < 0)
		return flags;
	v->start = vma->vm_start;
	v->end = vma->vm_end;
	v->pgoff = vma->vm_pgoff;
	v->flags = flags | ghost_vma_attrs(vma, flags);
	v->prot = ((vma->vm_flags & VM_READ) ? PROT_READ : 0) |
		  ((vma->vm_flags & VM_WRITE) ? PROT_WRITE : 0) |
		  ((vma->vm_flags & VM_EXEC) ? PROT_EXEC : 0);
	if (flags & GHOST_VMA_FILE) {
		const char *path = d_path(&vma->vm_file->f_path, buf, PATH_MAX);

		if (IS_ERR(path)) {
			ghost_reason(reason, "cannot name the file mapped at %#lx",
				     vma->vm_start);
			return PTR_ERR(path);
		}
		snap->path = kstrdup(path, GFP_KERNEL_ACCOUNT);
		if (!snap->path)
			return -ENOMEM;
		v->path_len = strlen(path);
	}

	/* Shared mappings live in their file; vDSO and vvar are the kernel's. */
	if (flags & (GHOST_VMA_SHARED | GHOST_VMA_VDSO | GHOST_VMA_VVAR))
		return 0;
	return ghost_collect_runs(mm, vma->vm_start, vma->vm_end,
				  flags & GHOST_VMA_FILE, &snap->runs);
}

static void free_snaps(struct vma_snap *snaps, unsigned int n)
{
	unsigned int i;

	for (i = 0; snaps && i < n; i++) {
		kfree(snaps[i].path);
		ghost_runs_free(&snaps[i].runs);
	}
	kvfree(snaps);
}

/* The layout and every mapping with its runs, in one mmap_lock hold. */
static int snap_mm(struct mm_struct *mm, struct ghost_mm *m,
		   struct vma_snap **out, char *buf, char *reason)
{
	struct vm_area_struct *vma;
	struct vma_snap *snaps;
	unsigned int i = 0;
	int err = 0;

	mmap_read_lock(mm);
	fill_mm(m, mm);
	{
		VMA_ITERATOR(vmi, mm, 0);

		for_each_vma(vmi, vma)
			m->nr_vmas++;
	}
	snaps = kvcalloc(m->nr_vmas, sizeof(*snaps), GFP_KERNEL_ACCOUNT);
	if (!snaps) {
		err = -ENOMEM;
	} else {
		VMA_ITERATOR(vmi, mm, 0);

		for_each_vma(vmi, vma) {
			err = snap_vma(mm, vma, &snaps[i++], buf, reason);
			if (err)
				break;
		}
	}
	mmap_read_unlock(mm);
	if (err) {
		free_snaps(snaps, m->nr_vmas);
		return err;
	}
	*out = snaps;
	return 0;
}

/* What ghost_snap_mm() read of an mm, for ghost_write_mm_snap(). */
struct ghost_mm_snap {
	struct ghost_mm m;
	struct vma_snap *vmas;
};

void ghost_mm_snap_free(struct ghost_mm_snap *ms)
{
	if (!ms)
		return;
	free_snaps(ms->vmas, ms->m.nr_vmas);
	kfree(ms);
}

struct ghost_mm_snap *ghost_snap_mm(struct mm_struct *mm, u32 vdso_size,
				    u32 vdso_crc, char *reason)
{
	struct ghost_mm_snap *ms = kzalloc(sizeof(*ms), GFP_KERNEL);
	char *buf = kmalloc(PATH_MAX, GFP_KERNEL);
	int err = -ENOMEM;

	if (ms && buf)
		err = snap_mm(mm, &ms->m, &ms->vmas, buf, reason);
	kfree(buf);
	if (err) {
		kfree(ms);
		return ERR_PTR(err);
	}
	ms->m.vdso_size = vdso_size;
	ms->m.vdso_crc32c = vdso_crc;
	return ms;
}

/*
 * The layout in @ms, with the contents of its pages read from @pages: the
 * mm it was taken from, or a fork of it that has not run (snapshot.c).
 */
int ghost_write_mm_snap(struct ghost_stream *s, struct ghost_mm_snap *ms,
			struct mm_struct *pages)
{
	struct page_writer *w = kzalloc(sizeof(*w), GFP_KERNEL);
	unsigned int i;
	size_t r;
	int err;

	if (!w)
		return -ENOMEM;
	w->s = s;
	w->mm = pages;
	err = ghost_section_write(s, GHOST_SEC_MM, &ms->m, sizeof(ms->m), NULL, 0);
	for (i = 0; !err && i < ms->m.nr_vmas; i++) {
		struct vma_snap *snap = &ms->vmas[i];

		snap->v.nr_pages = snap->runs.pages;
		err = ghost_section_write(s, GHOST_SEC_VMA, &snap->v,
					  sizeof(snap->v), snap->path,
					  snap->v.path_len);
		for (r = 0; !err && r < snap->runs.nr; r++)
			err = write_run(w, &snap->runs.v[r]);
	}
	kfree(w);
	return err;
}

int ghost_write_mm(struct ghost_stream *s, struct mm_struct *mm, u32 vdso_size,
		   u32 vdso_crc, char *reason)
{
	struct ghost_mm_snap *ms = ghost_snap_mm(mm, vdso_size, vdso_crc, reason);
	int err;

	if (IS_ERR(ms))
		return PTR_ERR(ms);
	err = ghost_write_mm_snap(s, ms, mm);
	ghost_mm_snap_free(ms);
	return err;
}

/*
 * A fork copies every mapping but those marked MADV_DONTFORK (absent in
 * the child) and MADV_WIPEONFORK (empty in it), as the records of @ms say
 * (ghost_vma_attrs()): with one of them a fork's memory is not the
 * process's, and a snapshot export is refused.
 */
int ghost_mm_snap_check_fork(const struct ghost_mm_snap *ms, char *reason)
{
	unsigned int i;

	for (i = 0; i < ms->m.nr_vmas; i++) {
		const struct ghost_vma *v = &ms->vmas[i].v;

		if (!(v->flags & (GHOST_VMA_DONTFORK | GHOST_VMA_WIPEONFORK)))
			continue;
		ghost_reason(reason,
			     "the mapping at %#llx is not copied by a fork (MADV_DONTFORK or MADV_WIPEONFORK): no copy-on-write snapshot",
			     v->start);
		return -EOPNOTSUPP;
	}
	return 0;
}
