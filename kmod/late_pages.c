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
#include <linux/bvec.h>
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <linux/xxhash.h>

#include "import.h"

struct ghost_late {
	struct file *file;
	loff_t pos;			/* read and summed up to here */
	struct xxh64_state xxh;
	void *buf;			/* a page for the bytes between runs */
};

/* Made when the image is staged: nothing may fail for want of it later. */
struct ghost_late *ghost_late_begin(struct file *file)
{
	struct ghost_late *r = kzalloc(sizeof(*r), GFP_KERNEL);

	if (!r)
		return NULL;
	r->buf = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!r->buf) {
		kfree(r);
		return NULL;
	}
	r->file = file;
	xxh64_reset(&r->xxh, 0);
	return r;
}

void ghost_late_free(struct ghost_late *r)
{
	if (!r)
		return;
	kfree(r->buf);
	kfree(r);
}

/*
 * Reads into @it at r->pos, all of it. The file is read as the one who
 * opened it: the caller may run as the image's credentials by now.
 */
static int late_read_iter(struct ghost_late *r, struct iov_iter *it)
{
	const struct cred *old = override_creds(r->file->f_cred);
	int err = 0;

	while (iov_iter_count(it)) {
		ssize_t n = vfs_iter_read(r->file, it, &r->pos, 0);

		if (n <= 0) {
			err = n ? n : -ENODATA;	/* cut short since staged */
			break;
		}
	}
	revert_creds(old);
	return err;
}

/* The bytes from r->pos up to @to (records and padding) into the sum. */
static int late_sum_to(struct ghost_late *r, u64 to)
{
	while (r->pos < to) {
		size_t n = min_t(u64, to - r->pos, PAGE_SIZE);
		struct kvec kv = { .iov_base = r->buf, .iov_len = n };
		struct iov_iter it;
		int err;

		iov_iter_kvec(&it, ITER_DEST, &kv, 1, n);
		err = late_read_iter(r, &it);
		if (err)
			return err;
		xxh64_update(&r->xxh, r->buf, n);
	}
	return r->pos == to ? 0 : -EBADMSG;
}

/*
 * Pages @first.. @first + @nr - 1 of @run into @pages, the mapping's own,
 * in one read.
 */
int ghost_late_read(struct ghost_late *r, const struct staged_run *run,
		    unsigned long first, struct page **pages, unsigned int nr)
{
	struct bio_vec bv[GHOST_PAGE_BATCH];
	struct iov_iter it;
	unsigned int i;
	int err;

	if (nr > GHOST_PAGE_BATCH)
		return -EINVAL;
	err = late_sum_to(r, run->data_at + (u64)first * PAGE_SIZE);
	if (err)
		return err;
	for (i = 0; i < nr; i++) {
		bv[i].bv_page = pages[i];
		bv[i].bv_len = PAGE_SIZE;
		bv[i].bv_offset = 0;
	}
	iov_iter_bvec(&it, ITER_DEST, bv, nr, (size_t)nr * PAGE_SIZE);
	err = late_read_iter(r, &it);
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
