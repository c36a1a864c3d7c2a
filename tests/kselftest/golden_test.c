// SPDX-License-Identifier: GPL-2.0
/*
 * Golden images (tests/golden/, README.md there): images ghost.ko wrote in
 * older format versions must still import. The VM harness puts them in
 * /usr/local/share/ghost/golden/vN/. Each ghost.ko image is staged whole by
 * GHOST_IMPORT_PREPARE (every check of the reader, its paths reopened), and
 * v1/workload-state.img is restored with ghost-restore and must run: the
 * restored workload is named as it was, sits in /tmp, and survives the
 * SIGUSR1 its restored handler catches.
 */
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include "ghost_util.h"
#include "kselftest_harness.h"

#define GOLDEN "/usr/local/share/ghost/golden"
/*
 * The kernel the v2 ghost.ko images were taken on (tests/golden/README.md):
 * their vDSO record is its vDSO's. On any other kernel (a newer Debian
 * build, make check-debug's kernel) they must be refused for that vDSO.
 */
#define GOLDEN_V2_KERNEL "6.1.0-56-amd64"

/* The ghost.ko images of each version (user-engine ones name host paths). */
static const char *const kernel_images[] = {
	GOLDEN "/v1/workload-idle.img",
	GOLDEN "/v1/workload-state.img",
	GOLDEN "/v1/counter.img",
	GOLDEN "/v2/workload-idle.img",
	GOLDEN "/v2/workload-state.img",
	GOLDEN "/v2/counter.img",
};

/* Stage @path with PREPARE in a child (the import takes the caller's state). */
static int prepare(const char *path, char *reason)
{
	int st[2], rc = -1;
	pid_t pid;

	if (pipe(st))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct ghost_import im = { .size = sizeof(im), .flags = GHOST_IMPORT_PREPARE };
		int fd = open(path, O_RDONLY), g = ghost_new(), err = 0;

		if (fd < 0 || g < 0 || ghost_plug(g, GHOST_RES_FILE, fd))
			err = errno ? errno : EIO;
		else if (ioctl(g, GHOST_IOC_IMPORT, &im))
			err = errno;
		if (write(st[1], &err, sizeof(err)) != sizeof(err) ||
		    write(st[1], im.reason, sizeof(im.reason)) != sizeof(im.reason))
			_exit(2);
		_exit(0);
	}
	close(st[1]);
	if (pid > 0 && read(st[0], &rc, sizeof(rc)) == sizeof(rc) &&
	    read(st[0], reason, GHOST_REASON_LEN) != GHOST_REASON_LEN)
		reason[0] = 0;
	reason[GHOST_REASON_LEN - 1] = 0;
	close(st[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return rc;
}

TEST(images_of_ghost_ko_stage)
{
	char reason[GHOST_REASON_LEN] = "";

	/* Their working directories (tests/golden/README.md). */
	mkdir("/mnt", 0755);
	mkdir("/mnt/with", 0755);
	mkdir("/mnt/with/golden", 0755);
	struct utsname u;
	bool own_kernel;

	ASSERT_EQ(0, uname(&u));
	own_kernel = !strcmp(u.release, GOLDEN_V2_KERNEL);
	for (size_t i = 0; i < sizeof(kernel_images) / sizeof(kernel_images[0]); i++) {
		const char *img = kernel_images[i];

		ASSERT_EQ(0, access(img, R_OK)) TH_LOG("%s is missing", img);
		if (strstr(img, "/v2/") && !own_kernel) {
			EXPECT_EQ(EOPNOTSUPP, prepare(img, reason)) TH_LOG("%s: %s", img, reason);
			EXPECT_NE(NULL, strstr(reason, "is not this kernel's"))
				TH_LOG("%s on %s: %s", img, u.release, reason);
			continue;
		}
		EXPECT_EQ(0, prepare(img, reason)) TH_LOG("%s: %s", img, reason);
	}
}

static int read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, len - 1);

	if (fd >= 0)
		close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return 0;
}

TEST(version_1_workload_state_restores_and_runs)
{
	char path[64], comm[32] = "", cwd[64] = "";
	int null = open("/dev/null", O_RDWR);
	ssize_t n;
	pid_t pid;
	int status;

	ASSERT_LE(0, null);
	pid = fork();
	if (pid == 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		execlp("ghost-restore", "ghost-restore", GOLDEN "/v1/workload-state.img", NULL);
		_exit(127);
	}
	close(null);
	ASSERT_LT(0, pid);
	/* ghost-restore exits 1 if refused; restored, it pause()s. */
	for (int i = 0; i < 50; i++) {
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		if (!read_file(path, comm, sizeof(comm)) && !strcmp(comm, "ghost-mutate\n"))
			break;
		ASSERT_EQ(0, waitpid(pid, &status, WNOHANG)) TH_LOG("ghost-restore exited: %#x",
								     status);
		usleep(100000);
	}
	ASSERT_STREQ("ghost-mutate\n", comm);
	snprintf(path, sizeof(path), "/proc/%d/cwd", pid);
	n = readlink(path, cwd, sizeof(cwd) - 1);
	ASSERT_LT(0, n);
	cwd[n] = 0;
	EXPECT_STREQ("/tmp", cwd);
	/* Its handler for SIGUSR1 is the image's: the signal does not kill it. */
	ASSERT_EQ(0, kill(pid, SIGUSR1));
	usleep(300000);
	EXPECT_EQ(0, waitpid(pid, &status, WNOHANG)) TH_LOG("died: %#x", status);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

TEST_HARNESS_MAIN
