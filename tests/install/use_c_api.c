// SPDX-License-Identifier: GPL-2.0
/* A C user of libghost, built through pkg-config by check-install. */
#include <stdio.h>

#include <ghost/ghost.h>

int main(void)
{
	struct ghost_error err;
	uint64_t features;

	printf("libghost %s\n", ghost_library_version());
	if (ghost_get_features(&features, &err)) {
		fprintf(stderr, "ghost: %s (errno %d)\n", err.reason, err.code);
		return 1;
	}
	printf("features %#llx\n", (unsigned long long)features);
	return 0;
}
