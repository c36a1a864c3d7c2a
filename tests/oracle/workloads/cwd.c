// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-cwd: working directory and umask. The workload moves into
 * DIR/work dir/sub (a space in the path on purpose), sets umask 027 and
 * keeps a file there it reaches by a relative path. After the restore
 * getcwd, /proc/self/cwd and relative opens must agree, and a new file
 * must get its mode through the same umask.
 */
#include "oracle.h"

static char want[4096];

static void check(void)
{
	char cwd[4096], buf[64];
	mode_t m = umask(027);

	umask(m);
	if (!getcwd(cwd, sizeof(cwd)) || strcmp(cwd, want))
		oracle_fail("getcwd is '%s', expected '%s'", cwd, want);
	if (readlink("/proc/self/cwd", cwd, sizeof(cwd)) != (ssize_t)strlen(want) ||
	    memcmp(cwd, want, strlen(want)))
		oracle_fail("/proc/self/cwd does not point to '%s'", want);
	if (m != 027)
		oracle_fail("umask is %03o, expected 027", m);
	if (oracle_slurp("relative", buf, sizeof(buf)) != 6 || strcmp(buf, "here!\n"))
		oracle_fail("'relative' not readable from the working directory");
}

int main(int argc, char **argv)
{
	int fd;

	oracle_init(argc, argv);
	snprintf(want, sizeof(want), "%s/work dir", oracle_dir);
	mkdir(want, 0755);
	strcat(want, "/sub");
	mkdir(want, 0755);
	if (chdir(want))
		oracle_die("chdir %s", want);
	umask(027);
	fd = open("relative", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0 || write(fd, "here!\n", 6) != 6)
		oracle_die("create relative");
	close(fd);

	check();
	oracle_ready();
	oracle_wait(check, 50);
	check();
	{
		struct stat st;

		fd = open("new", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0 || fstat(fd, &st))
			oracle_fail("cannot create a file in the working directory");
		else if ((st.st_mode & 0777) != 0640)
			oracle_fail("new file has mode %03o, expected 0640", st.st_mode & 0777);
		if (fd >= 0)
			close(fd);
		if (access("../sub/new", F_OK))
			oracle_fail("'..' of the working directory is wrong");
	}
	oracle_finish();
}
