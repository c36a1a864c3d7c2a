/* SPDX-License-Identifier: GPL-2.0 OR LGPL-2.1-or-later */
/*
 * Who may restore an image as whom: the credential rule of an import, one
 * copy compiled by both engines (ghost.ko's kmod/creds.c and libghost's
 * user engine), like ghost_policy.h for exports. Each engine gathers the
 * caller's credentials as a struct ghost_creds (the kernel from its cred,
 * the user engine from its own system calls) and asks these functions, so
 * both refuse the same images with the same sentence. Not installed.
 *
 * A refusal returns a negative errno and writes its reason into @reason
 * (@len bytes, GHOST_REASON_LEN in practice).
 */
#ifndef GHOST_CREDS_H
#define GHOST_CREDS_H

#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/types.h>
#else
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>
#endif
#include <linux/capability.h>
#include <linux/securebits.h>
#include <linux/ghost.h>

#define GHOST_LOGINUID_UNSET		0xffffffffU
/* SECBIT_* the kernel knows: the six bits and the ambient pair */
#define GHOST_SECUREBITS_MASK		0xffU
#define GHOST_SECUREBITS_LOCKS		(SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED | \
					 SECBIT_KEEP_CAPS_LOCKED | \
					 SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

/*
 * An importer that did not switch to the image's credentials before the
 * point of no return (printf format: its uid and gid, the image's).
 */
#define GHOST_CREDS_NOT_SWITCHED_REASON \
	"the importer (uid %u gid %u) does not run as the image's credentials (uid %u gid %u, groups, capabilities)"

static inline bool ghost_cap_has(__u64 set, int cap)
{
	return (set >> cap) & 1;
}

/*
 * Is the CREDS record @c well formed? Ids are never (u32)-1, the effective
 * and ambient sets lie within the permitted one (ambient also within the
 * inheritable), only known securebits, zero padding.
 */
static inline int ghost_creds_valid(const struct ghost_creds *c, char *reason,
				    size_t len)
{
	const __u32 ids[] = { c->uid, c->euid, c->suid, c->fsuid,
			      c->gid, c->egid, c->sgid, c->fsgid };
	unsigned int i;

	for (i = 0; i < 8; i++)
		if (ids[i] == (__u32)-1)
			goto bad;
	if ((c->cap_effective & ~c->cap_permitted) ||
	    (c->cap_ambient & ~(c->cap_permitted & c->cap_inheritable)) ||
	    (c->securebits & ~GHOST_SECUREBITS_MASK) ||
	    c->ngroups > GHOST_NGROUPS_MAX || c->__pad || c->resv[0] || c->resv[1])
		goto bad;
	return 0;
bad:
	snprintf(reason, len, "the credentials section is malformed");
	return -EBADMSG;
}

static inline bool ghost_creds_id_in(__u32 id, __u32 a, __u32 b, __u32 c)
{
	return id == a || id == b || id == c;
}

static inline bool ghost_creds_group_in(__u32 g, const __u32 *set, __u32 n)
{
	__u32 i;

	for (i = 0; i < n; i++)
		if (set[i] == g)
			return true;
	return false;
}

/* The same groups, in any order (each list without repeats, as the kernel keeps it). */
static inline bool ghost_creds_same_groups(const __u32 *a, __u32 na, const __u32 *b, __u32 nb)
{
	__u32 i;

	if (na != nb)
		return false;
	/* both ways: a list with a group twice is not another's set */
	for (i = 0; i < na; i++)
		if (!ghost_creds_group_in(a[i], b, nb) ||
		    !ghost_creds_group_in(b[i], a, na))
			return false;
	return true;
}

/*
 * May a caller with credentials @who (its groups @who_groups) restore an
 * image that ran as @img (its groups @img_groups)? The rule:
 *  - every uid of the image (real, effective, saved, fs) is one of the
 *    caller's real/effective/saved uids, unless it has CAP_SETUID;
 *  - every gid likewise, unless it has CAP_SETGID; and the supplementary
 *    groups are the caller's own unless it has CAP_SETGID (setgroups(2)
 *    needs it for any change);
 *  - no capability beyond the caller's: the image's permitted, effective
 *    and ambient sets within the caller's permitted set, its inheritable
 *    set within the caller's inheritable and permitted sets, its bounding
 *    set within the caller's bounding set;
 *  - a bounding set or securebits that differ from the caller's need
 *    CAP_SETPCAP (and no locked securebit of the caller's in the way);
 *  - a loginuid that differs from the caller's needs CAP_AUDIT_CONTROL, or
 *    the caller's loginuid unset.
 * Capabilities are the caller's effective ones.
 */
static inline int ghost_creds_may_assume(const struct ghost_creds *img, const __u32 *img_groups,
					 const struct ghost_creds *who, const __u32 *who_groups,
					 char *reason, size_t len)
{
	const __u64 eff = who->cap_effective;
	const __u32 img_uids[] = { img->uid, img->euid, img->suid, img->fsuid };
	const __u32 img_gids[] = { img->gid, img->egid, img->sgid, img->fsgid };
	__u32 i, diff;

	for (i = 0; i < 4 && !ghost_cap_has(eff, CAP_SETUID); i++)
		if (!ghost_creds_id_in(img_uids[i], who->uid, who->euid, who->suid)) {
			snprintf(reason, len,
				 "the image's uid %u/%u/%u/%u is not the caller's (%u/%u/%u) and it lacks CAP_SETUID",
				 img->uid, img->euid, img->suid, img->fsuid,
				 who->uid, who->euid, who->suid);
			return -EPERM;
		}
	for (i = 0; i < 4 && !ghost_cap_has(eff, CAP_SETGID); i++)
		if (!ghost_creds_id_in(img_gids[i], who->gid, who->egid, who->sgid)) {
			snprintf(reason, len,
				 "the image's gid %u/%u/%u/%u is not the caller's (%u/%u/%u) and it lacks CAP_SETGID",
				 img->gid, img->egid, img->sgid, img->fsgid,
				 who->gid, who->egid, who->sgid);
			return -EPERM;
		}
	if (!ghost_cap_has(eff, CAP_SETGID) &&
	    !ghost_creds_same_groups(img_groups, img->ngroups, who_groups, who->ngroups)) {
		for (i = 0; i < img->ngroups; i++)
			if (!ghost_creds_group_in(img_groups[i], who_groups, who->ngroups))
				break;
		if (i < img->ngroups)
			snprintf(reason, len,
				 "the image's group %u is not among the caller's groups and it lacks CAP_SETGID",
				 img_groups[i]);
		else
			snprintf(reason, len,
				 "the image's groups are not the caller's and it lacks CAP_SETGID");
		return -EPERM;
	}
	if ((img->cap_permitted | img->cap_effective | img->cap_ambient) & ~who->cap_permitted) {
		snprintf(reason, len,
			 "the image has capabilities %#llx beyond the caller's permitted %#llx",
			 (unsigned long long)((img->cap_permitted | img->cap_effective |
					       img->cap_ambient) & ~who->cap_permitted),
			 (unsigned long long)who->cap_permitted);
		return -EPERM;
	}
	if (img->cap_inheritable & ~(who->cap_inheritable | who->cap_permitted)) {
		snprintf(reason, len,
			 "the image's inheritable capabilities %#llx exceed the caller's",
			 (unsigned long long)(img->cap_inheritable &
					      ~(who->cap_inheritable | who->cap_permitted)));
		return -EPERM;
	}
	if (img->cap_bset & ~who->cap_bset) {
		snprintf(reason, len,
			 "the image's bounding set has %#llx, which the caller's lacks",
			 (unsigned long long)(img->cap_bset & ~who->cap_bset));
		return -EPERM;
	}
	if ((img->cap_bset != who->cap_bset || img->securebits != who->securebits) &&
	    !ghost_cap_has(eff, CAP_SETPCAP)) {
		snprintf(reason, len,
			 "the image's bounding set or securebits differ from the caller's and it lacks CAP_SETPCAP");
		return -EPERM;
	}
	diff = img->securebits ^ who->securebits;
	if ((diff & (who->securebits & GHOST_SECUREBITS_LOCKS) >> 1) ||
	    (diff & who->securebits & GHOST_SECUREBITS_LOCKS)) {
		snprintf(reason, len,
			 "the image's securebits %#x change a bit the caller locked (%#x)",
			 img->securebits, who->securebits);
		return -EPERM;
	}
	if (img->loginuid != who->loginuid && who->loginuid != GHOST_LOGINUID_UNSET &&
	    !ghost_cap_has(eff, CAP_AUDIT_CONTROL)) {
		snprintf(reason, len,
			 "the image's loginuid %u is not the caller's (%u) and it lacks CAP_AUDIT_CONTROL",
			 img->loginuid, who->loginuid);
		return -EPERM;
	}
	return 0;
}

/*
 * Does a process with credentials @now (groups @now_groups) run exactly as
 * @img? What an importer checks after switching, before the point of no
 * return.
 */
static inline bool ghost_creds_same(const struct ghost_creds *img, const __u32 *img_groups,
				    const struct ghost_creds *now, const __u32 *now_groups)
{
	return img->uid == now->uid && img->euid == now->euid && img->suid == now->suid &&
	       img->fsuid == now->fsuid && img->gid == now->gid && img->egid == now->egid &&
	       img->sgid == now->sgid && img->fsgid == now->fsgid &&
	       img->cap_inheritable == now->cap_inheritable &&
	       img->cap_permitted == now->cap_permitted &&
	       img->cap_effective == now->cap_effective && img->cap_bset == now->cap_bset &&
	       img->cap_ambient == now->cap_ambient && img->securebits == now->securebits &&
	       img->loginuid == now->loginuid &&
	       ghost_creds_same_groups(img_groups, img->ngroups, now_groups, now->ngroups);
}

/*
 * Does an image with credentials @img (NULL: it has no CREDS section; its
 * groups @img_groups) run as user @owner and as nothing more? A privileged
 * importer restoring a user's image on the user's behalf (migd,
 * GHOST_IMPORT_OWNER) asks this before it opens anything the image names:
 * every uid is @owner; one gid in all four places (no set-group-id
 * process); unless @owner is 0, that gid and every supplementary group
 * among @who's gid and groups (the owner's own, as the importer has them:
 * the restore stub takes them from the host's user database), and no
 * capability. An image without credentials would run as its importer:
 * refused. The loginuid, an audit tag that grants nothing, is not checked.
 */
static inline int ghost_creds_of_owner(const struct ghost_creds *img, const __u32 *img_groups,
				       __u32 owner, const struct ghost_creds *who,
				       const __u32 *who_groups, char *reason, size_t len)
{
	__u32 i;

	if (!img) {
		snprintf(reason, len,
			 "the image has no credentials section (it would run as its importer), not as uid %u: refused",
			 owner);
		return -EPERM;
	}
	if (img->uid != owner || img->euid != owner || img->suid != owner ||
	    img->fsuid != owner) {
		snprintf(reason, len,
			 "the image runs as uids %u/%u/%u/%u (real, effective, saved, filesystem), not all uid %u: refused",
			 img->uid, img->euid, img->suid, img->fsuid, owner);
		return -EPERM;
	}
	if (img->gid != img->egid || img->gid != img->sgid || img->gid != img->fsgid) {
		snprintf(reason, len,
			 "the image runs with gids %u/%u/%u/%u: a set-group-id process is refused",
			 img->gid, img->egid, img->sgid, img->fsgid);
		return -EPERM;
	}
	if (owner == 0)
		return 0;
	if (img->gid != who->gid && !ghost_creds_group_in(img->gid, who_groups, who->ngroups)) {
		snprintf(reason, len,
			 "the image runs with gid %u, which is not among uid %u's groups here: refused",
			 img->gid, owner);
		return -EPERM;
	}
	for (i = 0; i < img->ngroups; i++)
		if (img_groups[i] != who->gid &&
		    !ghost_creds_group_in(img_groups[i], who_groups, who->ngroups)) {
			snprintf(reason, len,
				 "the image has supplementary group %u, which is not among uid %u's groups here: refused",
				 img_groups[i], owner);
			return -EPERM;
		}
	if (img->cap_permitted | img->cap_effective | img->cap_ambient) {
		snprintf(reason, len,
			 "the image of uid %u has capabilities (permitted %#llx): refused",
			 owner, (unsigned long long)img->cap_permitted);
		return -EPERM;
	}
	/*
	 * No process of the owner's can give itself inheritable capabilities
	 * (only a privileged parent, pam_cap, can), and they are raised on
	 * the exec of a file with inheritable file capabilities.
	 */
	if (img->cap_inheritable) {
		snprintf(reason, len,
			 "the image of uid %u has inheritable capabilities %#llx: refused",
			 owner, (unsigned long long)img->cap_inheritable);
		return -EPERM;
	}
	return 0;
}

#endif /* GHOST_CREDS_H */
