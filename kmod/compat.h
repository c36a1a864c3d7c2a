/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between kernel versions, in one place. The target is Debian
 * 12's 6.1; newer kernels changed a few driver-model signatures. And
 * between configurations: the cgroup v1 freezer.
 */
#ifndef GHOST_COMPAT_H
#define GHOST_COMPAT_H

#include <linux/capability.h>
#include <linux/cgroup.h>
#include <linux/version.h>
#include <linux/device.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/nsproxy.h>
#include <linux/pid.h>
#include <linux/string.h>

/* 6.4 dropped the owner argument of class_create(). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
#define ghost_class_create(name) class_create(name)
#else
#define ghost_class_create(name) class_create(THIS_MODULE, name)
#endif

/* 6.2 made the device argument of device_type.devnode const. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
#define GHOST_DEVNODE_CONST const
#else
#define GHOST_DEVNODE_CONST
#endif

/* 6.3 made vm_flags read-only behind helpers. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
#define ghost_vm_flags_clear(vma, flags) vm_flags_clear(vma, flags)
#else
#define ghost_vm_flags_clear(vma, flags) ((vma)->vm_flags &= ~(flags))
#endif

/* 6.5 dropped the vmas argument of get_user_pages_remote(). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 5, 0)
#define ghost_gup_remote(mm, start, nr, flags, pages) \
	get_user_pages_remote(mm, start, nr, flags, pages, NULL)
#else
#define ghost_gup_remote(mm, start, nr, flags, pages) \
	get_user_pages_remote(mm, start, nr, flags, pages, NULL, NULL)
#endif

/* 6.3 made rseq extensible and added task->rseq_len; before, it was 32. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
#define ghost_rseq_len(t) ((t)->rseq_len)
#define ghost_set_rseq_len(t, len) ((t)->rseq_len = (len))
#else
#define ghost_rseq_len(t) ((t)->rseq ? 32U : 0U)
#define ghost_set_rseq_len(t, len) do { } while (0)
#endif

/*
 * The struct pid a pidfd holds, or NULL for any other file. pidfd_pid() is
 * not exported, so the file is recognised by its filesystem: before 6.9 an
 * anonymous inode named "[pidfd]" (only the pidfd code makes one), from 6.9
 * on pidfs. Either way private_data is the pid, pinned by the file.
 */
static inline struct pid *ghost_pidfd_pid(const struct file *f)
{
	const struct super_block *sb = file_inode(f)->i_sb;

#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 9, 0)
	if (sb->s_magic == PIDFS_MAGIC)
		return f->private_data;
#else
	if (sb->s_magic == ANON_INODE_FS_MAGIC &&
	    !strcmp(f->f_path.dentry->d_name.name, "[pidfd]"))
		return f->private_data;
#endif
	return NULL;
}

/*
 * From 6.5 on pte_offset_map() can fail (NULL) when the page table went
 * away under a walker that holds mmap_lock only for reading (it also holds
 * the RCU read lock until pte_unmap(): nothing may sleep in between). The
 * caller reads the pmd again. Before 6.5 it cannot fail; the name marks the
 * callers that handle both.
 */
#define ghost_pte_offset_map(pmd, addr) pte_offset_map(pmd, addr)

/* kernel_cap_t: two u32 words before 6.3, one u64 since */
static inline u64 ghost_cap_u64(kernel_cap_t c)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	return c.val;
#else
	return c.cap[0] | (u64)c.cap[1] << 32;
#endif
}

static inline void ghost_cap_set_u64(kernel_cap_t *c, u64 v)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	c->val = v;
#else
	c->cap[0] = (u32)v;
	c->cap[1] = (u32)(v >> 32);
#endif
}

/*
 * The path of @task's cgroup v1 freezer cgroup, in the caller's cgroup
 * namespace; "?" where it has none.
 */
static inline void ghost_freezer_path(struct task_struct *task, char *buf,
				      size_t len)
{
#if IS_ENABLED(CONFIG_CGROUP_FREEZER)
	struct cgroup_subsys_state *css = task_get_css(task, freezer_cgrp_id);

	/* cgroup_path_ns() takes cgroup_mutex: a reference, not RCU */
	if (cgroup_path_ns(css->cgroup, buf, len, current->nsproxy->cgroup_ns) < 0)
		strscpy(buf, "?", len);
	css_put(css);
#else
	strscpy(buf, "?", len);
#endif
}

#endif /* GHOST_COMPAT_H */
