// SPDX-License-Identifier: GPL-2.0
/*
 * The generic netlink family "ghost": every finished export and import is
 * announced on the "events" group, which only CAP_NET_ADMIN may join.
 */
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/time.h>

#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>

#include "ghost_util.h"
#include "kselftest_harness.h"

struct event {
	int cmd;
	__u32 pid;
	__u64 bytes;
	__s32 result;
	char reason[GHOST_REASON_LEN];
};

static int on_msg(struct nl_msg *msg, void *arg)
{
	struct genlmsghdr *gh = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *a[GHOST_ATTR_MAX + 1];
	struct event *ev = arg;

	if (genlmsg_parse(nlmsg_hdr(msg), 0, a, GHOST_ATTR_MAX, NULL))
		return NL_SKIP;
	ev->cmd = gh->cmd;
	ev->pid = a[GHOST_ATTR_PID] ? nla_get_u32(a[GHOST_ATTR_PID]) : 0;
	ev->bytes = a[GHOST_ATTR_BYTES] ? nla_get_u64(a[GHOST_ATTR_BYTES]) : 0;
	ev->result = a[GHOST_ATTR_RESULT] ? (__s32)nla_get_u32(a[GHOST_ATTR_RESULT]) : 1;
	ev->reason[0] = 0;
	if (a[GHOST_ATTR_REASON])
		snprintf(ev->reason, sizeof(ev->reason), "%s",
			 nla_get_string(a[GHOST_ATTR_REASON]));
	return NL_STOP;
}

/* A socket subscribed to the events, receiving into @ev, or NULL. */
static struct nl_sock *subscribe(struct event *ev, int *err)
{
	struct timeval tv = { .tv_sec = 5 };
	struct nl_sock *sk = nl_socket_alloc();
	int grp;

	*err = genl_connect(sk);
	if (*err)
		goto fail;
	grp = genl_ctrl_resolve_grp(sk, GHOST_GENL_NAME, GHOST_GENL_MCGRP_EVENTS);
	if (grp < 0) {
		*err = grp;
		goto fail;
	}
	nl_socket_disable_seq_check(sk);
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, on_msg, ev);
	setsockopt(nl_socket_get_fd(sk), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	*err = nl_socket_add_membership(sk, grp);
	if (*err)
		goto fail;
	return sk;
fail:
	nl_socket_free(sk);
	return NULL;
}

TEST(exports_are_announced)
{
	struct ghost_export e;
	struct event ev = { 0 };
	char c;
	int err, g;
	pid_t pid = spawn(work_idle, &c, 1);	/* before the socket: not inherited */
	struct nl_sock *sk = subscribe(&ev, &err);

	ASSERT_NE(NULL, sk) TH_LOG("subscribe: %s", nl_geterror(err));
	g = ghost_new_mem();
	ASSERT_EQ(0, ghost_do_export(g, pid, GHOST_EXPORT_KILL, &e)) TH_LOG("%s", e.reason);
	waitpid(pid, NULL, 0);
	ASSERT_LE(0, nl_recvmsgs_default(sk));
	EXPECT_EQ(GHOST_CMD_EXPORTED, ev.cmd);
	EXPECT_EQ((__u32)pid, ev.pid);
	EXPECT_EQ(e.bytes, ev.bytes);
	EXPECT_EQ(0, ev.result);

	/* A failed export is announced with its errno and reason. */
	EXPECT_EQ(-1, ghost_do_export(g, getpid(), GHOST_EXPORT_RUN, &e));
	ASSERT_LE(0, nl_recvmsgs_default(sk));
	EXPECT_EQ(GHOST_CMD_EXPORTED, ev.cmd);
	EXPECT_EQ(-EINVAL, ev.result);
	EXPECT_NE(NULL, strstr(ev.reason, "itself")) TH_LOG("%s", ev.reason);
	close(g);
	nl_socket_free(sk);
}

/*
 * In a new pid namespace (pid 1 there, with its own /proc): exports its
 * child and reports that child's pid in the initial namespace on @fd.
 */
static void export_from_pid_namespace(int g, int fd)
{
	struct ghost_export e;
	char c, self[32], path[96], line[64] = "";
	pid_t target = spawn(work_idle_bare, &c, 1);
	long global = 0;
	ssize_t n;
	int f;

	/* The initial namespace's /proc is still mounted: its view. */
	n = readlink("/proc/self", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = 0;
	snprintf(path, sizeof(path), "/proc/%s/task/%s/children", self, self);
	f = open(path, O_RDONLY);
	if (f < 0 || read(f, line, sizeof(line) - 1) <= 0 ||
	    sscanf(line, "%ld", &global) != 1)
		_exit(3);
	close(f);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("proc", "/proc", "proc", 0, NULL))
		_exit(4);
	if (ghost_do_export(g, target, GHOST_EXPORT_KILL, &e))
		_exit(5);
	if (write(fd, &global, sizeof(global)) != sizeof(global))
		_exit(6);
	_exit(0);
}

/*
 * Events reach the initial network namespace (the family is not netns
 * aware), so they carry pids of the initial pid namespace: an exporter in
 * a container must not hand monitors its own namespace's numbers.
 */
TEST(events_carry_the_initial_namespace_pid)
{
	struct event ev = { 0 };
	int err, st = -1, p[2], g = ghost_new_mem();
	struct nl_sock *sk = subscribe(&ev, &err);
	long global = 0;
	pid_t pid;

	ASSERT_NE(NULL, sk) TH_LOG("subscribe: %s", nl_geterror(err));
	ASSERT_EQ(0, pipe(p));
	pid = fork();
	if (pid == 0) {
		pid_t init;

		if (unshare(CLONE_NEWPID | CLONE_NEWNS))
			_exit(2);
		init = fork();
		if (init == 0)
			export_from_pid_namespace(g, p[1]);
		waitpid(init, &st, 0);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 7);
	}
	ASSERT_LT(0, pid);
	waitpid(pid, &st, 0);
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) TH_LOG("status %#x", st);
	ASSERT_EQ(sizeof(global), read(p[0], &global, sizeof(global)));
	ASSERT_LE(0, nl_recvmsgs_default(sk));
	EXPECT_EQ(GHOST_CMD_EXPORTED, ev.cmd);
	EXPECT_EQ(0, ev.result);
	EXPECT_EQ((__u32)global, ev.pid) TH_LOG("the event names pid %u", ev.pid);
	EXPECT_LT(2, ev.pid);	/* not the namespace's own 2 */
	close(g);
	nl_socket_free(sk);
}

TEST(failed_import_is_announced)
{
	struct ghost_import im = { .size = sizeof(im) };
	struct event ev = { 0 };
	int err, g = ghost_new_mem();
	struct nl_sock *sk = subscribe(&ev, &err);

	ASSERT_NE(NULL, sk) TH_LOG("subscribe: %s", nl_geterror(err));
	ASSERT_EQ(8, write(g, "notghost", 8));
	EXPECT_EQ(-1, ioctl(g, GHOST_IOC_IMPORT, &im));
	ASSERT_LE(0, nl_recvmsgs_default(sk));
	EXPECT_EQ(GHOST_CMD_IMPORTED, ev.cmd);
	EXPECT_EQ((__u32)getpid(), ev.pid);
	EXPECT_EQ(-EBADMSG, ev.result);
	close(g);
	nl_socket_free(sk);
}

TEST(unprivileged_cannot_subscribe)
{
	int status;
	pid_t child = fork();

	if (child == 0) {
		struct event ev;
		int err;

		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(2);
		_exit(subscribe(&ev, &err) ? 1 : 0);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

TEST_HARNESS_MAIN
