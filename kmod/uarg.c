// SPDX-License-Identifier: GPL-2.0
/*
 * Size-extensible ioctl arguments. Every argument struct starts with
 * "__u32 size", set by the caller to the sizeof() it was compiled with, so an
 * old tool keeps working with a newer module and the reverse (the rules are
 * in uapi/linux/ghost.h).
 */
#include <linux/ioctl.h>
#include <linux/minmax.h>
#include <linux/uaccess.h>

#include "internal.h"

bool ghost_ioc_is(unsigned int cmd, unsigned int known)
{
	const unsigned int size_bits = _IOC_SIZEMASK << _IOC_SIZESHIFT;

	return (cmd & ~size_bits) == (known & ~size_bits);
}

/* Larger than any argument will ever be; bounds the zero-tail check. */
#define GHOST_UARG_MAX PAGE_SIZE

/*
 * @cmdsize is the size the ioctl command encodes: a caller's _IOWR() takes
 * the sizeof() of its struct, so it must agree with the struct's own @size.
 */
int ghost_uarg_in(void *karg, size_t ksize, size_t min_size,
		  const void __user *uarg, u32 cmdsize, u32 *usize)
{
	u32 size;
	int err;

	if (get_user(size, (const u32 __user *)uarg))
		return -EFAULT;
	if (size < min_size || size != cmdsize)
		return -EINVAL;
	if (size > GHOST_UARG_MAX)
		return -E2BIG;
	/* Zero-fills a short struct; E2BIG if a longer one has a non-zero tail. */
	err = copy_struct_from_user(karg, ksize, uarg, size);
	if (err)
		return err;
	*usize = size;
	return 0;
}

int ghost_uarg_out(void __user *uarg, u32 usize, const void *karg,
		   size_t ksize)
{
	if (copy_to_user(uarg, karg, min_t(size_t, usize, ksize)))
		return -EFAULT;
	return 0;
}
