// SPDX-License-Identifier: GPL-2.0
/*
 * ghost-restore: the restore stub. Becomes the process in a ghost image.
 *
 * It opens the image, hands it to ghost.ko and asks the module to rebuild
 * this very process from it (GHOST_IOC_IMPORT). On success it never returns:
 * the process (same pid) continues as the restored program. Kept in C with
 * nothing but libc so that nothing of it matters once the image replaces it.
 */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "ghost/c/restore_self.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: ghost-restore [--fd N | IMAGE]\n"
		"\n"
		"Rebuild this process from a ghost image with the ghost kernel module.\n"
		"On success it does not return: the process, with this command's pid,\n"
		"continues as the restored program. Descriptors the image marks as\n"
		"inherited (pipes, terminals) must be open at the same numbers.\n"
		"\n"
		"  IMAGE        read the image from this file ('-' for standard input)\n"
		"  --fd N       read the image from descriptor N (file, pipe or socket)\n"
		"  --device P   ghost device node (default /dev/ghost)\n"
		"  -h, --help   show this help\n"
		"\n"
		"Exit status (only on failure): 1 the image was refused or unreadable\n"
		"(the reason is printed), 2 usage error.\n"
		"\n"
		"From an image file the page data is read straight into place after the\n"
		"point of no return (GHOST_IMPORT_DIRECT, where the module has it): page\n"
		"data that does not match the image's checksum then kills the process\n"
		"(SIGKILL) before it runs, and the kernel log says why.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "fd", required_argument, NULL, 'f' },
		{ "device", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *device = "/dev/" GHOST_DEVICE_NAME;
	struct ghost_create c = { .size = sizeof(c), .flags = GHOST_CREATE_CLOEXEC };
	struct ghost_plug p = { .size = sizeof(p), .type = GHOST_RES_FILE };
	struct ghost_import im;
	int img = -1, dev, g, opt;
	char *end;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'f':
			img = strtol(optarg, &end, 10);
			if (*end || img < 0) {
				fprintf(stderr, "ghost-restore: --fd takes a descriptor number\n");
				return 2;
			}
			break;
		case 'd':
			device = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if ((img < 0) == (optind >= argc) || argc - optind > 1) {
		usage(stderr);
		return 2;
	}
	if (img < 0) {
		img = strcmp(argv[optind], "-") ? open(argv[optind], O_RDONLY | O_CLOEXEC) : 0;
		if (img < 0) {
			fprintf(stderr, "ghost-restore: %s: %s\n", argv[optind], strerror(errno));
			return 1;
		}
	}

	dev = open(device, O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		fprintf(stderr, "ghost-restore: %s: %s (is ghost.ko loaded?)\n", device,
			strerror(errno));
		return 1;
	}
	g = ioctl(dev, GHOST_IOC_CREATE, &c);
	close(dev);
	p.fd = img;
	if (g < 0 || ioctl(g, GHOST_IOC_PLUG, &p)) {
		fprintf(stderr, "ghost-restore: cannot set up a ghost: %s\n", strerror(errno));
		return 1;
	}

	ghost_restore_self_direct(g, &im, 0);
	fprintf(stderr, "ghost-restore: %s\n", im.reason[0] ? im.reason : strerror(errno));
	return 1;
}
