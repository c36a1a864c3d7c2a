// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-fdshare: descriptors that share one open file description, as
 * dup(2), dup2(2) and a shell's 2>&1 make them. Three descriptors of one
 * description share the offset and the status flags; a second, separate
 * open of the same file has its own. After the restore, moving one of the
 * shared descriptors must move the others, and not the separate one. (The
 * workload's own stdout and stderr are shared the same way, but O_APPEND
 * would hide a split there.)
 */
#include "oracle.h"

static int a, b, c, sep;

static void check(void)
{
	off_t pa = lseek(a, 0, SEEK_CUR), pb = lseek(b, 0, SEEK_CUR),
	      pc = lseek(c, 0, SEEK_CUR), ps = lseek(sep, 0, SEEK_CUR);

	if (pa != 500 || pb != 500 || pc != 500 || ps != 100)
		oracle_fail("offsets %ld %ld %ld (shared), %ld (separate); expected 500 and 100",
			    (long)pa, (long)pb, (long)pc, (long)ps);
}

int main(int argc, char **argv)
{
	char path[4096], buf[1024] = { 0 };
	int fd;

	oracle_init(argc, argv);
	fd = open(oracle_path(path, sizeof(path), "shared"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, sizeof(buf)) != sizeof(buf))
		oracle_die("create");
	a = fd;
	b = dup(a);
	c = dup2(a, 50);
	sep = open(path, O_RDWR);
	if (b < 0 || c != 50 || sep < 0)
		oracle_die("dup");
	lseek(a, 500, SEEK_SET);
	lseek(sep, 100, SEEK_SET);

	check();
	oracle_ready();
	oracle_wait(check, 50);
	check();

	/* One description: an offset move or a flag change shows on all three. */
	lseek(b, 600, SEEK_SET);
	if (lseek(a, 0, SEEK_CUR) != 600 || lseek(c, 0, SEEK_CUR) != 600)
		oracle_fail("moving fd %d to 600 left fd %d at %ld and fd %d at %ld: "
			    "the descriptors no longer share one open file",
			    b, a, (long)lseek(a, 0, SEEK_CUR), c, (long)lseek(c, 0, SEEK_CUR));
	if (lseek(sep, 0, SEEK_CUR) != 100)
		oracle_fail("the separate open moved with the shared ones");
	if (fcntl(c, F_SETFL, O_NONBLOCK) || !(fcntl(a, F_GETFL) & O_NONBLOCK))
		oracle_fail("O_NONBLOCK set on fd %d does not show on fd %d", c, a);
	if (fcntl(sep, F_GETFL) & O_NONBLOCK)
		oracle_fail("O_NONBLOCK leaked to the separate open");
	oracle_finish();
}
