// SPDX-License-Identifier: GPL-2.0
/*
 * The /dev/ghost character device.
 *
 * A misc device cannot choose the group of its node, so this is a plain
 * char device whose device_type tells devtmpfs the owner and mode: root-only
 * (0600) by default, or 0660 with group=GID so a cluster daemon's group can
 * use it without being root.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cdev.h>
#include <linux/device.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/uidgid.h>
#include <linux/ghost.h>

#include "compat.h"
#include "internal.h"

static int group = -1;
module_param(group, int, 0444);
MODULE_PARM_DESC(group, "gid allowed to open /dev/ghost (mode 0660); default: root only (0600)");

static dev_t ghost_devt;
static struct cdev ghost_cdev;
static struct class *ghost_class;
static struct device *ghost_dev;
static kgid_t ghost_gid;

static char *ghost_devnode(GHOST_DEVNODE_CONST struct device *dev,
			   umode_t *mode, kuid_t *uid, kgid_t *gid)
{
	bool grouped = gid_valid(ghost_gid);

	if (mode)
		*mode = grouped ? 0660 : 0600;
	if (gid && grouped)
		*gid = ghost_gid;
	return NULL;
}

static const struct device_type ghost_dev_type = {
	.name = "ghost",
	.devnode = ghost_devnode,
};

static const struct file_operations ghost_dev_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = ghost_dev_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static void ghost_dev_release(struct device *dev)
{
	kfree(dev);
}

int ghost_device_init(void)
{
	int err;

	ghost_gid = INVALID_GID;
	if (group >= 0) {
		ghost_gid = make_kgid(&init_user_ns, group);
		if (!gid_valid(ghost_gid)) {
			pr_err("group=%d is not a valid gid\n", group);
			return -EINVAL;
		}
	}

	err = alloc_chrdev_region(&ghost_devt, 0, 1, GHOST_DEVICE_NAME);
	if (err)
		return err;

	cdev_init(&ghost_cdev, &ghost_dev_fops);
	ghost_cdev.owner = THIS_MODULE;
	err = cdev_add(&ghost_cdev, ghost_devt, 1);
	if (err)
		goto err_region;

	ghost_class = ghost_class_create(GHOST_DEVICE_NAME);
	if (IS_ERR(ghost_class)) {
		err = PTR_ERR(ghost_class);
		goto err_cdev;
	}

	ghost_dev = kzalloc(sizeof(*ghost_dev), GFP_KERNEL);
	if (!ghost_dev) {
		err = -ENOMEM;
		goto err_class;
	}
	device_initialize(ghost_dev);
	ghost_dev->devt = ghost_devt;
	ghost_dev->class = ghost_class;
	ghost_dev->type = &ghost_dev_type;
	ghost_dev->release = ghost_dev_release;
	err = dev_set_name(ghost_dev, GHOST_DEVICE_NAME);
	if (!err)
		err = device_add(ghost_dev);
	if (err) {
		put_device(ghost_dev);
		goto err_class;
	}
	return 0;

err_class:
	class_destroy(ghost_class);
err_cdev:
	cdev_del(&ghost_cdev);
err_region:
	unregister_chrdev_region(ghost_devt, 1);
	return err;
}

void ghost_device_exit(void)
{
	device_unregister(ghost_dev);
	class_destroy(ghost_class);
	cdev_del(&ghost_cdev);
	unregister_chrdev_region(ghost_devt, 1);
}
