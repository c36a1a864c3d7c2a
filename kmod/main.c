// SPDX-License-Identifier: GPL-2.0
/*
 * ghost.ko: turns a running process into a ghost (a self-contained image of
 * its state) and rebuilds a live process from one. See Documentation/.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/stringify.h>
#include <linux/ghost.h>

#include "internal.h"

static int __init ghost_init(void)
{
	int err = ghost_netlink_init();

	if (err)
		return err;
	err = ghost_device_init();
	if (err) {
		ghost_netlink_exit();
		return err;
	}
	pr_info("interface %d.%d.%d loaded\n", GHOST_ABI_MAJOR,
		GHOST_ABI_MINOR, GHOST_ABI_PATCH);
	return 0;
}

static void __exit ghost_exit(void)
{
	ghost_device_exit();
	ghost_netlink_exit();
}

module_init(ghost_init);
module_exit(ghost_exit);

/* Several interfaces the module needs are exported GPL-only. */
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ghost process virtualization: export/import of live processes");
MODULE_AUTHOR("The ghost developers");
MODULE_VERSION(__stringify(GHOST_ABI_MAJOR) "." __stringify(GHOST_ABI_MINOR)
	       "." __stringify(GHOST_ABI_PATCH));
