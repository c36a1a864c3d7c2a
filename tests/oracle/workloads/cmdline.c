// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-cmdline: what ps and /proc show of a process. The workload re-execs
 * itself with a chosen argument vector (an empty argument, spaces, a long
 * one, non-ASCII bytes) and environment, renames its thread
 * (PR_SET_NAME) and rewrites one argument in place, as setproctitle()-style
 * programs do. After the restore /proc/self/cmdline, environ, comm and
 * auxv must read exactly as before, and argv/environ/getauxval as well.
 * (/proc/self/exe is not compared: under ghost it names the restorer, a
 * documented limitation.)
 */
#include <sys/auxv.h>
#include <sys/prctl.h>

#include "oracle.h"

#define MARK "--oracle-reexec"
#define COMM "orc:cmd-line"

static char cmdline[8192], environ_s[8192], comm[64], auxv[4096];
static ssize_t cmdline_len, environ_len, auxv_len;
static char **args;
static int nargs;
static unsigned char at_random[16];

extern char **environ;

static void check_file(const char *path, const char *want, ssize_t len)
{
	char buf[8192];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = 0, r;

	while (fd >= 0 && (r = read(fd, buf + n, sizeof(buf) - n)) > 0)
		n += r;
	if (fd >= 0)
		close(fd);
	if (n != len || memcmp(buf, want, len))
		oracle_fail("%s changed (%zd bytes, was %zd)", path, n, len);
}

static ssize_t read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = 0, r;

	while (fd >= 0 && (r = read(fd, buf + n, size - n)) > 0)
		n += r;
	if (fd < 0)
		oracle_die("open %s", path);
	close(fd);
	return n;
}

static void check(void)
{
	char name[32] = "";

	check_file("/proc/self/cmdline", cmdline, cmdline_len);
	check_file("/proc/self/environ", environ_s, environ_len);
	check_file("/proc/self/comm", comm, strlen(comm));
	check_file("/proc/self/auxv", auxv, auxv_len);
	prctl(PR_GET_NAME, name);
	if (strcmp(name, COMM))
		oracle_fail("PR_GET_NAME says '%s'", name);
	if (nargs != 7 || strcmp(args[2], MARK) || strcmp(args[3], "") ||
	    strcmp(args[4], "TWO WORDS") || strlen(args[5]) != 300 ||
	    strcmp(args[6], "\xc3\xa9t\xc3\xa9"))
		oracle_fail("argv changed");
	if (!getenv("ORACLE_A") || strcmp(getenv("ORACLE_A"), "1") ||
	    !getenv("ORACLE_SPACE") || strcmp(getenv("ORACLE_SPACE"), "with space") ||
	    !getenv("ORACLE_EMPTY") || strcmp(getenv("ORACLE_EMPTY"), ""))
		oracle_fail("environment changed");
	if (memcmp((void *)getauxval(AT_RANDOM), at_random, 16) ||
	    getauxval(AT_PAGESZ) != PAGE)
		oracle_fail("aux vector values changed");
}

int main(int argc, char **argv)
{
	if (argc < 3 || strcmp(argv[2], MARK)) {
		static char long_arg[301];
		char *nargv[] = { "oracle-cmdline", argv[1], MARK, "", "two words",
				  long_arg, "\xc3\xa9t\xc3\xa9", NULL };
		char *nenv[] = { "ORACLE_A=1", "ORACLE_SPACE=with space", "ORACLE_EMPTY=",
				 "PATH=/usr/local/bin:/usr/bin:/bin", NULL };

		memset(long_arg, 'L', 300);
		execve("/proc/self/exe", nargv, nenv);
		perror("re-exec");
		return 2;
	}
	oracle_init(argc, argv);
	args = argv;
	nargs = argc;
	prctl(PR_SET_NAME, COMM);
	/* setproctitle-style: the argument memory itself is rewritten. */
	memcpy(argv[4], "TWO WORDS", 9);
	memcpy(at_random, (void *)getauxval(AT_RANDOM), 16);
	cmdline_len = read_file("/proc/self/cmdline", cmdline, sizeof(cmdline));
	environ_len = read_file("/proc/self/environ", environ_s, sizeof(environ_s));
	auxv_len = read_file("/proc/self/auxv", auxv, sizeof(auxv));
	snprintf(comm, sizeof(comm), "%s\n", COMM);
	if (!memmem(cmdline, cmdline_len, "TWO WORDS", 9))
		oracle_die("/proc/self/cmdline does not show the rewritten argument");

	check();
	oracle_ready();
	oracle_wait(check, 50);
	check();
	oracle_finish();
}
