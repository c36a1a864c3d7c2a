// SPDX-License-Identifier: GPL-2.0
/*
 * Events: the generic netlink family "ghost" multicasts one message per
 * finished export or import, for monitors (ghostctl monitor) and daemons.
 *
 * Where they go: the family is not network-namespace aware (no netnsok), so
 * it exists, and can be joined, in the initial network namespace only; the
 * group needs CAP_NET_ADMIN there. A pid means something only in a pid
 * namespace, so events carry the process's pid in the initial pid
 * namespace, the one an administrator of the initial network namespace
 * sees. Sending to every namespace with the exporter's own view of the pid
 * would hand other namespaces numbers that name nothing, or something else.
 */
#include <linux/sched.h>
#include <net/genetlink.h>
#include <linux/ghost.h>

#include "internal.h"

static const struct genl_multicast_group ghost_mcgrps[] = {
	/* pids and sizes of other users' processes: administrators only */
	{ .name = GHOST_GENL_MCGRP_EVENTS, .flags = GENL_MCAST_CAP_NET_ADMIN },
};

static struct genl_family ghost_genl = {
	.name = GHOST_GENL_NAME,
	.version = GHOST_GENL_VERSION,
	.maxattr = GHOST_ATTR_MAX,
	.module = THIS_MODULE,
	.mcgrps = ghost_mcgrps,
	.n_mcgrps = ARRAY_SIZE(ghost_mcgrps),
	.resv_start_op = __GHOST_CMD_MAX,
};

void ghost_event(u8 cmd, struct task_struct *task, u32 flags, u64 bytes,
		 u64 frozen_ns, int result, const char *reason)
{
	pid_t pid = task ? task_tgid_nr(task) : 0;
	struct sk_buff *skb;
	void *hdr;

	skb = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!skb)
		return;
	hdr = genlmsg_put(skb, 0, 0, &ghost_genl, 0, cmd);
	if (!hdr ||
	    nla_put_u32(skb, GHOST_ATTR_PID, pid) ||
	    nla_put_u32(skb, GHOST_ATTR_FLAGS, flags) ||
	    nla_put_u64_64bit(skb, GHOST_ATTR_BYTES, bytes, GHOST_ATTR_PAD) ||
	    (cmd == GHOST_CMD_EXPORTED &&
	     nla_put_u64_64bit(skb, GHOST_ATTR_FROZEN_NS, frozen_ns,
			       GHOST_ATTR_PAD)) ||
	    nla_put_s32(skb, GHOST_ATTR_RESULT, result) ||
	    (result && reason && reason[0] &&
	     nla_put_string(skb, GHOST_ATTR_REASON, reason))) {
		nlmsg_free(skb);
		return;
	}
	genlmsg_end(skb, hdr);
	/* -ESRCH just means nobody listens. */
	genlmsg_multicast(&ghost_genl, skb, 0, 0, GFP_KERNEL);
}

int ghost_netlink_init(void)
{
	return genl_register_family(&ghost_genl);
}

void ghost_netlink_exit(void)
{
	genl_unregister_family(&ghost_genl);
}
