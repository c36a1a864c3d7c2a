// SPDX-License-Identifier: GPL-2.0
/*
 * Reading an image for import, before the point of no return: every section
 * is read and checked, files are reopened with the image's credentials (the
 * caller's for an image without them),
 * page data is kept in kernel pages, the FPU state is converted (which is
 * its validation), and the checksum is verified. Any failure here leaves the
 * caller exactly as it was. With GHOST_IMPORT_DIRECT the page data is only
 * found to be there and passed over; it and the checksum are read after
 * the point of no return (late_pages.c).
 */
#include <linux/bitmap.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/file.h>
#include <linux/futex.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/magic.h>
#include <linux/major.h>
#include <linux/mman.h>
#include <linux/mount.h>
#include <linux/namei.h>
#include <linux/resource.h>
#include <linux/sched/mm.h>
#include <linux/signal_types.h>
#include <linux/slab.h>
#include <asm/fpu/api.h>
#include <asm/fpu/types.h>
#include <asm/fpu/xstate.h>
#include <asm/segment.h>
#include <linux/ghost.h>

#include "ghost_format.h"
#include "ghost_vma_attrs.h"
#include "import.h"

/* A malformed image: @reason says how. */
int ghost_bad(char *reason, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, GHOST_REASON_LEN, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

static int short_read(struct ghost_stream *s, int err, char *reason)
{
	if (err == -ENODATA)
		return ghost_bad(reason, "the image ends early, at byte %llu", s->off);
	return err;
}

static int read_exact(struct ghost_stream *s, void *buf, size_t len,
		      char *reason)
{
	int err = ghost_stream_read(s, buf, len);

	return err ? short_read(s, err, reason) : 0;
}

/* A section header, and the size of the record that begins its payload. */
struct sec {
	struct ghost_section h;
	u64 at;			/* stream offset of the header */
	u64 sum;		/* checksum of every byte before it */
	u32 rec;		/* record bytes: the rest of the payload is its tail */
};

/* Bytes nobody looks at: a skipped section's payload and padding. */
static int skip_bytes(struct ghost_stream *s, u64 len, char *reason)
{
	u8 buf[256];

	while (len) {
		size_t n = min_t(u64, len, sizeof(buf));
		int err = ghost_go_on();

		if (!err)
			err = read_exact(s, buf, n, reason);

		if (err)
			return err;
		len -= n;
	}
	return 0;
}

/*
 * The next section header. A section of a type this reader does not know
 * is read past when it is skippable (its bytes still count in the
 * checksum) and refused otherwise.
 */
static int next_section(struct ghost_stream *s, const struct ghost_staged *st,
			struct sec *sec, char *reason)
{
	bool v1 = st->hdr.version == 1;
	u32 known;
	int err;

	for (;;) {
		sec->at = s->off;
		sec->sum = ghost_stream_sum(s);
		err = ghost_go_on();
		if (!err)
			err = read_exact(s, &sec->h, sizeof(sec->h), reason);
		if (err)
			return err;
		if ((sec->h.flags & ~GHOST_SECTION_FLAGS) ||
		    (v1 && (sec->h.flags || sec->h.record_size)))
			return ghost_bad(reason, "section at byte %llu has unknown flags %#x",
					 sec->at, sec->h.flags);
		known = ghost_record_min_size(sec->h.type, st->hdr.version);
		if (known)
			break;
		if (!(sec->h.flags & GHOST_SECTION_SKIPPABLE))
			return ghost_bad(reason,
					 "section type %u at byte %llu is unknown to this reader and not skippable",
					 sec->h.type, sec->at);
		err = skip_bytes(s, sec->h.size, reason);
		if (!err)
			err = skip_bytes(s, ALIGN(sec->h.size % 8, 8) - sec->h.size % 8,
					 reason);
		if (err)
			return err;
	}
	sec->rec = v1 ? known : sec->h.record_size;
	if (sec->rec < known || sec->h.size < sec->rec)
		return ghost_bad(reason, "section %u at byte %llu has a %u-byte record",
				 sec->h.type, sec->at, sec->rec);
	return 0;
}

static int skip_pad(struct ghost_stream *s, u64 size, char *reason)
{
	int err = ghost_stream_skip_zeros(s, ALIGN(size, 8) - size);

	if (err == -EBADMSG)
		return ghost_bad(reason, "non-zero padding before byte %llu", s->off);
	return err ? short_read(s, err, reason) : 0;
}

/*
 * The record that begins a section's payload, into @buf of @size bytes: an
 * older, shorter record reads as if its missing tail were zero; a newer,
 * longer one is taken when the part this reader does not know is zero.
 */
static int read_record(struct ghost_stream *s, const struct sec *sec,
		       void *buf, size_t size, char *reason)
{
	size_t n = min_t(size_t, sec->rec, size);
	int err;

	memset(buf + n, 0, size - n);
	err = read_exact(s, buf, n, reason);
	if (err || sec->rec <= size)
		return err;
	err = ghost_stream_skip_zeros(s, sec->rec - size);
	if (err == -EBADMSG)
		return ghost_bad(reason,
				 "the %u-byte record of section %u at byte %llu has non-zero bytes beyond the %zu this reader knows",
				 sec->rec, sec->h.type, sec->at, size);
	return err ? short_read(s, err, reason) : 0;
}

/*
 * A section of @type whose payload is a record of @size bytes plus a tail
 * (known after reading the record, hence the split: read_head, then
 * read_tail).
 */
static int read_head(struct ghost_stream *s, const struct ghost_staged *st,
		     u32 type, void *buf, size_t size, struct sec *sec,
		     char *reason)
{
	int err = next_section(s, st, sec, reason);

	if (err)
		return err;
	if (sec->h.type != type)
		return ghost_bad(reason, "expected section %u at byte %llu, found %u",
				 type, sec->at, sec->h.type);
	return read_record(s, sec, buf, size, reason);
}

static int read_tail(struct ghost_stream *s, const struct sec *sec,
		     void *tail, size_t tail_len, char *reason)
{
	int err;

	if (sec->h.size != sec->rec + tail_len)
		return ghost_bad(reason, "section %u has size %llu, expected %zu",
				 sec->h.type, sec->h.size, sec->rec + tail_len);
	if (tail_len) {
		err = read_exact(s, tail, tail_len, reason);
		if (err)
			return err;
	}
	return skip_pad(s, sec->h.size, reason);
}

static int read_fixed(struct ghost_stream *s, const struct ghost_staged *st,
		      u32 type, void *buf, size_t size, char *reason)
{
	struct sec sec;
	int err = read_head(s, st, type, buf, size, &sec, reason);

	return err ? err : read_tail(s, &sec, NULL, 0, reason);
}

/*
 * Reads a name of @len bytes into a new NUL-terminated string; @absolute
 * when it must be a path to open (inherited descriptors carry a name like
 * "pipe:[1234]" for information only).
 */
static int read_path(struct ghost_stream *s, const struct sec *sec, u32 len,
		     bool absolute, char **out, char *reason)
{
	char *p;
	int err;

	BUILD_BUG_ON(GHOST_PATH_MAX != PATH_MAX);
	if (len == 0 || len >= GHOST_PATH_MAX)
		return ghost_bad(reason, "a path in section %u has length %u", sec->h.type, len);
	p = kmalloc(len + 1, GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	err = read_tail(s, sec, p, len, reason);
	p[len] = 0;
	if (!err && (strlen(p) != len || (absolute && p[0] != '/')))
		err = ghost_bad(reason, "a path in section %u is not absolute", sec->h.type);
	if (err) {
		kfree(p);
		return err;
	}
	*out = p;
	return 0;
}

/*
 * TASK_SIZE_MAX is GHOST_USER_ADDR_END, or GHOST_USER_ADDR_END_LA57 with
 * 5-level page tables: the machine's bound, tighter than the format's.
 */
static bool user_addr(u64 a)
{
	return a < TASK_SIZE_MAX;
}

/* ---- task, registers, FPU --------------------------------------------- */

static int stage_header(struct ghost_stream *s, struct ghost_staged *st,
			char *reason)
{
	struct ghost_image_header *h = &st->hdr;
	int err = read_exact(s, h, sizeof(*h), reason);

	if (err)
		return err;
	if (h->magic != GHOST_IMAGE_MAGIC)
		return ghost_bad(reason, "not a ghost image (bad magic)");
	if (h->version < GHOST_IMAGE_MIN_VERSION || h->version > GHOST_IMAGE_VERSION)
		return ghost_bad(reason,
				 "image format version %u is not supported (reads %u to %u)",
				 h->version, GHOST_IMAGE_MIN_VERSION, GHOST_IMAGE_VERSION);
	if ((h->version == 1 ? h->header_size != sizeof(*h) :
	     (h->header_size < sizeof(*h) || h->header_size > GHOST_IMAGE_HEADER_MAX ||
	      h->header_size % 8)) ||
	    h->arch != GHOST_ARCH_X86_64 || h->page_size != PAGE_SIZE ||
	    h->__pad || !ghost_all_zero(h->resv, ARRAY_SIZE(h->resv)) ||
	    (h->version == 1 && (h->features || h->required_features)) ||
	    (h->required_features & ~h->features))
		return ghost_bad(reason, "the image header is malformed or for another machine");
	if (h->features & GHOST_IMAGE_FEAT_XXH64)
		ghost_stream_use_xxh64(s, h, sizeof(*h));
	if (h->features & GHOST_IMAGE_FEAT_PARENT)
		return ghost_bad(reason,
				 "the image is incremental: ghost.ko restores whole images (libghost's restart flattens chains)");
	if (h->required_features & ~GHOST_IMAGE_FEATURES)
		return ghost_bad(reason,
				 "the image requires feature bit %lu, which this reader does not know",
				 __ffs64(h->required_features & ~GHOST_IMAGE_FEATURES));
	err = ghost_stream_skip_zeros(s, h->header_size - sizeof(*h));
	if (err == -EBADMSG)
		return ghost_bad(reason,
				 "the image header has non-zero bytes beyond the %zu this reader knows",
				 sizeof(*h));
	return err ? short_read(s, err, reason) : 0;
}

static int stage_task(struct ghost_stream *s, struct ghost_staged *st,
		      char *reason)
{
	struct ghost_task *t = &st->task;
	int err = read_fixed(s, st, GHOST_SEC_TASK, t, sizeof(*t), reason);

	BUILD_BUG_ON(sizeof(struct robust_list_head) != GHOST_ROBUST_LIST_LEN);
	if (err)
		return err;
	if (t->__pad || !ghost_all_zero(t->resv, ARRAY_SIZE(t->resv)) ||
	    !user_addr(t->rseq) || !user_addr(t->clear_child_tid) ||
	    !user_addr(t->robust_list) ||
	    (t->robust_list && t->robust_list_len != GHOST_ROBUST_LIST_LEN) ||
	    (t->rseq && t->rseq_len != GHOST_RSEQ_LEN) ||
	    (t->rseq & (GHOST_RSEQ_LEN - 1)))	/* rseq(2)'s alignment */
		return ghost_bad(reason, "the task section is malformed");
	t->comm[sizeof(t->comm) - 1] = 0;
	return 0;
}

/*
 * ATTRS, in an image with GHOST_IMAGE_FEAT_ATTRS only; @sec was read. The
 * ranges are those prctl(2) and /proc/PID/oom_score_adj accept.
 */
static int stage_attrs(struct ghost_stream *s, struct ghost_staged *st,
		       const struct sec *sec, char *reason)
{
	struct ghost_attrs *a = &st->attrs;
	int err;

	if (!(st->hdr.features & GHOST_IMAGE_FEAT_ATTRS))
		return ghost_bad(reason, "an attrs section at byte %llu without the ATTRS feature",
				 sec->at);
	err = read_record(s, sec, a, sizeof(*a), reason);
	if (!err)
		err = read_tail(s, sec, NULL, 0, reason);
	if (err)
		return err;
	if ((a->flags & ~GHOST_ATTRS_FLAGS) ||
	    (a->membarrier & ~GHOST_MEMBARRIER_FLAGS) ||
	    a->oom_score_adj < -1000 || a->oom_score_adj > 1000 ||
	    a->nice < -20 || a->nice > 19 ||
	    !ghost_all_zero(a->resv, ARRAY_SIZE(a->resv)))
		return ghost_bad(reason, "the attrs section is malformed");
	st->has_attrs = true;
	return 0;
}

/*
 * CREDS, in an image with GHOST_IMAGE_FEAT_CREDS only; @sec was read
 * (creds.c checks what it holds).
 */
static int stage_creds(struct ghost_stream *s, struct ghost_staged *st,
		       const struct sec *sec, char *reason)
{
	struct ghost_creds c, *all;
	size_t glen;
	int err;

	if (!(st->hdr.features & GHOST_IMAGE_FEAT_CREDS))
		return ghost_bad(reason,
				 "a credentials section at byte %llu without the CREDS feature",
				 sec->at);
	if (st->creds)
		return ghost_bad(reason, "a second credentials section at byte %llu", sec->at);
	err = read_record(s, sec, &c, sizeof(c), reason);
	if (err)
		return err;
	if (c.ngroups > GHOST_NGROUPS_MAX)
		return ghost_bad(reason, "the credentials section is malformed");
	glen = c.ngroups * sizeof(u32);
	all = kvmalloc(sizeof(c) + glen, GFP_KERNEL_ACCOUNT);
	if (!all)
		return -ENOMEM;
	*all = c;
	err = read_tail(s, sec, all + 1, glen, reason);
	if (err) {
		kvfree(all);
		return err;
	}
	return ghost_creds_stage(st, all, reason);
}

/*
 * The sections between TASK and REGS: CREDS, then ATTRS, each when the
 * header says so. On return @sec is the REGS header's.
 */
static int stage_task_extras(struct ghost_stream *s, struct ghost_staged *st,
			     struct sec *sec, char *reason)
{
	int err = next_section(s, st, sec, reason);

	if (!err && sec->h.type == GHOST_SEC_CREDS) {
		err = stage_creds(s, st, sec, reason);
		if (!err)
			err = next_section(s, st, sec, reason);
	}
	if (!err && !st->creds && (st->hdr.features & GHOST_IMAGE_FEAT_CREDS))
		return ghost_bad(reason,
				 "the CREDS feature, but no credentials section after the task");
	if (!err && sec->h.type == GHOST_SEC_ATTRS) {
		err = stage_attrs(s, st, sec, reason);
		if (!err)
			err = next_section(s, st, sec, reason);
	}
	if (!err && !st->has_attrs && (st->hdr.features & GHOST_IMAGE_FEAT_ATTRS))
		return ghost_bad(reason, "the ATTRS feature, but no attrs section after the task");
	return err;
}

static int stage_regs(struct ghost_stream *s, struct ghost_staged *st,
		      const struct sec *sec, char *reason)
{
	struct ghost_regs *r = &st->regs;
	int err;

	if (sec->h.type != GHOST_SEC_REGS)
		return ghost_bad(reason, "expected section %u at byte %llu, found %u",
				 GHOST_SEC_REGS, sec->at, sec->h.type);
	err = read_record(s, sec, r, sizeof(*r), reason);
	if (!err)
		err = read_tail(s, sec, NULL, 0, reason);
	if (err)
		return err;
	if (r->cs != __USER_CS || r->ss != __USER_DS || r->fs || r->gs ||
	    !user_addr(r->ip) || !user_addr(r->fs_base) ||
	    !user_addr(r->gs_base))
		return ghost_bad(reason, "the registers are not those of a 64-bit user process");
	return 0;
}

/*
 * The image's XSAVE data is converted into a copy of the caller's own FPU
 * state by the same exported routine KVM uses for guest state. The
 * conversion rejects what XRSTOR would fault on (unknown features, reserved
 * bits, a bad MXCSR), so an invalid xstate never reaches the CPU.
 */
static int stage_xstate(struct ghost_stream *s, struct ghost_staged *st,
			char *reason)
{
	struct fpstate *cur = current->thread.fpu.fpstate;
	size_t fpsize = offsetof(struct fpstate, regs) + cur->size;
	struct fpu_guest gf = { 0 };
	struct sec sec;
	struct ghost_xstate x;
	size_t len;
	void *buf;
	u64 xfeatures;
	int err;

	err = read_head(s, st, GHOST_SEC_XSTATE, &x, sizeof(x), &sec, reason);
	if (err)
		return err;
	if (x.__pad || x.size < GHOST_XSTATE_MIN || x.size > GHOST_XSTATE_MAX)
		return ghost_bad(reason, "the FPU section is malformed");
	len = max_t(size_t, x.size, cur->user_size);
	buf = kvzalloc(len, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	err = read_tail(s, &sec, buf, x.size, reason);
	if (err)
		goto out;

	xfeatures = *(u64 *)(buf + 512);
	if (xfeatures & ~cur->user_xfeatures) {
		err = ghost_bad(reason, "the image uses FPU features this CPU lacks (%#llx)",
				xfeatures & ~cur->user_xfeatures);
		goto out;
	}
	if (xfeatures & cur->xfd) {
		err = ghost_bad(reason,
				"the image uses dynamically enabled FPU features: not supported");
		goto out;
	}

	/* Bring the caller's live registers to memory, then copy them. */
	kernel_fpu_begin_mask(0);
	kernel_fpu_end();
	st->fp = kvmalloc(fpsize, GFP_KERNEL);
	if (!st->fp) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(st->fp, cur, fpsize);
	gf.fpstate = st->fp;
	st->has_pkru = xfeatures & XFEATURE_MASK_PKRU;
	err = fpu_copy_uabi_to_guest_fpstate(&gf, buf, cur->user_xfeatures,
					     &st->pkru);
	if (err)
		err = ghost_bad(reason, "the FPU state in the image is invalid");
out:
	kvfree(buf);
	return err;
}

/* ---- signals, fs, limits ------------------------------------------------ */

static int stage_signals(struct ghost_stream *s, struct ghost_staged *st,
			 char *reason)
{
	struct ghost_signals *sg;
	int i, err;

	sg = kmalloc(sizeof(*sg), GFP_KERNEL);
	if (!sg)
		return -ENOMEM;
	st->sig = sg;
	BUILD_BUG_ON(GHOST_SA_FLAGS != UAPI_SA_FLAGS);
	BUILD_BUG_ON(GHOST_SS_FLAGS != (SS_ONSTACK | SS_DISABLE | SS_AUTODISARM));
	BUILD_BUG_ON(GHOST_SIG_PENDING_MASK != ~(~0ULL << (SIGRTMIN - 1)));
	err = read_fixed(s, st, GHOST_SEC_SIGNALS, sg, sizeof(*sg), reason);
	if (err)
		return err;
	for (i = 0; i < GHOST_NSIG; i++) {
		const struct ghost_sigaction *a = &sg->action[i];
		int sig = i + 1;

		if ((a->flags & ~GHOST_SA_FLAGS) || !user_addr(a->restorer) ||
		    ((sig == SIGKILL || sig == SIGSTOP) && a->handler != 0))
			return ghost_bad(reason, "the action of signal %d is invalid", sig);
	}
	if (sg->__pad || (sg->pending & ~GHOST_SIG_PENDING_MASK) ||
	    (sg->pending & (sigmask(SIGKILL) | sigmask(SIGSTOP))) ||
	    (sg->altstack_flags & ~GHOST_SS_FLAGS) ||
	    !user_addr(sg->altstack_sp) ||
	    (sg->altstack_size && !(sg->altstack_flags & GHOST_SS_DISABLE) &&
	     sg->altstack_size < GHOST_MINSIGSTKSZ))	/* sigaltstack(2)'s rule */
		return ghost_bad(reason, "the signal section is malformed");
	return 0;
}

static int stage_fs(struct ghost_stream *s, struct ghost_staged *st,
		    char *reason)
{
	struct ghost_fs fs;
	struct sec sec;
	char *cwd;
	int err;

	err = read_head(s, st, GHOST_SEC_FS, &fs, sizeof(fs), &sec, reason);
	if (!err)
		err = read_path(s, &sec, fs.cwd_len, true, &cwd, reason);
	if (err)
		return err;
	st->umask = fs.umask & 0777;
	err = kern_path(cwd, LOOKUP_FOLLOW | LOOKUP_DIRECTORY, &st->cwd);
	if (!err) {
		err = path_permission(&st->cwd, MAY_EXEC | MAY_CHDIR);
		if (err)
			path_put(&st->cwd);
	}
	if (err) {
		ghost_reason(reason, "cannot enter the working directory %s (error %d)",
			     cwd, err);
		st->cwd.dentry = NULL;
	}
	kfree(cwd);
	return err;
}

static int stage_rlimits(struct ghost_stream *s, struct ghost_staged *st,
			 char *reason)
{
	int i, err = read_fixed(s, st, GHOST_SEC_RLIMITS, &st->rlim,
				sizeof(st->rlim), reason);

	if (err)
		return err;
	st->may_raise_limits = !st->for_user &&
			       has_capability_noaudit(current, CAP_SYS_RESOURCE);
	for (i = 0; i < GHOST_NRLIMITS; i++) {
		u64 cur = st->rlim.rlim[i].cur, max = st->rlim.rlim[i].max;

		st->rlim_max_then[i] = READ_ONCE(current->signal->rlim[i].rlim_max);

		if (cur > max)
			return ghost_bad(reason, "limit %d: soft limit above hard limit", i);
		if (i == RLIMIT_NOFILE && max > GHOST_MAX_FD)
			return ghost_bad(reason, "the file limit in the image is too large");
		/*
		 * An image never raises privileges: no hard limit above the
		 * caller's, unless it may raise its own. Restoring a user's
		 * image for them (GHOST_IMPORT_OWNER) it may not: their limits
		 * here are at most the importer's, whatever another host gave.
		 */
		if (max > current->signal->rlim[i].rlim_max &&
		    (st->for_user || !capable(CAP_SYS_RESOURCE))) {
			ghost_reason(reason, "the image raises hard limit %d above the caller's",
				     i);
			return -EPERM;
		}
	}
	return 0;
}

/*
 * On the last call, against the caller as it is then: a hard limit it
 * lowered after PREPARE (setrlimit, or prlimit by another process) is not
 * raised back by the image. What a caller that could raise its limits at
 * staging was allowed stays allowed while its limit is where it was.
 */
int ghost_check_rlimits_now(const struct ghost_staged *st, char *reason)
{
	int i;

	for (i = 0; i < GHOST_NRLIMITS; i++) {
		u64 max = st->rlim.rlim[i].max;
		u64 now = READ_ONCE(current->signal->rlim[i].rlim_max);

		if (max <= now || (st->may_raise_limits && now >= st->rlim_max_then[i]))
			continue;
		ghost_reason(reason,
			     "the image raises hard limit %d above the caller's, lowered since PREPARE",
			     i);
		return -EPERM;
	}
	return 0;
}

/* ---- memory --------------------------------------------------------------- */

static int stage_mm(struct ghost_stream *s, struct ghost_staged *st,
		    char *reason)
{
	struct ghost_mm *m = &st->mm;
	int err = read_fixed(s, st, GHOST_SEC_MM, m, sizeof(*m), reason);

	if (err)
		return err;
	if (!(st->hdr.features & GHOST_IMAGE_FEAT_VDSO_ID) ?
	    (m->vdso_size || m->vdso_crc32c) :
	    (!m->vdso_size || (m->vdso_size & ~PAGE_MASK)))
		return ghost_bad(reason, "the vDSO record does not fit the image's feature bits");
	if (!m->nr_vmas || m->nr_vmas > GHOST_MAX_VMAS || m->auxv_words < 2 ||
	    m->auxv_words > min_t(size_t, GHOST_AUXV_WORDS,
				  ARRAY_SIZE(current->mm->saved_auxv)) ||
	    (m->auxv_words & 1) ||
	    m->start_brk > m->brk || m->arg_start > m->arg_end ||
	    m->env_start > m->env_end || !user_addr(m->brk) ||
	    !user_addr(m->arg_end) || !user_addr(m->env_end) ||
	    !user_addr(m->start_stack) || !user_addr(m->end_code) ||
	    !user_addr(m->end_data) || m->auxv[m->auxv_words - 2] != AT_NULL)
		return ghost_bad(reason, "the memory layout section is malformed");
	st->vmas = kvcalloc(m->nr_vmas, sizeof(*st->vmas), GFP_KERNEL_ACCOUNT);
	return st->vmas ? 0 : -ENOMEM;
}

/*
 * The run's arrays grow as its pages arrive, never sized by the header: a
 * short stream claiming a huge run must not make the kernel allocate for it.
 */
static int stage_run(struct ghost_stream *s, const struct ghost_staged *st,
		     struct staged_vma *sv, const struct ghost_pages *p,
		     char *reason)
{
	struct staged_run *run;
	unsigned long i, n, k;
	int err;

	err = ghost_array_reserve((void **)&sv->runs, &sv->runs_cap, sv->nr_runs,
				  sv->nr_runs + 1, sizeof(*sv->runs),
				  GFP_KERNEL_ACCOUNT);
	if (err)
		return err;
	run = &sv->runs[sv->nr_runs++];
	memset(run, 0, sizeof(*run));
	run->addr = p->addr;
	if (st->late) {
		/* read straight into the mapping, later (late_pages.c) */
		run->data_at = s->off;
		run->nr_pages = p->nr_pages;
		err = ghost_stream_skip(s, p->nr_pages * PAGE_SIZE);
		return err ? short_read(s, err, reason) : 0;
	}
	for (i = 0; i < p->nr_pages; i += n) {
		struct page *pg;

		/* At most a batch ahead of the data that came. */
		n = min_t(u64, p->nr_pages - i, GHOST_PAGE_BATCH);
		err = ghost_go_on();
		if (!err)
			err = ghost_array_reserve((void **)&run->pages,
						  &run->pages_cap, i, i + n,
						  sizeof(*run->pages),
						  GFP_KERNEL_ACCOUNT);
		if (!err)
			err = ghost_array_reserve((void **)&run->lent,
						  &run->lent_cap,
						  BITS_TO_LONGS(i),
						  BITS_TO_LONGS(i + n),
						  sizeof(*run->lent),
						  GFP_KERNEL_ACCOUNT);
		if (err)
			return err;
		/* A memory ghost lends its own pages: no copy. */
		pg = ghost_stream_take_page(s);
		if (pg) {
			n = 1;
			run->pages[i] = pg;
			run->nr_pages = i + 1;
			__set_bit(i, run->lent);
			continue;
		}
		for (k = 0; k < n; k++) {
			pg = ghost_alloc_page();
			if (!pg)
				return -ENOMEM;
			run->pages[i + k] = pg;
			run->nr_pages = i + k + 1;
		}
		err = ghost_stream_read_pages(s, run->pages + i, n);
		if (err)
			return short_read(s, err, reason);
	}
	return 0;
}

/*
 * Bounds are compared by subtraction, never by adding a count from the
 * image to something else, so that no huge nr_pages can wrap past them.
 */
static bool run_fits(const struct staged_vma *sv, const struct ghost_pages *p,
		     u64 carried)
{
	const struct ghost_vma *v = &sv->v;
	u64 first;

	if ((p->addr & ~PAGE_MASK) || p->addr < v->start || p->addr >= v->end)
		return false;
	first = (p->addr - v->start) >> PAGE_SHIFT;
	if (p->nr_pages == 0 ||
	    p->nr_pages > ((v->end - v->start) >> PAGE_SHIFT) - first ||
	    p->nr_pages > v->nr_pages - carried)
		return false;
	if (sv->nr_runs) {
		const struct staged_run *last = &sv->runs[sv->nr_runs - 1];

		if (p->addr < last->addr + last->nr_pages * PAGE_SIZE)
			return false;
	}
	return true;
}

static int stage_pages(struct ghost_stream *s, const struct ghost_staged *st,
		       struct staged_vma *sv, u64 *carried, char *reason)
{
	struct ghost_pages p;
	struct sec sec;
	int err;

	err = read_head(s, st, GHOST_SEC_PAGES, &p, sizeof(p), &sec, reason);
	if (err)
		return err;
	/* nr_pages is bounded by the mapping before it is multiplied */
	if (p.flags || p.data_offset < sec.rec || !run_fits(sv, &p, *carried) ||
	    sec.h.size != p.data_offset + p.nr_pages * PAGE_SIZE ||
	    ((sec.at + sizeof(sec.h) + p.data_offset) & ~PAGE_MASK))
		return ghost_bad(reason, "the page run at byte %llu is malformed", sec.at);
	err = ghost_stream_skip_zeros(s, p.data_offset - sec.rec);
	if (err)
		return err == -EBADMSG ?
		       ghost_bad(reason, "non-zero padding in page run") :
		       short_read(s, err, reason);
	*carried += p.nr_pages;
	return stage_run(s, st, sv, &p, reason);
}

/*
 * The type of what @path names now, and its device, looked up without
 * opening it: an open can block (a FIFO without a peer) or act (a FIFO's
 * waiting writer wakes, a device's open runs) before its result could be
 * checked. 0, or the lookup's error (the open then reports it).
 */
static int type_of_path(const char *path, umode_t *type, dev_t *rdev)
{
	struct path p;
	int err = kern_path(path, LOOKUP_FOLLOW, &p);

	if (err)
		return err;
	*type = d_inode(p.dentry)->i_mode & S_IFMT;
	*rdev = d_inode(p.dentry)->i_rdev;
	path_put(&p);
	return 0;
}

/*
 * A mapped file is reopened only if it is a regular file or a block
 * device: what the exporter carries (its device mappings are refused).
 */
static int check_mapped_type(const char *path, const struct ghost_vma *v,
			     char *reason)
{
	umode_t type;
	dev_t rdev;

	if (type_of_path(path, &type, &rdev) || type == S_IFREG || type == S_IFBLK)
		return 0;
	ghost_reason(reason, "%s, mapped at %#llx, cannot be mapped: not a regular file (mode %#o)",
		     path, v->start, type);
	return -ENODEV;
}

/*
 * What vm_mmap() would refuse after the point of no return is refused here:
 * a file with no mmap (a directory, /dev/null), or an executable mapping
 * of a file on a noexec mount.
 */
static int check_mappable(struct file *f, const struct ghost_vma *v,
			  const char *path, char *reason)
{
	/*
	 * hugetlbfs wants huge-page-aligned lengths and offsets and a
	 * reservation, which vm_mmap() would refuse only past the point of no
	 * return (the exporter carries no hugetlb mapping either).
	 */
	if (!f->f_op->mmap || file_inode(f)->i_sb->s_magic == HUGETLBFS_MAGIC) {
		ghost_reason(reason, "%s, mapped at %#llx, cannot be mapped",
			     path, v->start);
		return -ENODEV;
	}
	/* path_noexec(), which is not exported */
	if ((v->prot & PROT_EXEC) &&
	    ((f->f_path.mnt->mnt_flags & MNT_NOEXEC) ||
	     (f->f_path.mnt->mnt_sb->s_iflags & SB_I_NOEXEC))) {
		ghost_reason(reason, "%s, mapped executable at %#llx, is on a noexec mount",
			     path, v->start);
		return -EPERM;
	}
	return 0;
}

/* The pages carried for a private file mapping are still in the file. */
static int check_file_length(const struct staged_vma *sv, const char *path,
			     char *reason)
{
	const struct staged_run *last = &sv->runs[sv->nr_runs - 1];
	u64 end_page = sv->v.pgoff +
		       ((last->addr - sv->v.start) >> PAGE_SHIFT) + last->nr_pages;
	u64 size = i_size_read(file_inode(sv->file));

	if (ghost_pages_within_file(end_page, size, PAGE_SIZE))
		return 0;
	ghost_reason(reason, GHOST_FILE_SHORT_REASON, sv->v.start, size,
		     end_page << PAGE_SHIFT, path);
	return -ESTALE;
}

static int stage_vma(struct ghost_stream *s, struct ghost_staged *st,
		     unsigned int idx, char *reason)
{
	struct staged_vma *sv = &st->vmas[idx];
	struct ghost_vma *v = &sv->v;
	struct sec sec;
	u64 carried = 0;
	char *path = NULL;
	int err;

	err = read_head(s, st, GHOST_SEC_VMA, v, sizeof(*v), &sec, reason);
	if (err)
		return err;
	st->nr_vmas = idx + 1;
	if (v->__pad || (v->start & ~PAGE_MASK) || (v->end & ~PAGE_MASK) ||
	    v->start >= v->end || v->end > TASK_SIZE_MAX ||
	    (idx && v->start < st->vmas[idx - 1].v.end) ||
	    (v->prot & ~(PROT_READ | PROT_WRITE | PROT_EXEC)) ||
	    (v->flags & ~GHOST_VMA_FLAGS) ||
	    !ghost_vma_attrs_valid(v->flags, st->hdr.features) ||
	    v->nr_pages > (v->end - v->start) / PAGE_SIZE ||
	    (!(v->flags & GHOST_VMA_FILE) != !v->path_len) ||
	    ((v->flags & GHOST_VMA_SHARED) && !(v->flags & GHOST_VMA_FILE)) ||
	    ((v->flags & (GHOST_VMA_SHARED | GHOST_VMA_VDSO | GHOST_VMA_VVAR)) &&
	     v->nr_pages) ||
	    /* do_mmap() refuses a file mapping that grows down */
	    ((v->flags & GHOST_VMA_FILE) && (v->flags & GHOST_VMA_GROWSDOWN)) ||
	    /* as mmap() sees it: the offset in bytes, plus the length, fits */
	    ((v->flags & GHOST_VMA_FILE) &&
	     v->pgoff > ((u64)MAX_LFS_FILESIZE - (v->end - v->start)) >> PAGE_SHIFT))
		return ghost_bad(reason, "the mapping at %#llx is malformed", v->start);

	if (v->flags & GHOST_VMA_FILE) {
		/* A shared mapping that may be made writable needs it open so. */
		int mode = ((v->flags & GHOST_VMA_SHARED) &&
			    (v->flags & GHOST_VMA_MAYWRITE ||
			     v->prot & PROT_WRITE)) ? O_RDWR : O_RDONLY;
		struct file *f;

		err = read_path(s, &sec, v->path_len, true, &path, reason);
		if (err)
			return err;
		err = check_mapped_type(path, v, reason);
		if (err) {
			kfree(path);
			return err;
		}
		f = filp_open(path, mode | O_LARGEFILE | O_NOCTTY, 0);
		if (IS_ERR(f) && (v->flags & GHOST_VMA_MAYWRITE) &&
		    mode == O_RDWR) {
			ghost_reason(reason, GHOST_MAYWRITE_REASON, path,
				     v->start, (int)PTR_ERR(f));
			kfree(path);
			return PTR_ERR(f);
		}
		if (IS_ERR(f)) {
			ghost_reason(reason, "cannot open %s, mapped at %#llx (error %ld)",
				     path, v->start, PTR_ERR(f));
			kfree(path);
			return PTR_ERR(f);
		}
		sv->file = f;
		err = check_mappable(f, v, path, reason);
		if (err) {
			kfree(path);
			return err;
		}
	} else {
		err = read_tail(s, &sec, NULL, 0, reason);
		if (err)
			return err;
	}
	while (!err && carried < v->nr_pages)
		err = stage_pages(s, st, sv, &carried, reason);
	if (!err && sv->file && sv->nr_runs)
		err = check_file_length(sv, path, reason);
	kfree(path);
	return err;
}

/* ---- files and the end ------------------------------------------------- */

/*
 * Files are found by binary search, not by a walk per DUP or LOCK record
 * (an image may have a million descriptors): the FILE records come in
 * ascending fd order, and those that are not DUPs in ascending file id
 * order (@st->by_id lists them; in images without file ids every id is 0).
 */
static u64 file_key(const struct ghost_staged *st, unsigned int i, bool by_id)
{
	return by_id ? st->files[st->by_id[i]].f.file_id : (u64)st->files[i].f.fd;
}

/* The first of @n entries whose key is at least @key (keys ascending). */
static unsigned int first_at_least(const struct ghost_staged *st,
				   unsigned int n, u64 key, bool by_id)
{
	unsigned int lo = 0, hi = n;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (file_key(st, mid, by_id) < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first staged file (not a DUP) with @file_id, or NULL. */
const struct staged_file *ghost_staged_file(const struct ghost_staged *st,
					    u64 file_id)
{
	unsigned int i = first_at_least(st, st->nr_by_id, file_id, true);

	if (i == st->nr_by_id || file_key(st, i, true) != file_id)
		return NULL;
	return &st->files[st->by_id[i]];
}

/*
 * Before a descriptor's file is opened again: still of the recorded kind,
 * and a device only of the memory class (/dev/null...), as the exporter
 * reopens no other by path.
 */
static int check_reopened_type(const char *path, const struct ghost_file *f,
			       char *reason)
{
	umode_t type;
	dev_t rdev;

	if (type_of_path(path, &type, &rdev))
		return 0;
	if (type != f->mode)
		return ghost_bad(reason, "%s (fd %d) is no longer the same kind of file",
				 path, f->fd);
	if (S_ISCHR(type) && MAJOR(rdev) != MEM_MAJOR) {
		ghost_reason(reason, "%s (fd %d) is a device other than /dev/null and its kind",
			     path, f->fd);
		return -ENODEV;
	}
	return 0;
}

/*
 * A descriptor sharing the open file of an earlier one: the same struct
 * file is installed at both numbers. An inherited one is the importer's.
 * The earlier one has the same file id, or in images without file ids the
 * descriptor number in @pos.
 */
static int stage_dup(struct ghost_staged *st, struct staged_file *sf,
		     char *reason)
{
	const struct ghost_file *f = &sf->f;
	const struct staged_file *t = NULL;
	unsigned int before = st->nr_files - 1, i;

	if (st->hdr.features & GHOST_IMAGE_FEAT_FILE_ID) {
		t = ghost_staged_file(st, f->file_id);
	} else {
		i = first_at_least(st, before, f->pos, false);
		if (i < before && file_key(st, i, false) == f->pos)
			t = &st->files[i];
	}
	if (t && t->f.mode == f->mode) {
		sf->file = t->file ? get_file(t->file) : fget(t->f.fd);
		return sf->file ? 0 : -EBADF;
	}
	return ghost_bad(reason, "fd %d shares the file of fd %llu, which the image lacks",
			 f->fd, f->pos);
}

static int stage_file(struct ghost_stream *s, struct ghost_staged *st,
		      const struct sec *sec, char *reason)
{
	struct staged_file *sf;
	struct ghost_file *f;
	struct file *file;
	char *path;
	int err;

	err = ghost_array_reserve((void **)&st->files, &st->files_cap,
				  st->nr_files, st->nr_files + 1,
				  sizeof(*st->files), GFP_KERNEL_ACCOUNT);
	if (!err)
		err = ghost_array_reserve((void **)&st->by_id, &st->by_id_cap,
					  st->nr_by_id, st->nr_by_id + 1,
					  sizeof(*st->by_id), GFP_KERNEL_ACCOUNT);
	if (err)
		return err;
	sf = &st->files[st->nr_files];
	f = &sf->f;
	err = read_record(s, sec, f, sizeof(*f), reason);
	if (!err)
		err = read_path(s, sec, f->path_len, f->kind == GHOST_FILE_PATH,
				&path, reason);
	if (err)
		return err;
	st->nr_files++;
	if (!(st->hdr.features & GHOST_IMAGE_FEAT_FILE_ID) ? f->file_id != 0 :
	    (!f->file_id ||
	     (f->kind == GHOST_FILE_DUP ? f->pos != 0 : f->file_id <= st->last_file_id))) {
		kfree(path);
		return ghost_bad(reason, "the file id of fd %d is invalid", f->fd);
	}
	if (f->kind != GHOST_FILE_DUP) {
		st->last_file_id = f->file_id;
		st->by_id[st->nr_by_id++] = st->nr_files - 1;
	}
	if (f->fd < 0 || f->fd >= GHOST_MAX_FD ||
	    (st->nr_files > 1 && f->fd <= st->files[st->nr_files - 2].f.fd) ||
	    (f->fd_flags & ~FD_CLOEXEC) ||
	    (f->kind != GHOST_FILE_PATH && f->kind != GHOST_FILE_INHERIT &&
	     f->kind != GHOST_FILE_DUP) ||
	    (f->kind == GHOST_FILE_INHERIT && !ghost_file_inheritable(f->mode)) ||
	    (f->kind == GHOST_FILE_PATH && !ghost_file_reopenable(f->mode))) {
		kfree(path);
		return ghost_bad(reason, "the file section of fd %d is malformed", f->fd);
	}

	if (f->kind == GHOST_FILE_DUP) {
		kfree(path);
		st->fd_end = (u64)f->fd + 1;
		return stage_dup(st, sf, reason);
	}

	if (f->kind == GHOST_FILE_INHERIT) {
		file = fget(f->fd);
		err = (!file || (file_inode(file)->i_mode & S_IFMT) != f->mode) ?
			-EBADF : 0;
		if (err)
			ghost_reason(reason,
				     "fd %d (%s) must be inherited: open it at that number",
				     f->fd, path);
		if (file)
			fput(file);
		kfree(path);
		return err;
	}

	st->fd_end = (u64)f->fd + 1;
	err = check_reopened_type(path, f, reason);
	if (err) {
		kfree(path);
		return err;
	}
	/*
	 * O_NOCTTY whatever the image says: reopening a terminal must not make
	 * it the importer's controlling terminal (the session is restored as
	 * the image has it, not by the side effect of an open).
	 */
	file = filp_open(path, (f->flags & ~(O_CREAT | O_EXCL | O_TRUNC |
					    O_CLOEXEC)) | O_NOCTTY, 0);
	if (IS_ERR(file)) {
		ghost_reason(reason, "cannot reopen %s as fd %d (error %ld)",
			     path, f->fd, PTR_ERR(file));
		kfree(path);
		return PTR_ERR(file);
	}
	sf->file = file;
	err = 0;
	if ((file_inode(file)->i_mode & S_IFMT) != f->mode)
		err = ghost_bad(reason, "%s (fd %d) is no longer the same kind of file",
				path, f->fd);
	else if (S_ISREG(f->mode) && !(f->flags & O_PATH) &&
		 vfs_llseek(file, f->pos, SEEK_SET) != f->pos)
		err = ghost_bad(reason, "cannot seek %s (fd %d) to %llu", path, f->fd,
				f->pos);
	kfree(path);
	return err;
}

/* A LOCK record, after the FILE records (GHOST_IMAGE_FEAT_LOCKS). */
static int stage_lock(struct ghost_stream *s, struct ghost_staged *st,
		      const struct sec *sec, char *reason)
{
	struct ghost_lock l;
	int err = read_record(s, sec, &l, sizeof(l), reason);

	if (!err)
		err = read_tail(s, sec, NULL, 0, reason);
	return err ? err : ghost_stage_lock(st, &l, reason);
}

/*
 * The END record against the checksum of the @sec->at bytes before it: an
 * XXH64 in GHOST_IMAGE_FEAT_XXH64 images (whose END must be long enough to
 * hold one), else a crc32c.
 */
static int check_end(struct ghost_stream *s, const struct ghost_staged *st,
		     const struct sec *sec, const struct ghost_end *end,
		     char *reason)
{
	bool xxh = st->hdr.features & GHOST_IMAGE_FEAT_XXH64;

	if (end->bytes != sec->at || end->__pad)
		return ghost_bad(reason, "the end section is malformed");
	if (xxh && sec->rec < offsetofend(struct ghost_end, xxh64))
		return ghost_bad(reason,
				 "the image says its checksum is an XXH64, but its %u-byte end record has none",
				 sec->rec);
	if (xxh ? end->crc32c != 0 : end->xxh64 != 0)
		return ghost_bad(reason, "the end section is malformed");
	if (st->late)
		return 0;	/* the page data is to come: late_pages.c */
	if (xxh ? end->xxh64 != sec->sum : end->crc32c != (u32)sec->sum)
		return ghost_bad(reason, "checksum mismatch (%s): the image is corrupted",
				 xxh ? "xxh64" : "crc32c");
	return 0;
}

static int stage_tail(struct ghost_stream *s, struct ghost_staged *st,
		      char *reason)
{
	bool locks = st->hdr.features & GHOST_IMAGE_FEAT_LOCKS;

	for (;;) {
		struct ghost_end end;
		struct sec sec;
		int err = next_section(s, st, &sec, reason);

		if (err)
			return err;
		if (sec.h.type == GHOST_SEC_LOCK && locks) {
			err = stage_lock(s, st, &sec, reason);
			if (err)
				return err;
			continue;
		}
		if (sec.h.type == GHOST_SEC_FILE && !st->nr_locks) {
			err = stage_file(s, st, &sec, reason);
			if (err)
				return err;
			continue;
		}
		if (sec.h.type != GHOST_SEC_END || sec.h.size != sec.rec)
			return ghost_bad(reason, "unexpected section %u at byte %llu",
					 sec.h.type, sec.at);
		err = read_record(s, &sec, &end, sizeof(end), reason);
		if (!err)
			err = check_end(s, st, &sec, &end, reason);
		st->end_at = sec.at;
		st->end_sum = end.xxh64;
		if (!err)
			st->bytes = s->off;
		return err;
	}
}

/*
 * The image's descriptors go in under the image's RLIMIT_NOFILE or, when a
 * process lowered its limit below descriptors it kept, under the
 * importer's (restore.c); one of them must admit the highest.
 */
static int check_fd_limit(const struct ghost_staged *st, char *reason)
{
	u64 own = rlimit(RLIMIT_NOFILE);

	if (st->fd_end <= st->rlim.rlim[RLIMIT_NOFILE].cur || st->fd_end <= own)
		return 0;
	ghost_reason(reason,
		     "the image has fd %llu, above both its RLIMIT_NOFILE (%llu) and the importer's (%llu)",
		     st->fd_end - 1, st->rlim.rlim[RLIMIT_NOFILE].cur, own);
	return -EMFILE;
}

/*
 * Again in the final call, what staging checked of the caller's
 * descriptors, which it may have changed since: the image's inherited ones
 * are open at their numbers with the same file type (one closed would be
 * missing from the restored process, without a word), and a limit admits
 * the highest. Its table is its own (check_importer()), so nothing changes
 * it between here and restore_files().
 */
int ghost_check_descriptors_now(const struct ghost_staged *st, char *reason)
{
	unsigned int i;

	for (i = 0; i < st->nr_files; i++) {
		const struct ghost_file *f = &st->files[i].f;
		struct file *file;
		bool same;

		if (f->kind != GHOST_FILE_INHERIT)
			continue;
		file = fget(f->fd);
		same = file && (file_inode(file)->i_mode & S_IFMT) == f->mode;
		if (file)
			fput(file);
		if (!same) {
			ghost_reason(reason,
				     "fd %d must be inherited but is %s since the import was prepared: open it at that number",
				     f->fd, file ? "another kind of file" : "closed");
			return -EBADF;
		}
	}
	return check_fd_limit(st, reason);
}

/* Arg and env strings, the stack and the heap must lie in the image. */
static int check_layout(struct ghost_staged *st, char *reason)
{
	const struct ghost_mm *m = &st->mm;
	const u64 inside[] = { m->arg_start, m->env_start, m->start_stack };
	unsigned int i, j;

	for (j = 0; j < ARRAY_SIZE(inside); j++) {
		for (i = 0; i < st->nr_vmas; i++)
			if (st->vmas[i].v.start <= inside[j] &&
			    inside[j] < st->vmas[i].v.end)
				break;
		if (i == st->nr_vmas && inside[j])
			return ghost_bad(reason, "the memory layout points outside the mappings");
	}
	/* The recorded vDSO is the [vdso] mapping at mm.vdso. */
	for (i = 0; m->vdso_size && i < st->nr_vmas; i++) {
		const struct ghost_vma *v = &st->vmas[i].v;

		if ((v->flags & GHOST_VMA_VDSO) && v->start == m->vdso &&
		    v->end - v->start == m->vdso_size)
			return 0;
	}
	if (m->vdso_size)
		return ghost_bad(reason, "the image records a vDSO that is not among its mappings");
	return 0;
}

void ghost_staged_free(struct ghost_staged *st)
{
	unsigned int i, j;
	unsigned long k;

	if (!st)
		return;
	for (i = 0; i < st->nr_vmas; i++) {
		struct staged_vma *sv = &st->vmas[i];

		for (j = 0; j < sv->nr_runs; j++) {
			struct staged_run *run = &sv->runs[j];

			for (k = 0; run->pages && k < run->nr_pages; k++) {
				if (test_bit(k, run->lent))
					put_page(run->pages[k]);
				else
					ghost_free_page(run->pages[k]);
			}
			kvfree(run->pages);
			kvfree(run->lent);
		}
		kvfree(sv->runs);
		if (sv->file)
			fput(sv->file);
	}
	kvfree(st->vmas);
	for (i = 0; i < st->nr_files; i++)
		if (st->files[i].file)
			fput(st->files[i].file);
	kvfree(st->files);
	kvfree(st->by_id);
	ghost_staged_locks_free(st);
	if (st->cwd.dentry)
		path_put(&st->cwd);
	kfree(st->sig);
	kvfree(st->fp);
	ghost_creds_free(st);
	put_pid(st->owner);
	if (st->cred)
		put_cred(st->cred);
	if (st->owner_mm)
		mmdrop(st->owner_mm);
	ghost_late_free(st->late);
	kfree(st);
}

const struct staged_vma *ghost_staged_vma(const struct ghost_staged *st,
					  u32 flag)
{
	unsigned int i;

	for (i = 0; i < st->nr_vmas; i++)
		if (st->vmas[i].v.flags & flag)
			return &st->vmas[i];
	return NULL;
}

/*
 * GHOST_IMPORT_DIRECT (@direct): the page data is left in the image file for
 * late_pages.c, when the resource is a file that can be read at any offset
 * and the image's checksum an XXH64 (late_pages.c checks no crc32c);
 * otherwise it is staged as without it.
 */
static int stage_direct(struct ghost_stream *s, struct ghost_staged *st)
{
	struct file *f;

	if (!(st->hdr.features & GHOST_IMAGE_FEAT_XXH64))
		return 0;
	f = ghost_res_direct_file(s->res);
	if (!f)
		return 0;
	/* The image starts where the file was when it was plugged in. */
	st->late = ghost_late_begin(f, f->f_pos - s->off);
	return st->late ? 0 : -ENOMEM;
}

int ghost_stage(struct ghost_stream *s, const struct ghost_import *im,
		struct ghost_staged **out, char *reason)
{
	struct ghost_staged *st = kzalloc(sizeof(*st), GFP_KERNEL);
	const struct cred *old;
	struct sec sec;
	unsigned int i;
	int err;

	if (!st)
		return -ENOMEM;
	err = stage_header(s, st, reason);
	if (!err && (im->flags & GHOST_IMPORT_DIRECT))
		err = stage_direct(s, st);
	if (!err)
		err = stage_task(s, st, reason);
	if (!err)
		err = stage_task_extras(s, st, &sec, reason);
	/* The owner's check comes before any file the image names is opened. */
	if (!err && (im->flags & GHOST_IMPORT_OWNER))
		err = ghost_creds_owner(st, im->owner, reason);
	st->for_user = (im->flags & GHOST_IMPORT_OWNER) && im->owner;
	if (!err)
		err = stage_regs(s, st, &sec, reason);
	if (!err)
		err = stage_xstate(s, st, reason);
	if (!err)
		err = stage_signals(s, st, reason);
	/* Files are opened as the image's credentials; limits the caller's. */
	old = ghost_creds_override(st);
	if (!err)
		err = stage_fs(s, st, reason);
	ghost_creds_revert(old);
	if (!err)
		err = stage_rlimits(s, st, reason);
	old = ghost_creds_override(st);
	if (!err)
		err = stage_mm(s, st, reason);
	for (i = 0; !err && i < st->mm.nr_vmas; i++)
		err = stage_vma(s, st, i, reason);
	if (!err)
		err = stage_tail(s, st, reason);
	if (!err)
		err = ghost_check_posix_locks(st, reason);
	ghost_creds_revert(old);
	if (!err)
		err = check_layout(st, reason);
	if (!err)
		err = check_fd_limit(st, reason);
	if (!err)
		err = ghost_check_vma_attrs(st, reason);
	if (err) {
		if (!reason[0])
			ghost_reason(reason, "reading the image failed (error %d)", err);
		ghost_staged_free(st);
		return err;
	}
	*out = st;
	return 0;
}
