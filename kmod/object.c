// SPDX-License-Identifier: GPL-2.0
/*
 * Ghost objects: anonymous-inode file descriptors. A resource object is
 * plugged into one, then a process is exported into it or imported from it.
 * With a memory resource the descriptor also reads (and mmaps, read-only)
 * the image, and writes one in before an import.
 */
#include <linux/anon_inodes.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/ghost.h>

#include "import.h"

static long ghost_plug(struct ghost *g, void __user *uarg, u32 cmdsize)
{
	struct ghost_plug p;
	struct ghost_res *res;
	u32 usize;
	int err;

	err = ghost_uarg_in(&p, sizeof(p), GHOST_PLUG_SIZE_VER0, uarg, cmdsize,
			    &usize);
	if (err)
		return err;
	if (p.flags || !ghost_all_zero(p.resv, ARRAY_SIZE(p.resv)))
		return -EINVAL;

	mutex_lock(&g->lock);
	if (g->res) {
		err = -EBUSY;
		goto out;
	}
	res = ghost_res_create(&p);
	if (IS_ERR(res)) {
		err = PTR_ERR(res);
		goto out;
	}
	/* ->mmap reads it without the lock: publish it whole. */
	smp_store_release(&g->res, res);
out:
	mutex_unlock(&g->lock);
	return err;
}

static long ghost_ioctl_export(struct ghost *g, void __user *uarg,
			       u32 cmdsize)
{
	struct ghost_export *e;
	u32 usize;
	long ret;

	e = kmalloc(sizeof(*e), GFP_KERNEL);
	if (!e)
		return -ENOMEM;
	ret = ghost_uarg_in(e, sizeof(*e), GHOST_EXPORT_SIZE_VER0, uarg, cmdsize,
			    &usize);
	if (ret)
		goto out;
	ret = ghost_export(g, e);
	/* Results and the reason go back on failure too. */
	if (ghost_uarg_out(uarg, usize, e, sizeof(*e)))
		ret = -EFAULT;
out:
	kfree(e);
	return ret;
}

static long ghost_ioctl_import(struct ghost *g, struct file *file,
			       void __user *uarg, u32 cmdsize)
{
	struct ghost_import *im;
	long ax = 0;
	u32 usize;
	int err;

	im = kmalloc(sizeof(*im), GFP_KERNEL);
	if (!im)
		return -ENOMEM;
	err = ghost_uarg_in(im, sizeof(*im), GHOST_IMPORT_SIZE_VER0, uarg, cmdsize,
			    &usize);
	if (err)
		goto out;
	err = ghost_import(g, im, file, &ax);
	if (!err && !(im->flags & GHOST_IMPORT_PREPARE)) {
		/*
		 * Restored: the caller's memory is the image's now, so nothing
		 * is copied back, and the system call returns the restored ax.
		 */
		kfree(im);
		return ax;
	}
	if (ghost_uarg_out(uarg, usize, im, sizeof(*im)))
		err = -EFAULT;
out:
	kfree(im);
	return err;
}

static long ghost_obj_ioctl(struct file *file, unsigned int cmd,
			    unsigned long arg)
{
	struct ghost *g = file->private_data;
	void __user *uarg = (void __user *)arg;

	if (ghost_ioc_is(cmd, GHOST_IOC_PLUG))
		return ghost_plug(g, uarg, _IOC_SIZE(cmd));
	if (ghost_ioc_is(cmd, GHOST_IOC_EXPORT))
		return ghost_ioctl_export(g, uarg, _IOC_SIZE(cmd));
	if (ghost_ioc_is(cmd, GHOST_IOC_IMPORT))
		return ghost_ioctl_import(g, file, uarg, _IOC_SIZE(cmd));
	return -ENOTTY;
}

/*
 * The memory resource behind @g, or NULL; with g->lock held on success: the
 * copies to and from user space that follow may fault, which g->lock allows.
 */
static struct ghost_res *ghost_mem_locked(struct ghost *g)
{
	mutex_lock(&g->lock);
	if (g->res && g->res->type == GHOST_RES_MEMORY)
		return g->res;
	mutex_unlock(&g->lock);
	return NULL;
}

static ssize_t ghost_obj_read(struct file *file, char __user *buf,
			      size_t len, loff_t *pos)
{
	struct ghost *g = file->private_data;
	struct ghost_res *res = ghost_mem_locked(g);
	ssize_t n;

	if (!res)
		return -EINVAL;
	n = ghost_mem_read_user(res, buf, len, pos);
	mutex_unlock(&g->lock);
	return n;
}

static ssize_t ghost_obj_write(struct file *file, const char __user *buf,
			       size_t len, loff_t *pos)
{
	struct ghost *g = file->private_data;
	struct ghost_res *res = ghost_mem_locked(g);
	ssize_t n;

	if (!res)
		return -EINVAL;
	n = ghost_mem_write_user(res, buf, len);
	mutex_unlock(&g->lock);
	return n;
}

/*
 * Called with the caller's mmap_lock held, so it must not take g->lock
 * (held elsewhere across faulting user copies): the plugged resource never
 * changes once set, and the memory resource has its own inner lock.
 */
static int ghost_obj_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct ghost *g = file->private_data;
	/* pairs with the release in ghost_plug(): a whole resource or NULL */
	struct ghost_res *res = smp_load_acquire(&g->res);

	if (!res || res->type != GHOST_RES_MEMORY)
		return -ENODEV;
	return ghost_mem_mmap(res, vma);
}

static int ghost_obj_release(struct inode *inode, struct file *file)
{
	struct ghost *g = file->private_data;

	ghost_staged_free(g->staged);
	ghost_snapshot_drop(g);
	if (g->res)
		g->res->ops->release(g->res);
	kfree(g);
	return 0;
}

static const struct file_operations ghost_obj_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = ghost_obj_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.read = ghost_obj_read,
	.write = ghost_obj_write,
	.mmap = ghost_obj_mmap,
	.release = ghost_obj_release,
	.llseek = default_llseek,
};

int ghost_create_fd(u32 flags)
{
	struct ghost *g = kzalloc(sizeof(*g), GFP_KERNEL_ACCOUNT);
	int fd;

	if (!g)
		return -ENOMEM;
	mutex_init(&g->lock);
	fd = anon_inode_getfd("[ghost]", &ghost_obj_fops, g,
			      O_RDWR | ((flags & GHOST_CREATE_CLOEXEC) ? O_CLOEXEC : 0));
	if (fd < 0)
		kfree(g);
	return fd;
}
