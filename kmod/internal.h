/* SPDX-License-Identifier: GPL-2.0 */
/* Declarations shared between the files of ghost.ko. */
#ifndef GHOST_INTERNAL_H
#define GHOST_INTERNAL_H

#include <linux/fs.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/types.h>
#include <linux/xxhash.h>

struct ghost_plug;
struct vm_area_struct;

/* device.c: the /dev/ghost character device. */
int ghost_device_init(void);
void ghost_device_exit(void);

/* ioctl.c: ioctls on /dev/ghost. */
long ghost_dev_ioctl(struct file *file, unsigned int cmd, unsigned long arg);
bool ghost_all_zero(const __u64 *v, size_t n);

/* capture_mm.c */
struct vm_area_struct;
const char *ghost_vma_special_name(struct vm_area_struct *vma);

/* array.c */
struct page *ghost_alloc_page(void);
void ghost_free_page(struct page *pg);
int ghost_array_reserve(void **arr, size_t *cap, size_t used, size_t want,
			size_t elem, gfp_t gfp);

/*
 * uarg.c: size-extensible ioctl arguments (see uapi/linux/ghost.h).
 * ghost_ioc_is(): @cmd is the command @known in type, number and direction
 * (its size bits carry the caller's sizeof, checked by ghost_uarg_in()).
 */
bool ghost_ioc_is(unsigned int cmd, unsigned int known);
int ghost_uarg_in(void *karg, size_t ksize, size_t min_size,
		  const void __user *uarg, u32 cmdsize, u32 *usize);
int ghost_uarg_out(void __user *uarg, u32 usize, const void *karg,
		   size_t ksize);

/* resource.c: where an image goes to or comes from. */
struct ghost_res;
struct ghost_res_ops {
	int (*write)(struct ghost_res *res, const void *buf, size_t len);
	/* file and network: write, from @nr whole pages at once */
	int (*write_pages)(struct ghost_res *res, struct page **pages,
			   unsigned int nr);
	/* All @len bytes or an error; -ENODATA when the image ends early. */
	int (*read)(struct ghost_res *res, void *buf, size_t len);
	/* file and network: read, into @nr whole pages at once */
	int (*read_pages)(struct ghost_res *res, struct page **pages,
			  unsigned int nr);
	/*
	 * file only: past @len bytes without reading them; -ESPIPE unless a
	 * regular file, -ENODATA when it holds fewer
	 */
	int (*skip)(struct ghost_res *res, u64 len);
	void (*rewind)(struct ghost_res *res);		/* memory only */
	/* memory only: a reference to the next whole page, if read is aligned */
	struct page *(*take_page)(struct ghost_res *res);
	void (*truncate)(struct ghost_res *res);	/* memory only */
	void (*release)(struct ghost_res *res);
};

/*
 * Pages handled per batch: pinned by one get_user_pages_remote() call, read
 * or written by one read_pages()/write_pages() call, filled per call on
 * restore.
 */
#define GHOST_PAGE_BATCH 64

/*
 * A point to yield and to stop in a loop whose length the image or the
 * target decides (millions of sections or descriptors, a section a
 * terabyte long): a read from a file never looks for a fatal signal (one
 * from a pipe or a socket does only when it has to wait). -EINTR once the
 * caller is being killed.
 */
static inline int ghost_go_on(void)
{
	cond_resched();
	return fatal_signal_pending(current) ? -EINTR : 0;
}

struct ghost_res {
	const struct ghost_res_ops *ops;
	u32 type;			/* GHOST_RES_* */
};

struct ghost_res *ghost_res_create(const struct ghost_plug *p);
struct file *ghost_res_direct_file(struct ghost_res *res);
int ghost_file_read(struct file *f, void *buf, size_t len, loff_t *pos);
int ghost_file_pages(struct file *f, struct page **pages, unsigned int nr,
		     loff_t *pos, bool write);
ssize_t ghost_mem_read_user(struct ghost_res *res, char __user *ubuf,
			    size_t len, loff_t *pos);
ssize_t ghost_mem_write_user(struct ghost_res *res, const char __user *ubuf,
			     size_t len);
int ghost_mem_mmap(struct ghost_res *res, struct vm_area_struct *vma);

/*
 * stream.c: the image as a checksummed stream over a resource. The sum is
 * a crc32c until ghost_stream_use_xxh64() (GHOST_IMAGE_FEAT_XXH64 images):
 * crc32c costs seconds per 256 MiB where the CPU's crc32 instruction is
 * emulated, XXH64 is plain multiplies and rotates.
 */
struct ghost_stream {
	struct ghost_res *res;
	u64 off;
	u32 crc;
	bool use_xxh64;
	struct xxh64_state xxh;
};

void ghost_stream_init(struct ghost_stream *s, struct ghost_res *res);
void ghost_stream_use_xxh64(struct ghost_stream *s, const void *seen,
			    size_t len);
u64 ghost_stream_sum(const struct ghost_stream *s);
int ghost_stream_write(struct ghost_stream *s, const void *buf, size_t len);
int ghost_stream_write_zeros(struct ghost_stream *s, size_t len);
int ghost_stream_read(struct ghost_stream *s, void *buf, size_t len);
int ghost_stream_read_pages(struct ghost_stream *s, struct page **pages,
			    unsigned int nr);
int ghost_stream_write_pages(struct ghost_stream *s, struct page **pages,
			     unsigned int nr);
int ghost_stream_skip_zeros(struct ghost_stream *s, size_t len);
int ghost_stream_skip(struct ghost_stream *s, u64 len);
struct page *ghost_stream_take_page(struct ghost_stream *s);
int ghost_section_begin(struct ghost_stream *s, u32 type, u16 rec, u64 size);
int ghost_section_end(struct ghost_stream *s, u64 size);
int ghost_section_write(struct ghost_stream *s, u32 type, const void *a,
			size_t alen, const void *b, size_t blen);

/* object.c: a ghost object, the file descriptor GHOST_IOC_CREATE returns. */
struct ghost_staged;
struct ghost_snapshot;

/*
 * Lock order: g->lock, then any mmap_lock, then a memory resource's own
 * lock. g->lock serializes plug, export, import and the user reads and
 * writes of the image, and may be held across user copies that fault;
 * so it is never taken under an mmap_lock: ->mmap reads @res without it
 * (set once, published with release semantics, freed only at release).
 */
struct ghost {
	struct mutex lock;		/* see the lock order above */
	struct ghost_res *res;		/* NULL until plugged; then fixed */
	struct ghost_staged *staged;	/* image read by GHOST_IMPORT_PREPARE */
	struct ghost_snapshot *snapshot; /* kept by GHOST_EXPORT_SNAPSHOT */
};

int ghost_create_fd(u32 flags);

/* export.c */
struct ghost_export;
long ghost_export(struct ghost *g, struct ghost_export *arg);

/* snapshot.c: the two calls of a copy-on-write export (each takes g->lock) */
long ghost_export_snapshot(struct ghost *g, struct ghost_export *e);
long ghost_export_finish(struct ghost *g, struct ghost_export *e);
void ghost_snapshot_drop(struct ghost *g);

/*
 * netlink.c: events for each finished export/import; @task is the exported
 * process or the importer (NULL when none was found).
 */
struct task_struct;
int ghost_netlink_init(void);
void ghost_netlink_exit(void);
void ghost_event(u8 cmd, struct task_struct *task, u32 flags, u64 bytes,
		 u64 frozen_ns, int result, const char *reason);

/* Sets a reason for user space; a printf-like sentence. */
#define ghost_reason(buf, fmt, ...) \
	snprintf((buf), GHOST_REASON_LEN, fmt, ##__VA_ARGS__)

#endif /* GHOST_INTERNAL_H */
