// SPDX-License-Identifier: GPL-2.0
/* Growing kvmalloc'd arrays (page lists, staged runs and files). */
#include <linux/minmax.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "internal.h"

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
