// SPDX-License-Identifier: GPL-2.0
/*
 * Growing kvmalloc'd arrays (page lists, staged runs and files), and the
 * pages ghost objects hold.
 */
#include <linux/gfp.h>
#include <linux/minmax.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "internal.h"

/*
 * Pages allocated for images (memory resources, staging), readable as
 * /sys/module/ghost/parameters/pages_held: leak tests expect it to come back
 * to where it was once every ghost is closed.
 */
static atomic_long_t ghost_pages_held = ATOMIC_LONG_INIT(0);

static int pages_held_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&ghost_pages_held));
}

static const struct kernel_param_ops pages_held_ops = {
	.get = pages_held_get,
};
module_param_cb(pages_held, &pages_held_ops, NULL, 0444);
MODULE_PARM_DESC(pages_held, "pages currently held by ghost images (read-only)");

struct page *ghost_alloc_page(void)
{
	struct page *pg = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_NOWARN);

	if (pg)
		atomic_long_inc(&ghost_pages_held);
	return pg;
}

void ghost_free_page(struct page *pg)
{
	atomic_long_dec(&ghost_pages_held);
	__free_page(pg);
}

/*
 * Makes room for @want elements of @elem bytes in *@arr, which holds @used
 * of its *@cap: at least doubles, copies the used part over.
 */
int ghost_array_reserve(void **arr, size_t *cap, size_t used, size_t want,
			size_t elem, gfp_t gfp)
{
	size_t n;
	void *p;

	if (want <= *cap)
		return 0;
	n = max3(want, *cap * 2, (size_t)16);
	p = kvcalloc(n, elem, gfp);
	if (!p)
		return -ENOMEM;
	if (*arr)
		memcpy(p, *arr, used * elem);
	kvfree(*arr);
	*arr = p;
	*cap = n;
	return 0;
}
