// SPDX-License-Identifier: GPL-2.0
/*
 * oracle-fileoff: open files at offsets. A read-only file in the middle, a
 * read-write file past a write, an O_APPEND file, a file positioned beyond
 * its end (a later write leaves a hole), a close-on-exec descriptor, an
 * O_NONBLOCK one, a directory descriptor used with openat, /dev/null, and a
 * descriptor at a high number. After the restore every descriptor must be
 * the same file (inode), at the same offset, with the same flags, and
 * reading and writing must carry on from there.
 */
#include <sys/stat.h>

#include "oracle.h"

#define FILE_LEN 8192
#define HIGH_FD  100

struct ofd {
	int fd;
	const char *name;	/* under DIR, or an absolute path */
	int oflags;		/* open(2) flags */
	off_t pos;		/* where it is at the checkpoint */
	ino_t ino;
	int fl, fdfl;		/* F_GETFL, F_GETFD at ready */
};

static struct ofd fds[] = {
	{ .name = "ro", .oflags = O_RDONLY, .pos = 1000 },
	{ .name = "rw", .oflags = O_RDWR, .pos = 4097 },
	{ .name = "append", .oflags = O_WRONLY | O_APPEND, .pos = FILE_LEN },
	{ .name = "beyond", .oflags = O_RDWR, .pos = FILE_LEN + 3 * PAGE + 5 },
	{ .name = "cloexec", .oflags = O_RDONLY | O_CLOEXEC, .pos = 7 },
	{ .name = "nonblock", .oflags = O_RDONLY | O_NONBLOCK, .pos = 4096 },
	{ .name = "sub", .oflags = O_RDONLY | O_DIRECTORY, .pos = 0 },
	{ .name = "/dev/null", .oflags = O_RDWR, .pos = 0 },
	{ .name = "high", .oflags = O_RDONLY, .pos = 123 },
};
#define NFDS (sizeof(fds) / sizeof(fds[0]))

/*
 * F_GETFL also reports flags that only mattered to open(2): O_DIRECTORY,
 * and the kernel's O_LARGEFILE (implied on 64-bit; glibc's O_LARGEFILE is
 * 0 here). CRIU drops O_DIRECTORY on restore; neither changes behaviour.
 */
#define OPEN_ONLY_FLAGS (O_DIRECTORY | 0100000)

static int status_flags(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? fl : fl & ~OPEN_ONLY_FLAGS;
}

static char byte_at(off_t off)
{
	return (char)('a' + off % 23);
}

static void make_file(const char *name)
{
	char path[4096], buf[FILE_LEN];
	int fd = open(oracle_path(path, sizeof(path), name),
		      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	for (off_t i = 0; i < FILE_LEN; i++)
		buf[i] = byte_at(i);
	if (fd < 0 || write(fd, buf, FILE_LEN) != FILE_LEN)
		oracle_die("create %s", path);
	close(fd);
}

static void check(void)
{
	for (size_t i = 0; i < NFDS; i++) {
		struct ofd *o = &fds[i];
		struct stat st;
		off_t pos = lseek(o->fd, 0, SEEK_CUR);

		if (fstat(o->fd, &st)) {
			oracle_fail("fd %d (%s) is not open", o->fd, o->name);
			continue;
		}
		if (st.st_ino != o->ino)
			oracle_fail("fd %d (%s) is another file (inode %lu, was %lu)", o->fd,
				    o->name, (unsigned long)st.st_ino, (unsigned long)o->ino);
		if (pos != o->pos)
			oracle_fail("fd %d (%s) at offset %ld, expected %ld", o->fd, o->name,
				    (long)pos, (long)o->pos);
		if (status_flags(o->fd) != o->fl || fcntl(o->fd, F_GETFD) != o->fdfl)
			oracle_fail("fd %d (%s) flags %#o/%d, were %#o/%d", o->fd, o->name,
				    status_flags(o->fd), fcntl(o->fd, F_GETFD), o->fl,
				    o->fdfl);
	}
}

/* Reads @n bytes at the current offset of @o and checks them. */
static void read_on(struct ofd *o, size_t n)
{
	char buf[64];

	if (read(o->fd, buf, n) != (ssize_t)n) {
		oracle_fail("read %zu bytes from fd %d (%s)", n, o->fd, o->name);
		return;
	}
	for (size_t k = 0; k < n; k++)
		if (buf[k] != byte_at(o->pos + k))
			oracle_fail("fd %d (%s) read wrong data at %ld", o->fd, o->name,
				    (long)(o->pos + k));
	o->pos += n;
}

static void expect_at(const char *name, off_t off, const char *want, size_t n)
{
	char path[4096], got[64];
	int fd = open(oracle_path(path, sizeof(path), name), O_RDONLY | O_CLOEXEC);

	if (fd < 0 || pread(fd, got, n, off) != (ssize_t)n || memcmp(got, want, n))
		oracle_fail("%s does not hold '%.*s' at %ld", name, (int)n, want, (long)off);
	if (fd >= 0)
		close(fd);
}

int main(int argc, char **argv)
{
	char path[4096];

	oracle_init(argc, argv);
	oracle_path(path, sizeof(path), "sub");
	mkdir(path, 0755);
	for (size_t i = 0; i < NFDS; i++) {
		struct ofd *o = &fds[i];
		int fd;

		if (o->name[0] != '/' && !(o->oflags & O_DIRECTORY))
			make_file(o->name);
		fd = open(o->name[0] == '/' ? o->name : oracle_path(path, sizeof(path), o->name),
			  o->oflags);
		if (fd < 0)
			oracle_die("open %s", o->name);
		if (!strcmp(o->name, "high")) {
			if (dup2(fd, HIGH_FD) != HIGH_FD)
				oracle_die("dup2");
			close(fd);
			fd = HIGH_FD;
		}
		o->fd = fd;
		if (!strcmp(o->name, "rw")) {
			if (pwrite(fd, "XYZ", 3, 4094) != 3)
				oracle_die("pwrite");
			lseek(fd, 4097, SEEK_SET);
		} else if (!strcmp(o->name, "append")) {
			lseek(fd, 10, SEEK_SET);	/* O_APPEND writes still go to the end */
			if (write(fd, "", 0) || lseek(fd, 0, SEEK_END) != FILE_LEN)
				oracle_die("append");
		} else if (!(o->oflags & O_DIRECTORY) && o->name[0] != '/') {
			lseek(fd, o->pos, SEEK_SET);
		}
		o->fl = status_flags(fd);
		o->fdfl = fcntl(fd, F_GETFD);
		{
			struct stat st;

			fstat(fd, &st);
			o->ino = st.st_ino;
		}
	}

	check();
	oracle_ready();
	oracle_wait(check, 50);
	check();

	/* Carry on reading where each descriptor was. */
	read_on(&fds[0], 10);
	read_on(&fds[4], 10);
	read_on(&fds[5], 10);
	read_on(&fds[8], 10);
	/* Writing: rw at 4097, append at the end, beyond past the end. */
	if (write(fds[1].fd, "rw!", 3) != 3 || write(fds[2].fd, "app", 3) != 3 ||
	    write(fds[3].fd, "far", 3) != 3)
		oracle_fail("write after restore failed");
	expect_at("rw", 4094, "XYZrw!", 6);
	expect_at("append", FILE_LEN, "app", 3);
	expect_at("beyond", fds[3].pos, "far", 3);
	{
		char hole[8] = { 0 };

		expect_at("beyond", FILE_LEN + 8, hole, 8);
	}
	{
		int fd = openat(fds[6].fd, "created", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

		if (fd < 0)
			oracle_fail("openat through the directory fd failed");
		else
			close(fd);
		if (access(oracle_path(path, sizeof(path), "sub/created"), F_OK))
			oracle_fail("openat created the file somewhere else");
	}
	if (write(fds[7].fd, "x", 1) != 1)
		oracle_fail("write to /dev/null failed");
	oracle_finish();
}
