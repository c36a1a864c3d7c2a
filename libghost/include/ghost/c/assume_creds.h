/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Switch the calling process to an image's credentials (a CREDS record and
 * its groups), in C: what both engines' importers do before they rebuild
 * the caller — the kernel engine between GHOST_IMPORT_PREPARE and the
 * import (restore_self.h), the user engine before it opens the image's
 * files. Whether the caller may is decided before (common/ghost_creds.h):
 * this only carries it out, and says which step failed.
 *
 * Order: loginuid (needs CAP_AUDIT_CONTROL once set), the bounding set
 * (CAP_SETPCAP), groups and gids, uids (with SECBIT_KEEP_CAPS, so that the
 * permitted set survives a switch away from root), the capability sets
 * (CAP_SETPCAP kept effective meanwhile if the securebits still change),
 * ambient capabilities, securebits, the capability sets once more. A
 * process the switch made non-dumpable is made dumpable again: it holds
 * nothing of the caller's once the image replaces it, and its own user may
 * trace (and checkpoint) it, as before the checkpoint.
 *
 * Raw system calls: they act on this thread only, and the importer is
 * single-threaded. Build with -std=gnu11 or _GNU_SOURCE (syscall(2)).
 */
#ifndef GHOST_C_ASSUME_CREDS_H
#define GHOST_C_ASSUME_CREDS_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/securebits.h>
#include <linux/ghost.h>

static inline int ghost_creds_fail(char *reason, size_t len, const char *what)
{
	int err = errno;

	snprintf(reason, len, "cannot switch to the image's credentials: %s: %s", what,
		 strerror(err));
	errno = err;
	return -1;
}

static inline int ghost_creds_capset(__u64 inh, __u64 perm, __u64 eff)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = {
		{ (__u32)eff, (__u32)perm, (__u32)inh },
		{ (__u32)(eff >> 32), (__u32)(perm >> 32), (__u32)(inh >> 32) },
	};

	return (int)syscall(SYS_capset, &h, d);
}

static inline int ghost_creds_loginuid(__u32 loginuid)
{
	char buf[16];
	ssize_t n;
	int fd = open("/proc/self/loginuid", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT && loginuid == (__u32)-1 ? 0 : -1; /* no audit */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = 0;
		if ((__u32)strtoul(buf, NULL, 10) == loginuid)
			return 0;
	}
	fd = open("/proc/self/loginuid", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = snprintf(buf, sizeof(buf), "%u", loginuid);
	n = write(fd, buf, (size_t)n) == n ? 0 : -1;
	close(fd);
	return (int)n;
}

/* Are @groups (@n of them) this process's supplementary groups? */
static inline int ghost_creds_have_groups(const __u32 *groups, __u32 n)
{
	long k = syscall(SYS_getgroups, 0, NULL), j;
	gid_t *have;
	__u32 i;
	int same;

	if (k < 0 || (__u32)k != n)
		return 0;
	have = (gid_t *)malloc((size_t)(k ? k : 1) * sizeof(*have));
	if (!have)
		return 0;
	same = syscall(SYS_getgroups, k, have) == k;
	for (i = 0; same && i < n; i++) {
		for (j = 0; j < k && have[j] != groups[i]; j++)
			;
		same = j < k;
	}
	free(have);
	return same;
}

/*
 * Root about to become another user's process (@c) gives it a session of its
 * own: in root's it would share root's controlling terminal (open /dev/tty,
 * TIOCSTI into the shell that ran the restart) and could signal the
 * session's other processes. Called before the image's session and group
 * are set up (a group leader cannot start a session). Returns 0, or -1 with
 * errno set and @reason (@len bytes) saying why.
 */
static inline int ghost_creds_own_session(const struct ghost_creds *c, char *reason, size_t len)
{
	if (geteuid() != 0 || c->uid == 0 || getsid(0) == getpid() || setsid() >= 0)
		return 0;
	{
		int err = errno;

		snprintf(reason, len,
			 "root restores uid %u's process in a session of its own, and setsid() failed (%s): start the restore outside a process group leader",
			 c->uid, strerror(err));
		errno = err;
	}
	return -1;
}

/*
 * Switches this process to @c with supplementary groups @groups. Returns 0,
 * or -1 with errno set and @reason (@len bytes) naming the step; the
 * process is then partly switched.
 */
static inline int ghost_assume_creds(const struct ghost_creds *c, const __u32 *groups,
				     char *reason, size_t len)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	__u64 tmp_perm, tmp_eff;
	long sb, dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
	int cap, changed;

	if (syscall(SYS_getresuid, &ru, &eu, &su) || syscall(SYS_getresgid, &rg, &eg, &sg))
		return ghost_creds_fail(reason, len, "getresuid");
	changed = ru != c->uid || eu != c->euid || su != c->suid || rg != c->gid ||
		  eg != c->egid || sg != c->sgid;
	if (ghost_creds_loginuid(c->loginuid))
		return ghost_creds_fail(reason, len, "writing /proc/self/loginuid");
	for (cap = 0; cap < 64; cap++)
		if (!((c->cap_bset >> cap) & 1) && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1 &&
		    prctl(PR_CAPBSET_DROP, cap, 0, 0, 0))
			return ghost_creds_fail(reason, len, "PR_CAPBSET_DROP");
	sb = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	if (sb >= 0 && !(sb & SECBIT_KEEP_CAPS) && changed)
		prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0); /* refused if locked: capset says */
	if (!ghost_creds_have_groups(groups, c->ngroups) &&
	    syscall(SYS_setgroups, (size_t)c->ngroups, groups))
		return ghost_creds_fail(reason, len, "setgroups");
	if (syscall(SYS_setresgid, c->gid, c->egid, c->sgid))
		return ghost_creds_fail(reason, len, "setresgid");
	syscall(SYS_setfsgid, c->fsgid);
	if ((__u32)syscall(SYS_setfsgid, -1) != c->fsgid)
		return ghost_creds_fail(reason, len, "setfsgid");
	if (syscall(SYS_setresuid, c->uid, c->euid, c->suid))
		return ghost_creds_fail(reason, len, "setresuid");
	syscall(SYS_setfsuid, c->fsuid);
	if ((__u32)syscall(SYS_setfsuid, -1) != c->fsuid)
		return ghost_creds_fail(reason, len, "setfsuid");

	/* CAP_SETPCAP stays effective until the securebits are set. */
	sb = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	tmp_perm = c->cap_permitted;
	tmp_eff = c->cap_effective;
	if (sb >= 0 && ((__u32)sb ^ c->securebits) & ~(__u32)SECBIT_KEEP_CAPS) {
		tmp_perm |= 1ULL << CAP_SETPCAP;
		tmp_eff |= 1ULL << CAP_SETPCAP;
	}
	if (ghost_creds_capset(c->cap_inheritable, tmp_perm, tmp_eff))
		return ghost_creds_fail(reason, len, "capset");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && c->cap_ambient)
		return ghost_creds_fail(reason, len, "PR_CAP_AMBIENT_CLEAR_ALL");
	for (cap = 0; cap < 64; cap++)
		if (((c->cap_ambient >> cap) & 1) &&
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0))
			return ghost_creds_fail(reason, len, "PR_CAP_AMBIENT_RAISE");
	if (sb >= 0 && (__u32)sb != c->securebits) {
		if (((__u32)sb ^ c->securebits) == SECBIT_KEEP_CAPS ?
		    prctl(PR_SET_KEEPCAPS, !!(c->securebits & SECBIT_KEEP_CAPS), 0, 0, 0) :
		    prctl(PR_SET_SECUREBITS, c->securebits, 0, 0, 0))
			return ghost_creds_fail(reason, len, "PR_SET_SECUREBITS");
	}
	if ((tmp_perm != c->cap_permitted || tmp_eff != c->cap_effective) &&
	    ghost_creds_capset(c->cap_inheritable, c->cap_permitted, c->cap_effective))
		return ghost_creds_fail(reason, len, "capset");
	if (dumpable == 1 && prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 1)
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	return 0;
}

#endif /* GHOST_C_ASSUME_CREDS_H */
