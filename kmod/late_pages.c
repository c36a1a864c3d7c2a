// SPDX-License-Identifier: GPL-2.0
/*
 * GHOST_IMPORT_DIRECT: page data read from the image file straight into
 * the new mappings, after the point of no return, instead of into staged
 * kernel pages before it and copied from them after.
 *
 * Everything but the page data was read and checked before the point of no
 * return (stage.c found the page data there and passed over it). Here the
 * file is read a second time, front to back up to the END record: the
 * bytes between runs only into the checksum, the runs into the pages
 * restore.c faults in, and the XXH64 of it all must equal the END's. The
 * sum covers the bytes placed, so a file changed between the two readings
 * fails it like a damaged one, and the caller is killed before the restored
 * process runs an instruction.
 */
#include <linux/cred.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/xxhash.h>

#include "import.h"

struct ghost_late {
	struct file *file;		/* the image file (a reference) */
	loff_t base;			/* where the image starts in it */
	loff_t pos;			/* read and summed up to here */
	struct xxh64_state xxh;
	void *buf;			/* a page for the bytes between runs */
};

/*
 * Made when the image is staged, so that nothing fails for want of it
 * later; takes over the reference to @file (dropped on failure too). The
 * image starts at byte @base of the file (it is read from the file's
 * offset, which need not be 0); positions below are the image's own.
 */
struct ghost_late *ghost_late_begin(struct file *file, loff_t base)
{
	struct ghost_late *r = kzalloc(sizeof(*r), GFP_KERNEL);

	if (r)
		r->buf = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!r || !r->buf) {
		kfree(r);
		fput(file);
		return NULL;
	}
	r->file = file;
	r->base = base;
	r->pos = base;
	xxh64_reset(&r->xxh, 0);
	return r;
}

void ghost_late_free(struct ghost_late *r)
{
	if (!r)
		return;
	fput(r->file);
	kfree(r->buf);
	kfree(r);
}

/*
 * The bytes from r->pos up to image byte @to (records and padding) into
 * the sum. The file is read, here and below, as the one who opened it:
 * the caller may run as the image's credentials by now. -ENODATA: cut
 * short since staged.
 */
static int late_sum_to(struct ghost_late *r, u64 to)
{
	const struct cred *old;
	int err = 0;

	to += r->base;
	if (r->pos > to)
		return -EBADMSG;
	old = override_creds(r->file->f_cred);
	while (!err && r->pos < to) {
		size_t n = min_t(u64, to - r->pos, PAGE_SIZE);

		err = ghost_file_read(r->file, r->buf, n, &r->pos);
		if (!err)
			xxh64_update(&r->xxh, r->buf, n);
	}
	revert_creds(old);
	return err;
}

/*
 * Pages @first.. @first + @nr - 1 of @run into @pages, the mapping's own,
 * in one read.
 */
int ghost_late_read(struct ghost_late *r, const struct staged_run *run,
		    unsigned long first, struct page **pages, unsigned int nr)
{
	const struct cred *old;
	unsigned int i;
	int err;

	err = late_sum_to(r, run->data_at + (u64)first * PAGE_SIZE);
	if (err)
		return err;
	old = override_creds(r->file->f_cred);
	err = ghost_file_pages(r->file, pages, nr, &r->pos, false);
	revert_creds(old);
	for (i = 0; i < nr && !err; i++) {
		void *v = kmap_local_page(pages[i]);

		xxh64_update(&r->xxh, v, PAGE_SIZE);
		kunmap_local(v);
	}
	return err;
}

/* After the last run: the rest up to the END record, and the sum. */
int ghost_late_end(struct ghost_late *r, const struct ghost_staged *st)
{
	int err = late_sum_to(r, st->end_at);

	if (err)
		return err;
	if (xxh64_digest(&r->xxh) != st->end_sum) {
		pr_warn_ratelimited("ghost: pid %d: the image's checksum (xxh64) does not match the data read after the point of no return: damaged, or changed since it was staged\n",
				    task_pid_nr(current));
		return -EBADMSG;
	}
	return 0;
}
