// SPDX-License-Identifier: GPL-2.0
/*
 * Resource objects: where a ghost's image goes to or comes from.
 *
 *  - memory: pages owned by the ghost. User space reads or mmaps them
 *    (read-only) after an export, and writes an image into them before an
 *    import. Pages, not one vmalloc area, so the buffer grows without
 *    copying and maps with vm_map_pages().
 *  - file: a regular file or a pipe, written or read front to back.
 *  - network: a connected stream socket; the same read/write path as a
 *    file, since sockets implement read_iter/write_iter.
 */
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/net.h>
#include <linux/slab.h>
#include <linux/file.h>
#include <net/sock.h>
#include <linux/ghost.h>

#include "compat.h"
#include "internal.h"

/* ---- memory ------------------------------------------------------------ */

/*
 * @lock guards the page array and the lengths. It is the innermost lock:
 * ->mmap takes it under the caller's mmap_lock, so nothing that can fault
 * (a user copy) or take an mmap_lock runs while it is held. User copies
 * work on a page reference taken under it.
 */
struct ghost_mem {
	struct ghost_res res;
	struct mutex lock;	/* the pages and lengths; see above */
	struct page **pages;
	size_t nr_alloc;	/* length of @pages */
	size_t nr_pages;	/* pages allocated */
	size_t len;		/* bytes of image */
	size_t cap;		/* bytes allowed */
	size_t rpos;		/* read cursor of the current import */
};

static struct ghost_mem *to_mem(struct ghost_res *res)
{
	return container_of(res, struct ghost_mem, res);
}

static int mem_grow(struct ghost_mem *m, size_t need)
{
	size_t want = DIV_ROUND_UP(need, PAGE_SIZE);
	int err;

	lockdep_assert_held(&m->lock);
	if (need > m->cap)
		return -EFBIG;
	err = ghost_array_reserve((void **)&m->pages, &m->nr_alloc, m->nr_pages,
				  want, sizeof(*m->pages), GFP_KERNEL_ACCOUNT);
	if (err)
		return err;
	while (m->nr_pages < want) {
		struct page *pg = ghost_alloc_page();

		if (!pg)
			return -ENOMEM;
		m->pages[m->nr_pages++] = pg;
	}
	return 0;
}

/*
 * A page referenced elsewhere holds an earlier image that someone still
 * reads: lent to an import rebuilding from it without g->lock (its
 * checksum checked, mem_take_page()), or mapped by a reader. A new image is
 * written into a page of the ghost's own, so that neither ever sees bytes
 * of two images.
 */
static int mem_own_page(struct ghost_mem *m, size_t idx)
{
	struct page *old = m->pages[idx], *fresh;

	lockdep_assert_held(&m->lock);
	if (page_count(old) == 1)
		return 0;
	fresh = ghost_alloc_page();
	if (!fresh)
		return -ENOMEM;
	copy_highpage(fresh, old);	/* what this image wrote there so far */
	m->pages[idx] = fresh;
	ghost_free_page(old);		/* the ghost's reference only */
	return 0;
}

static int mem_write(struct ghost_res *res, const void *buf, size_t len)
{
	struct ghost_mem *m = to_mem(res);
	int err;

	mutex_lock(&m->lock);
	err = mem_grow(m, m->len + len);
	while (!err && len) {
		size_t off = offset_in_page(m->len);
		size_t n = min(len, PAGE_SIZE - off);

		err = mem_own_page(m, m->len >> PAGE_SHIFT);
		if (err)
			break;
		memcpy_to_page(m->pages[m->len >> PAGE_SHIFT], off, buf, n);
		m->len += n;
		buf += n;
		len -= n;
	}
	mutex_unlock(&m->lock);
	return err;
}

static int mem_read(struct ghost_res *res, void *buf, size_t len)
{
	struct ghost_mem *m = to_mem(res);

	mutex_lock(&m->lock);
	if (len > m->len - m->rpos) {
		mutex_unlock(&m->lock);
		return -ENODATA;
	}
	while (len) {
		size_t off = offset_in_page(m->rpos);
		size_t n = min(len, PAGE_SIZE - off);

		memcpy_from_page(buf, m->pages[m->rpos >> PAGE_SHIFT], off, n);
		m->rpos += n;
		buf += n;
		len -= n;
	}
	mutex_unlock(&m->lock);
	return 0;
}

static struct page *mem_take_page(struct ghost_res *res)
{
	struct ghost_mem *m = to_mem(res);
	struct page *pg = NULL;

	mutex_lock(&m->lock);
	if (!(m->rpos & ~PAGE_MASK) && m->len - m->rpos >= PAGE_SIZE) {
		pg = m->pages[m->rpos >> PAGE_SHIFT];
		get_page(pg);
		m->rpos += PAGE_SIZE;
	}
	mutex_unlock(&m->lock);
	return pg;
}

static void mem_rewind(struct ghost_res *res)
{
	struct ghost_mem *m = to_mem(res);

	mutex_lock(&m->lock);
	m->rpos = 0;
	mutex_unlock(&m->lock);
}

static void mem_truncate(struct ghost_res *res)
{
	struct ghost_mem *m = to_mem(res);

	mutex_lock(&m->lock);
	m->len = 0;
	m->rpos = 0;
	mutex_unlock(&m->lock);
}

static void mem_release(struct ghost_res *res)
{
	struct ghost_mem *m = to_mem(res);
	size_t i;

	for (i = 0; i < m->nr_pages; i++)
		ghost_free_page(m->pages[i]);
	kvfree(m->pages);
	mutex_destroy(&m->lock);
	kfree(m);
}

static const struct ghost_res_ops mem_ops = {
	.write = mem_write,
	.read = mem_read,
	.rewind = mem_rewind,
	.take_page = mem_take_page,
	.truncate = mem_truncate,
	.release = mem_release,
};

static struct ghost_res *mem_create(u64 capacity)
{
	struct ghost_mem *m = kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);

	if (!m)
		return ERR_PTR(-ENOMEM);
	mutex_init(&m->lock);
	m->res.ops = &mem_ops;
	m->res.type = GHOST_RES_MEMORY;
	m->cap = capacity ? capacity : GHOST_MEMORY_DEFAULT_CAPACITY;
	return &m->res;
}

/*
 * The page holding byte @pos of the image and how many bytes of it from
 * there, with a reference; NULL past the end. To @write, a page of the
 * ghost's own (mem_own_page(); an ERR_PTR if none could be had). The copy
 * to or from user space is then made without m->lock (it may fault).
 */
static struct page *mem_page_at(struct ghost_mem *m, size_t pos, size_t limit,
				size_t *n, bool write)
{
	struct page *pg = NULL;
	int err = 0;

	mutex_lock(&m->lock);
	if (pos < limit && pos < m->nr_pages * PAGE_SIZE) {
		if (write)
			err = mem_own_page(m, pos >> PAGE_SHIFT);
		if (!err) {
			pg = m->pages[pos >> PAGE_SHIFT];
			get_page(pg);
			*n = min(PAGE_SIZE - offset_in_page(pos), limit - pos);
		}
	}
	mutex_unlock(&m->lock);
	return err ? ERR_PTR(err) : pg;
}

/* User reads of the image; g->lock (the caller's) keeps writers away. */
ssize_t ghost_mem_read_user(struct ghost_res *res, char __user *ubuf,
			    size_t len, loff_t *pos)
{
	struct ghost_mem *m = to_mem(res);
	size_t done = 0, n, end;
	struct page *pg;

	if (*pos < 0)
		return -EINVAL;
	mutex_lock(&m->lock);
	end = m->len;
	mutex_unlock(&m->lock);
	while (done < len &&
	       (pg = mem_page_at(m, *pos, end, &n, false))) {
		unsigned long left;
		void *p;

		n = min(n, len - done);
		p = kmap_local_page(pg);
		left = copy_to_user(ubuf + done, p + offset_in_page(*pos), n);
		kunmap_local(p);
		put_page(pg);
		if (left)
			return done ? done : -EFAULT;
		done += n;
		*pos += n;
	}
	return done;
}

/* User writes append to the image; the caller holds g->lock. */
ssize_t ghost_mem_write_user(struct ghost_res *res, const char __user *ubuf,
			     size_t len)
{
	struct ghost_mem *m = to_mem(res);
	size_t done = 0, n, start;
	struct page *pg;
	int err;

	mutex_lock(&m->lock);
	err = mem_grow(m, m->len + len);
	start = m->len;
	mutex_unlock(&m->lock);
	if (err)
		return err;
	while (done < len &&
	       (pg = mem_page_at(m, start + done, start + len, &n, true))) {
		unsigned long left;
		void *p;

		if (IS_ERR(pg)) {
			err = PTR_ERR(pg);
			break;
		}

		p = kmap_local_page(pg);
		left = copy_from_user(p + offset_in_page(start + done),
				      ubuf + done, n);
		kunmap_local(p);
		put_page(pg);
		if (left)
			break;
		done += n;
	}
	mutex_lock(&m->lock);
	m->len = start + done;
	mutex_unlock(&m->lock);
	if (done || !len)
		return done;
	return err ? err : -EFAULT;
}

/* Under the caller's mmap_lock: takes only m->lock. */
int ghost_mem_mmap(struct ghost_res *res, struct vm_area_struct *vma)
{
	struct ghost_mem *m = to_mem(res);
	int err;

	/* The image is read-only once written: no writable or shared-writable maps. */
	if (vma->vm_flags & VM_WRITE)
		return -EACCES;
	ghost_vm_flags_clear(vma, VM_MAYWRITE);
	mutex_lock(&m->lock);
	/*
	 * The last page is mapped whole: what lies past the image in it
	 * (fresh pages are not zeroed, or an earlier image's bytes) is not
	 * for the mapper to see.
	 */
	if (offset_in_page(m->len))
		memzero_page(m->pages[m->len >> PAGE_SHIFT], offset_in_page(m->len),
			     PAGE_SIZE - offset_in_page(m->len));
	err = vm_map_pages(vma, m->pages, DIV_ROUND_UP(m->len, PAGE_SIZE));
	mutex_unlock(&m->lock);
	return err;
}

/* ---- file and network ------------------------------------------------ */

struct ghost_fileres {
	struct ghost_res res;
	struct file *file;
};

static struct ghost_fileres *to_fileres(struct ghost_res *res)
{
	return container_of(res, struct ghost_fileres, res);
}

static int file_write(struct ghost_res *res, const void *buf, size_t len)
{
	struct file *f = to_fileres(res)->file;

	/* kernel_write() warns on a file not open for writing: EBADF first. */
	if (!(f->f_mode & FMODE_WRITE))
		return -EBADF;
	while (len) {
		ssize_t n = kernel_write(f, buf, len, &f->f_pos);

		if (n < 0)
			return n;
		if (n == 0)
			return -EIO;
		buf += n;
		len -= n;
	}
	return 0;
}

/* All @len bytes of @f at *@pos; -ENODATA when it ends first. */
int ghost_file_read(struct file *f, void *buf, size_t len, loff_t *pos)
{
	/* kernel_read() warns on a file not open for reading: EBADF first. */
	if (!(f->f_mode & FMODE_READ))
		return -EBADF;
	while (len) {
		ssize_t n = kernel_read(f, buf, len, pos);

		if (n < 0)
			return n;
		if (n == 0)
			return -ENODATA;	/* the image ends early */
		buf += n;
		len -= n;
	}
	return 0;
}

static int file_read(struct ghost_res *res, void *buf, size_t len)
{
	struct file *f = to_fileres(res)->file;

	return ghost_file_read(f, buf, len, &f->f_pos);
}

/*
 * Many whole pages of @f at *@pos in one read or write: one pass through
 * the VFS (and, for a socket, one send or receive) for what would be @nr
 * calls of kernel_read() or kernel_write().
 */
int ghost_file_pages(struct file *f, struct page **pages, unsigned int nr,
		     loff_t *pos, bool write)
{
	struct bio_vec bv[GHOST_PAGE_BATCH];
	size_t left = (size_t)nr * PAGE_SIZE;
	struct iov_iter it;
	unsigned int i;

	if (nr > GHOST_PAGE_BATCH)
		return -EINVAL;
	for (i = 0; i < nr; i++) {
		bv[i].bv_page = pages[i];
		bv[i].bv_len = PAGE_SIZE;
		bv[i].bv_offset = 0;
	}
	iov_iter_bvec(&it, write ? ITER_SOURCE : ITER_DEST, bv, nr, left);
	while (left) {
		ssize_t n = write ? vfs_iter_write(f, &it, pos, 0) :
				    vfs_iter_read(f, &it, pos, 0);

		if (n < 0)
			return n;
		if (n == 0)	/* a read: the image ends early */
			return write ? -EIO : -ENODATA;
		left -= n;
	}
	return 0;
}

static int file_write_pages(struct ghost_res *res, struct page **pages,
			    unsigned int nr)
{
	struct file *f = to_fileres(res)->file;

	return ghost_file_pages(f, pages, nr, &f->f_pos, true);
}

static int file_read_pages(struct ghost_res *res, struct page **pages,
			   unsigned int nr)
{
	struct file *f = to_fileres(res)->file;

	return ghost_file_pages(f, pages, nr, &f->f_pos, false);
}

/*
 * Page data an import reads later, straight into the new mappings
 * (GHOST_IMPORT_DIRECT): the bytes must be in the file now, so that an
 * image cut short is refused before the point of no return.
 */
static int file_skip(struct ghost_res *res, u64 len)
{
	struct file *f = to_fileres(res)->file;
	loff_t size = i_size_read(file_inode(f));

	if (!S_ISREG(file_inode(f)->i_mode))
		return -ESPIPE;
	if (f->f_pos > size || len > (u64)(size - f->f_pos))
		return -ENODATA;
	f->f_pos += len;
	return 0;
}

static void file_release(struct ghost_res *res)
{
	fput(to_fileres(res)->file);
	kfree(to_fileres(res));
}

static const struct ghost_res_ops file_ops = {
	.write = file_write,
	.read = file_read,
	.write_pages = file_write_pages,
	.read_pages = file_read_pages,
	.skip = file_skip,
	.release = file_release,
};

static struct ghost_res *file_create(int fd, u32 type)
{
	struct ghost_fileres *r;
	struct file *f = fget(fd);
	umode_t mode;

	if (!f)
		return ERR_PTR(-EBADF);
	mode = file_inode(f)->i_mode;
	if (type == GHOST_RES_FILE && !S_ISREG(mode) && !S_ISFIFO(mode))
		goto inval;
	if (type == GHOST_RES_NETWORK) {
		struct socket *sock = sock_from_file(f);

		if (!sock || sock->type != SOCK_STREAM ||
		    sock->state != SS_CONNECTED)
			goto inval;
	}
	r = kzalloc(sizeof(*r), GFP_KERNEL_ACCOUNT);
	if (!r) {
		fput(f);
		return ERR_PTR(-ENOMEM);
	}
	r->res.ops = &file_ops;
	r->res.type = type;
	r->file = f;
	return &r->res;
inval:
	fput(f);
	return ERR_PTR(-EINVAL);
}

/*
 * The image file an import may read page data from at any offset, after
 * the point of no return (GHOST_IMPORT_DIRECT): a regular file, open for
 * reading, with read_iter. A reference, or NULL for any other resource.
 */
struct file *ghost_res_direct_file(struct ghost_res *res)
{
	struct file *f;

	if (res->ops != &file_ops || res->type != GHOST_RES_FILE)
		return NULL;
	f = to_fileres(res)->file;
	if (!S_ISREG(file_inode(f)->i_mode) || !(f->f_mode & FMODE_READ) ||
	    !f->f_op->read_iter)
		return NULL;
	return get_file(f);
}

struct ghost_res *ghost_res_create(const struct ghost_plug *p)
{
	switch (p->type) {
	case GHOST_RES_MEMORY:
		if (p->fd != -1 && p->fd != 0)
			return ERR_PTR(-EINVAL);
		return mem_create(p->capacity);
	case GHOST_RES_FILE:
	case GHOST_RES_NETWORK:
		if (p->capacity)
			return ERR_PTR(-EINVAL);
		return file_create(p->fd, p->type);
	default:
		return ERR_PTR(-EINVAL);
	}
}
