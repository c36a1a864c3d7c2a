// SPDX-License-Identifier: GPL-2.0
/*
 * Credentials: the CREDS section of an export, and on import the rule of
 * who may restore an image as whom (common/ghost_creds.h), the credentials
 * staging opens the image's files with, and the check that the caller runs
 * as the image before the point of no return.
 *
 * The module never commits another user's credentials itself: a struct cred
 * for another uid needs its user_struct and ucounts (alloc_uid(),
 * set_cred_ucounts()), which are not exported. The importer switches with
 * its own system calls between GHOST_IMPORT_PREPARE and the import (as it
 * moves its vDSO); the credentials built here serve only override_creds()
 * while staging opens files, where uids, gids, groups and capabilities
 * decide.
 */
#include <linux/audit.h>
#include <linux/cred.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/uidgid.h>
#include <linux/user_namespace.h>
#include <linux/ghost.h>

#include "capture.h"
#include "compat.h"
#include "ghost_creds.h"
#include "import.h"

/* @cred as a CREDS record, ids as @ns sees them; groups into @groups if set. */
static void creds_record(const struct cred *cred, struct user_namespace *ns,
			 kuid_t loginuid, struct ghost_creds *c, u32 *groups)
{
	const struct group_info *gi = cred->group_info;
	unsigned int i;

	memset(c, 0, sizeof(*c));
	c->uid = from_kuid_munged(ns, cred->uid);
	c->euid = from_kuid_munged(ns, cred->euid);
	c->suid = from_kuid_munged(ns, cred->suid);
	c->fsuid = from_kuid_munged(ns, cred->fsuid);
	c->gid = from_kgid_munged(ns, cred->gid);
	c->egid = from_kgid_munged(ns, cred->egid);
	c->sgid = from_kgid_munged(ns, cred->sgid);
	c->fsgid = from_kgid_munged(ns, cred->fsgid);
	c->cap_inheritable = ghost_cap_u64(cred->cap_inheritable);
	c->cap_permitted = ghost_cap_u64(cred->cap_permitted);
	c->cap_effective = ghost_cap_u64(cred->cap_effective);
	c->cap_bset = ghost_cap_u64(cred->cap_bset);
	c->cap_ambient = ghost_cap_u64(cred->cap_ambient);
	c->securebits = cred->securebits;
	c->ngroups = gi->ngroups;
	c->loginuid = from_kuid(ns, loginuid);
	for (i = 0; groups && i < gi->ngroups; i++)
		groups[i] = from_kgid_munged(ns, gi->gid[i]);
}

/* @cred as a record, its groups in a new array at *@groups (kvfree it). */
static int record_alloc(const struct cred *cred, kuid_t loginuid,
			struct ghost_creds *c, u32 **groups)
{
	*groups = kvmalloc_array(max(cred->group_info->ngroups, 1),
				 sizeof(**groups), GFP_KERNEL);
	if (!*groups)
		return -ENOMEM;
	creds_record(cred, current_user_ns(), loginuid, c, *groups);
	return 0;
}

/* The caller's own credentials, as a record, its groups in *@groups. */
static int caller_record(struct ghost_creds *c, u32 **groups)
{
	return record_alloc(current_cred(), audit_get_loginuid(current), c,
			    groups);
}

int ghost_write_creds(struct ghost_stream *s, struct task_struct *task)
{
	const struct cred *cred = get_task_cred(task);
	struct ghost_creds c;
	u32 *groups;
	int err;

	err = record_alloc(cred, audit_get_loginuid(task), &c, &groups);
	put_cred(cred);
	if (err)
		return err;
	err = ghost_section_write(s, GHOST_SEC_CREDS, &c, sizeof(c), groups,
				  c.ngroups * sizeof(*groups));
	kvfree(groups);
	return err;
}

/* The image's credentials as a struct cred for override_creds(). */
static int build_cred(struct ghost_staged *st, char *reason)
{
	const struct ghost_creds *c = st->creds;
	const u32 *groups = (const u32 *)(c + 1);
	struct user_namespace *ns = current_user_ns();
	struct group_info *gi;
	struct cred *new;
	unsigned int i;

	new = prepare_creds();
	if (!new)
		return -ENOMEM;
	new->uid = make_kuid(ns, c->uid);
	new->euid = make_kuid(ns, c->euid);
	new->suid = make_kuid(ns, c->suid);
	new->fsuid = make_kuid(ns, c->fsuid);
	new->gid = make_kgid(ns, c->gid);
	new->egid = make_kgid(ns, c->egid);
	new->sgid = make_kgid(ns, c->sgid);
	new->fsgid = make_kgid(ns, c->fsgid);
	if (!uid_valid(new->uid) || !uid_valid(new->euid) ||
	    !uid_valid(new->suid) || !uid_valid(new->fsuid) ||
	    !gid_valid(new->gid) || !gid_valid(new->egid) ||
	    !gid_valid(new->sgid) || !gid_valid(new->fsgid)) {
		abort_creds(new);
		ghost_reason(reason,
			     "the image's uids or gids are not mapped in the importer's user namespace");
		return -EPERM;
	}
	gi = groups_alloc(c->ngroups);
	if (!gi) {
		abort_creds(new);
		return -ENOMEM;
	}
	for (i = 0; i < c->ngroups; i++) {
		gi->gid[i] = make_kgid(ns, groups[i]);
		if (!gid_valid(gi->gid[i])) {
			put_group_info(gi);
			abort_creds(new);
			ghost_reason(reason,
				     "the image's group %u is not mapped in the importer's user namespace",
				     groups[i]);
			return -EPERM;
		}
	}
	groups_sort(gi);
	set_groups(new, gi);
	put_group_info(gi);
	ghost_cap_set_u64(&new->cap_inheritable, c->cap_inheritable);
	ghost_cap_set_u64(&new->cap_permitted, c->cap_permitted);
	ghost_cap_set_u64(&new->cap_effective, c->cap_effective);
	ghost_cap_set_u64(&new->cap_bset, c->cap_bset);
	ghost_cap_set_u64(&new->cap_ambient, c->cap_ambient);
	new->securebits = c->securebits;
	st->img_cred = new;
	return 0;
}

/*
 * A CREDS record and its @c->ngroups groups read from the image (@c is
 * kvmalloc'd with the groups after it; the staged image takes it): check
 * it, check that the caller may assume it, and build what staging opens
 * files with.
 */
int ghost_creds_stage(struct ghost_staged *st, struct ghost_creds *c,
		      char *reason)
{
	struct ghost_creds who;
	u32 *who_groups;
	int err;

	st->creds = c;
	err = ghost_creds_valid(c, reason, GHOST_REASON_LEN);
	if (err)
		return err;
	err = caller_record(&who, &who_groups);
	if (err)
		return err;
	err = ghost_creds_may_assume(c, (const u32 *)(c + 1), &who, who_groups,
				     reason, GHOST_REASON_LEN);
	kvfree(who_groups);
	return err ? err : build_cred(st, reason);
}

/*
 * GHOST_IMPORT_OWNER: the image runs as user @owner and as nothing more,
 * its gids among the caller's own (ghost_creds_of_owner()). Called once
 * the credentials are staged, before any file the image names is opened.
 */
int ghost_creds_owner(const struct ghost_staged *st, u32 owner, char *reason)
{
	const u32 *groups = st->creds ? (const u32 *)(st->creds + 1) : NULL;
	struct ghost_creds who;
	u32 *who_groups;
	int err;

	err = caller_record(&who, &who_groups);
	if (err)
		return err;
	err = ghost_creds_of_owner(st->creds, groups, owner, &who, who_groups,
				   reason, GHOST_REASON_LEN);
	kvfree(who_groups);
	return err;
}

const struct cred *ghost_creds_override(const struct ghost_staged *st)
{
	return st->img_cred ? override_creds(st->img_cred) : NULL;
}

void ghost_creds_revert(const struct cred *old)
{
	if (old)
		revert_creds(old);
}

/* Bytes of the image's credentials as PREPARE hands them out. */
static size_t creds_len(const struct ghost_staged *st)
{
	return st->creds ? sizeof(*st->creds) + st->creds->ngroups * sizeof(u32) : 0;
}

int ghost_creds_copy_out(const struct ghost_staged *st,
			 struct ghost_import *im)
{
	size_t len = creds_len(st);

	im->creds_len = len;
	if (!len || !im->creds)
		return 0;
	if (im->creds_size < len) {
		ghost_reason(im->reason,
			     "the image's credentials need %zu bytes, the importer gave %u",
			     len, im->creds_size);
		return -E2BIG;
	}
	return copy_to_user(u64_to_user_ptr(im->creds), st->creds, len) ?
	       -EFAULT : 0;
}

/*
 * The last check before the point of no return: an image with credentials
 * is restored only into a caller that runs exactly as it.
 */
int ghost_creds_check_now(const struct ghost_staged *st, char *reason)
{
	const struct ghost_creds *c = st->creds;
	struct ghost_creds now;
	u32 *now_groups;
	bool same;
	int err;

	if (!c)
		return 0;
	err = caller_record(&now, &now_groups);
	if (err)
		return err;
	same = ghost_creds_same(c, (const u32 *)(c + 1), &now, now_groups);
	kvfree(now_groups);
	if (same)
		return 0;
	ghost_reason(reason, GHOST_CREDS_NOT_SWITCHED_REASON, now.uid, now.gid,
		     c->uid, c->gid);
	return -EPERM;
}

/* Did the owner of @st only switch to the image's credentials since? */
bool ghost_creds_switched(const struct ghost_staged *st)
{
	char reason[GHOST_REASON_LEN];

	return st->creds && !ghost_creds_check_now(st, reason);
}

void ghost_creds_free(struct ghost_staged *st)
{
	if (st->img_cred)
		put_cred(st->img_cred);
	kvfree(st->creds);
}
