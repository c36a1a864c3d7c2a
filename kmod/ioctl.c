// SPDX-License-Identifier: GPL-2.0
/* ioctl dispatch for /dev/ghost. */
#include <linux/fs.h>
#include <linux/ghost.h>

#include "internal.h"

/* What this build of the module implements; see GHOST_FEAT_* in the uapi. */
#define GHOST_FEATURES \
	(GHOST_FEAT_EXPORT | GHOST_FEAT_IMPORT | GHOST_FEAT_BACKEND_MEMORY | \
	 GHOST_FEAT_BACKEND_FILE | GHOST_FEAT_BACKEND_NET | GHOST_FEAT_EVENTS | \
	 GHOST_FEAT_IMPORT_STOPPED | GHOST_FEAT_EXPORT_SNAPSHOT | \
	 GHOST_FEAT_IMPORT_DIRECT | GHOST_FEAT_IMPORT_OWNER)

bool ghost_all_zero(const __u64 *v, size_t n)
{
	while (n--)
		if (*v++)
			return false;
	return true;
}

static long ghost_ioctl_version(void __user *uarg, u32 cmdsize)
{
	struct ghost_version v;
	u32 usize;
	int err;

	err = ghost_uarg_in(&v, sizeof(v), GHOST_VERSION_SIZE_VER0, uarg,
			    cmdsize, &usize);
	if (err)
		return err;
	if (v.flags || v.__pad || !ghost_all_zero(v.resv, ARRAY_SIZE(v.resv)))
		return -EINVAL;

	v.size = min_t(u32, usize, sizeof(v));
	v.major = GHOST_ABI_MAJOR;
	v.minor = GHOST_ABI_MINOR;
	v.patch = GHOST_ABI_PATCH;
	v.image_version = GHOST_IMAGE_VERSION;
	v.image_min = GHOST_IMAGE_MIN_VERSION;
	v.features = GHOST_FEATURES;
	return ghost_uarg_out(uarg, usize, &v, sizeof(v));
}

static long ghost_ioctl_create(void __user *uarg, u32 cmdsize)
{
	struct ghost_create c;
	u32 usize;
	int err;

	err = ghost_uarg_in(&c, sizeof(c), GHOST_CREATE_SIZE_VER0, uarg, cmdsize,
			    &usize);
	if (err)
		return err;
	if ((c.flags & ~GHOST_CREATE_FLAGS) ||
	    !ghost_all_zero(c.resv, ARRAY_SIZE(c.resv)))
		return -EINVAL;
	return ghost_create_fd(c.flags);
}

long ghost_dev_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	if (ghost_ioc_is(cmd, GHOST_IOC_VERSION))
		return ghost_ioctl_version(uarg, _IOC_SIZE(cmd));
	if (ghost_ioc_is(cmd, GHOST_IOC_CREATE))
		return ghost_ioctl_create(uarg, _IOC_SIZE(cmd));
	return -ENOTTY;
}
