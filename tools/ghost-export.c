// SPDX-License-Identifier: GPL-2.0
/*
 * ghost-export: export a process into a ghost image file with ghost.ko.
 * The low-level counterpart of ghost-restore; operators use ghostctl.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/ghost.h>

#include "ghost/c/export_target.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: ghost-export [--run | --stop | --kill] PID IMAGE\n"
		"\n"
		"Export process PID into the ghost image file IMAGE ('-': standard\n"
		"output) with the ghost kernel module, then leave the process running\n"
		"(--run, the default), stopped (--stop) or killed (--kill).\n"
		"\n"
		"Exit status: 0 exported, 1 refused or failed (the reason is printed),\n"
		"2 usage error.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "run", no_argument, NULL, 'r' },
		{ "stop", no_argument, NULL, 's' },
		{ "kill", no_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ghost_create c = { .size = sizeof(c), .flags = GHOST_CREATE_CLOEXEC };
	struct ghost_plug p = { .size = sizeof(p), .type = GHOST_RES_FILE };
	struct ghost_export e = { .size = sizeof(e), .flags = GHOST_EXPORT_RUN };
	const char *step;
	int opt, dev, g, out;
	char *end;
	long pid;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'r': e.flags = GHOST_EXPORT_RUN; break;
		case 's': e.flags = GHOST_EXPORT_STOP; break;
		case 'k': e.flags = GHOST_EXPORT_KILL; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	pid = strtol(argv[optind], &end, 10);
	if (*end || pid <= 0) {
		fprintf(stderr, "ghost-export: '%s' is not a pid\n", argv[optind]);
		return 2;
	}
	out = strcmp(argv[optind + 1], "-") ?
	      open(argv[optind + 1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : 1;
	if (out < 0) {
		fprintf(stderr, "ghost-export: %s: %s\n", argv[optind + 1], strerror(errno));
		return 1;
	}
	dev = open("/dev/" GHOST_DEVICE_NAME, O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		fprintf(stderr, "ghost-export: /dev/ghost: %s (is ghost.ko loaded?)\n",
			strerror(errno));
		return 1;
	}
	g = ioctl(dev, GHOST_IOC_CREATE, &c);
	close(dev);
	p.fd = out;
	if (g < 0 || ioctl(g, GHOST_IOC_PLUG, &p)) {
		fprintf(stderr, "ghost-export: cannot set up a ghost: %s\n", strerror(errno));
		return 1;
	}
	if (ghost_export_target_open(&e, pid, &step)) {
		fprintf(stderr, "ghost-export: pid %d: %s: %s\n", (int)pid, step,
			strerror(errno));
		if (out != 1)
			unlink(argv[optind + 1]);
		return 1;
	}
	if (ioctl(g, GHOST_IOC_EXPORT, &e)) {
		fprintf(stderr, "ghost-export: pid %d: %s\n", (int)pid,
			e.reason[0] ? e.reason : strerror(errno));
		if (out != 1)
			unlink(argv[optind + 1]);
		return 1;
	}
	fprintf(stderr, "ghost-export: pid %d: %llu bytes, frozen %.3f ms\n", (int)pid,
		(unsigned long long)e.bytes, e.frozen_ns / 1e6);
	return 0;
}
