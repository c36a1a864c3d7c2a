// SPDX-License-Identifier: GPL-2.0
/* ioctl dispatch for /dev/ghost. */
#include <linux/fs.h>
#include <linux/ghost.h>

#include "internal.h"

/* What this build of the module implements; see GHOST_FEAT_* in the uapi. */
#define GHOST_FEATURES 0ULL

static bool ghost_all_zero(const __u64 *v, size_t n)
{
	while (n--)
		if (*v++)
			return false;
	return true;
}

static long ghost_ioctl_version(void __user *uarg)
{
	struct ghost_version v;
	u32 usize;
	int err;

	err = ghost_uarg_in(&v, sizeof(v), GHOST_VERSION_SIZE_VER0, uarg,
			    &usize);
	if (err)
		return err;
	if (v.flags || v.__pad || !ghost_all_zero(v.resv, ARRAY_SIZE(v.resv)))
		return -EINVAL;

	v.size = min_t(u32, usize, sizeof(v));
	v.major = GHOST_ABI_MAJOR;
	v.minor = GHOST_ABI_MINOR;
	v.patch = GHOST_ABI_PATCH;
	v.image_version = 0;
	v.image_min = 0;
	v.features = GHOST_FEATURES;
	return ghost_uarg_out(uarg, usize, &v, sizeof(v));
}

long ghost_dev_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	/* Dispatch on type and number: the size travels inside the struct. */
	if (_IOC_TYPE(cmd) != GHOST_IOC_MAGIC)
		return -ENOTTY;
	switch (_IOC_NR(cmd)) {
	case _IOC_NR(GHOST_IOC_VERSION):
		return ghost_ioctl_version(uarg);
	default:
		return -ENOTTY;
	}
}
