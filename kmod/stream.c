// SPDX-License-Identifier: GPL-2.0
/*
 * The image stream: sections written to or read from a resource front to
 * back, with the running offset (for page alignment) and checksum.
 */
#include <linux/crc32c.h>
#include <linux/highmem.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/sizes.h>
#include <linux/ghost.h>

#include "internal.h"

static const u8 ghost_zeros[64];

void ghost_stream_init(struct ghost_stream *s, struct ghost_res *res)
{
	s->res = res;
	s->off = 0;
	s->crc = ~0U;
	s->use_xxh64 = false;
}

/*
 * From now on the stream's sum is XXH64 (seed 0) over every byte, of which
 * the first @len, already through the stream, are @seen: a writer calls it
 * before the header, a reader once the header it read asks for it.
 */
void ghost_stream_use_xxh64(struct ghost_stream *s, const void *seen,
			    size_t len)
{
	s->use_xxh64 = true;
	xxh64_reset(&s->xxh, 0);
	if (len)
		xxh64_update(&s->xxh, seen, len);
}

/* The checksum of every byte so far, as an END record holds it. */
u64 ghost_stream_sum(const struct ghost_stream *s)
{
	return s->use_xxh64 ? xxh64_digest(&s->xxh) : ~s->crc;
}

static void stream_account(struct ghost_stream *s, const void *buf, size_t len)
{
	if (s->use_xxh64)
		xxh64_update(&s->xxh, buf, len);
	else
		s->crc = crc32c(s->crc, buf, len);
	s->off += len;
}

int ghost_stream_write(struct ghost_stream *s, const void *buf, size_t len)
{
	int err = s->res->ops->write(s->res, buf, len);

	if (err)
		return err;
	stream_account(s, buf, len);
	return 0;
}

int ghost_stream_write_zeros(struct ghost_stream *s, size_t len)
{
	while (len) {
		size_t n = min(len, sizeof(ghost_zeros));
		int err = ghost_stream_write(s, ghost_zeros, n);

		if (err)
			return err;
		len -= n;
	}
	return 0;
}

int ghost_stream_read(struct ghost_stream *s, void *buf, size_t len)
{
	int err = s->res->ops->read(s->res, buf, len);

	if (err)
		return err;
	stream_account(s, buf, len);
	return 0;
}

/*
 * @nr whole pages onto or off the stream, in one write or read where the
 * resource can (ghost_res_ops.write_pages, read_pages), else page by page.
 */
static int stream_pages(struct ghost_stream *s, struct page **pages,
			unsigned int nr, bool write)
{
	int (*batch)(struct ghost_res *res, struct page **pages,
		     unsigned int nr) =
		write ? s->res->ops->write_pages : s->res->ops->read_pages;
	unsigned int i;
	int err = batch ? batch(s->res, pages, nr) : 0;

	for (i = 0; i < nr && !err; i++) {
		void *v = kmap_local_page(pages[i]);

		if (batch)
			stream_account(s, v, PAGE_SIZE);
		else if (write)
			err = ghost_stream_write(s, v, PAGE_SIZE);
		else
			err = ghost_stream_read(s, v, PAGE_SIZE);
		kunmap_local(v);
	}
	return err;
}

int ghost_stream_write_pages(struct ghost_stream *s, struct page **pages,
			     unsigned int nr)
{
	return stream_pages(s, pages, nr, true);
}

int ghost_stream_read_pages(struct ghost_stream *s, struct page **pages,
			    unsigned int nr)
{
	return stream_pages(s, pages, nr, false);
}

/*
 * The next page of the stream without a copy, when the resource holds it as
 * a page (a memory ghost) and the stream is at a page boundary; else NULL.
 */
struct page *ghost_stream_take_page(struct ghost_stream *s)
{
	struct page *pg;
	void *v;

	if (!s->res->ops->take_page || (s->off & ~PAGE_MASK))
		return NULL;
	pg = s->res->ops->take_page(s->res);
	if (!pg)
		return NULL;
	v = kmap_local_page(pg);
	stream_account(s, v, PAGE_SIZE);
	kunmap_local(v);
	return pg;
}

/*
 * Past @len bytes the caller reads later (GHOST_IMPORT_DIRECT page data).
 * They are not in the running sum, which is therefore no longer the
 * image's: the reader checks the sum at the end itself (late_pages.c).
 */
int ghost_stream_skip(struct ghost_stream *s, u64 len)
{
	int err;

	if (!s->res->ops->skip)
		return -ESPIPE;
	err = s->res->ops->skip(s->res, len);
	if (!err)
		s->off += len;
	return err;
}

/*
 * Reads @len bytes that must be zero (padding). An image may ask for up
 * to 4 GiB of it before page data: the importer yields and stops when
 * killed every 64 KiB.
 */
int ghost_stream_skip_zeros(struct ghost_stream *s, size_t len)
{
	u8 buf[64];
	size_t done = 0;

	while (len) {
		size_t n = min(len, sizeof(buf));
		int err = ghost_stream_read(s, buf, n);

		if (err)
			return err;
		if (memchr_inv(buf, 0, n))
			return -EBADMSG;
		len -= n;
		done += n;
		if (!(done % SZ_64K)) {
			err = ghost_go_on();
			if (err)
				return err;
		}
	}
	return 0;
}

/* @rec: bytes of the record that begins the payload (the rest is its tail). */
int ghost_section_begin(struct ghost_stream *s, u32 type, u16 rec, u64 size)
{
	struct ghost_section sec = { .type = type, .record_size = rec, .size = size };

	return ghost_stream_write(s, &sec, sizeof(sec));
}

/* Pads the payload of a section of @size bytes to 8. */
int ghost_section_end(struct ghost_stream *s, u64 size)
{
	return ghost_stream_write_zeros(s, ALIGN(size, 8) - size);
}

/* A whole section whose payload is the record @a, then @b (may be empty). */
int ghost_section_write(struct ghost_stream *s, u32 type, const void *a,
			size_t alen, const void *b, size_t blen)
{
	int err = ghost_section_begin(s, type, alen, alen + blen);

	if (!err && alen)
		err = ghost_stream_write(s, a, alen);
	if (!err && blen)
		err = ghost_stream_write(s, b, blen);
	if (!err)
		err = ghost_section_end(s, alen + blen);
	return err;
}
