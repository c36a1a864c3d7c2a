// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/ghost: the device node, the version ioctl and the rules every ioctl
 * argument follows (size field, reserved fields, unknown commands).
 * Runs as root inside the test VM with ghost.ko loaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/ghost.h>

#include "kselftest_harness.h"

#define DEV "/dev/" GHOST_DEVICE_NAME

FIXTURE(dev) {
	int fd;
};

FIXTURE_SETUP(dev)
{
	self->fd = open(DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s (is ghost.ko loaded?)", DEV,
				      strerror(errno));
}

FIXTURE_TEARDOWN(dev)
{
	close(self->fd);
}

static struct ghost_version version_arg(void)
{
	struct ghost_version v;

	memset(&v, 0, sizeof(v));
	v.size = sizeof(v);
	return v;
}

TEST_F(dev, version_reports_abi_and_known_features)
{
	struct ghost_version v = version_arg();

	ASSERT_EQ(0, ioctl(self->fd, GHOST_IOC_VERSION, &v));
	EXPECT_EQ(sizeof(v), v.size);
	EXPECT_EQ(GHOST_ABI_MAJOR, v.major);
	EXPECT_EQ(GHOST_ABI_MINOR, v.minor);
	EXPECT_EQ(GHOST_ABI_PATCH, v.patch);
	EXPECT_EQ(0, v.features & ~(__u64)GHOST_FEAT_ALL);
	/* A module that exports must name the format it writes. */
	if (v.features & GHOST_FEAT_EXPORT)
		EXPECT_NE(0, v.image_version);
	EXPECT_LE(v.image_min, v.image_version);
	/* Writes this header's version and still reads version 1. */
	EXPECT_EQ(GHOST_IMAGE_VERSION, v.image_version);
	EXPECT_EQ(GHOST_IMAGE_MIN_VERSION, v.image_min);
	EXPECT_EQ(1, v.image_min);
}

TEST_F(dev, unknown_ioctl_is_enotty)
{
	struct ghost_version v = version_arg();

	EXPECT_EQ(-1, ioctl(self->fd, _IOWR(GHOST_IOC_MAGIC, 0x7f, struct ghost_version), &v));
	EXPECT_EQ(ENOTTY, errno);
	/* Right number, foreign type. */
	EXPECT_EQ(-1, ioctl(self->fd, _IOWR('T', 0x00, struct ghost_version), &v));
	EXPECT_EQ(ENOTTY, errno);
}

TEST_F(dev, nonzero_reserved_field_is_einval)
{
	struct ghost_version v = version_arg();

	v.resv[3] = 1;
	EXPECT_EQ(-1, ioctl(self->fd, GHOST_IOC_VERSION, &v));
	EXPECT_EQ(EINVAL, errno);

	v = version_arg();
	v.__pad = 1;
	EXPECT_EQ(-1, ioctl(self->fd, GHOST_IOC_VERSION, &v));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(dev, unknown_flag_is_einval)
{
	struct ghost_version v = version_arg();

	v.flags = 1u << 31;
	EXPECT_EQ(-1, ioctl(self->fd, GHOST_IOC_VERSION, &v));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(dev, size_below_first_version_is_einval)
{
	struct ghost_version v = version_arg();

	v.size = 8;
	EXPECT_EQ(-1, ioctl(self->fd, GHOST_IOC_VERSION, &v));
	EXPECT_EQ(EINVAL, errno);
	v.size = 0;
	EXPECT_EQ(-1, ioctl(self->fd, GHOST_IOC_VERSION, &v));
	EXPECT_EQ(EINVAL, errno);
}

/* A newer caller's larger struct works if the part the module lacks is 0. */
TEST_F(dev, larger_struct_with_zero_tail_is_accepted)
{
	struct {
		struct ghost_version v;
		__u64 newer[4];
	} big;

	memset(&big, 0, sizeof(big));
	big.v.size = sizeof(big);
	ASSERT_EQ(0, ioctl(self->fd, _IOWR(GHOST_IOC_MAGIC, 0x00, big), &big));
	EXPECT_EQ(sizeof(big.v), big.v.size);
	EXPECT_EQ(GHOST_ABI_MAJOR, big.v.major);
	EXPECT_EQ(0, big.newer[0] | big.newer[1] | big.newer[2] | big.newer[3]);
}

TEST_F(dev, larger_struct_with_nonzero_tail_is_e2big)
{
	struct {
		struct ghost_version v;
		__u64 newer[4];
	} big;

	memset(&big, 0, sizeof(big));
	big.v.size = sizeof(big);
	big.newer[2] = 42;
	EXPECT_EQ(-1, ioctl(self->fd, _IOWR(GHOST_IOC_MAGIC, 0x00, big), &big));
	EXPECT_EQ(E2BIG, errno);
}

TEST_F(dev, bad_pointer_is_efault)
{
	EXPECT_EQ(-1, ioctl(self->fd, GHOST_IOC_VERSION, (void *)16));
	EXPECT_EQ(EFAULT, errno);
}

TEST(node_is_root_only_char_device)
{
	struct stat st;

	ASSERT_EQ(0, stat(DEV, &st));
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT_EQ(0600, st.st_mode & 07777);
	EXPECT_EQ(0, st.st_uid);
}

TEST(unprivileged_open_is_denied)
{
	pid_t pid = fork();
	int status;

	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(2);
		if (open(DEV, O_RDWR) >= 0)
			_exit(3);
		_exit(errno == EACCES ? 0 : 4);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

/* A live ghost (or an open /dev/ghost) pins the module: unloading is refused. */
TEST(module_is_pinned_while_a_ghost_lives)
{
	struct ghost_create c = { .size = sizeof(c) };
	int dev = open(DEV, O_RDWR | O_CLOEXEC), g;

	ASSERT_LE(0, dev);
	g = ioctl(dev, GHOST_IOC_CREATE, &c);
	ASSERT_LE(0, g);
	close(dev);		/* only the ghost object holds the module now */
	EXPECT_EQ(-1, syscall(SYS_delete_module, "ghost", O_NONBLOCK));
	EXPECT_TRUE(errno == EWOULDBLOCK || errno == EBUSY) TH_LOG("errno %d", errno);
	close(g);
}

TEST_HARNESS_MAIN
