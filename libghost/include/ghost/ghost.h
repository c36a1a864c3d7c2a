/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libghost's C API: checkpoint, restart and duplicate processes with ghost,
 * for runtimes written in C. Link with `pkg-config --libs ghost`.
 *
 * Every function returns 0 on success, or -1 with errno set and, when @err
 * is not NULL, err->code (the same errno) and err->reason (a sentence for
 * people, e.g. why the kernel refused an export). No function throws or
 * aborts. The engine is $GHOST_ENGINE (auto, kernel or user; default auto,
 * as `ghostctl --engine auto`); the kernel engine's device node is
 * $GHOST_DEVICE or /dev/ghost.
 */
#ifndef GHOST_GHOST_H
#define GHOST_GHOST_H

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GHOST_ERROR_REASON_LEN 256

struct ghost_error {
	int code;				/* errno value; 0 on success */
	char reason[GHOST_ERROR_REASON_LEN];	/* NUL-terminated */
};

/* ghost_checkpoint_fd() flags: what becomes of the process (one of the
 * first three; 0 means KILL), and whether the image is compressed. */
#define GHOST_CKPT_KILL          0x0u  /* killed once the image is complete */
#define GHOST_CKPT_LEAVE_RUNNING 0x1u  /* keeps running */
#define GHOST_CKPT_LEAVE_STOPPED 0x2u  /* stays stopped (SIGSTOP) */
#define GHOST_CKPT_COMPRESS      0x10u /* zstd stream instead of the raw image */

/* The features the engine offers (GHOST_FEAT_* of <linux/ghost.h>). */
int ghost_get_features(uint64_t *features, struct ghost_error *err);

/* Writes the image of @pid to @fd (file at its offset, pipe or socket). With
 * GHOST_CKPT_KILL the process is killed only once the image is complete; a
 * failed checkpoint leaves it running. */
int ghost_checkpoint_fd(pid_t pid, int fd, unsigned int flags, struct ghost_error *err);

/* Rebuilds the image read from @fd (raw or compressed) as a new child of the
 * caller; on success *@pid is its pid (reap it with waitpid()). Spawns the
 * restore stub (posix_spawn, no fork): safe in a multithreaded caller. */
int ghost_restart_fd(int fd, pid_t *pid, struct ghost_error *err);

/* Rebuilds the image read from @fd in the calling (single-threaded) process:
 * returns only on failure, with the caller unchanged. */
int ghost_restart_self_fd(int fd, struct ghost_error *err);

/* A second, independent copy of @pid as a child of the caller; *@copy is its
 * pid. @pid keeps running. Spawns the restore stub, as ghost_restart_fd(). */
int ghost_duplicate(pid_t pid, pid_t *copy, struct ghost_error *err);

/* libghost's version, "major.minor.patch". */
const char *ghost_library_version(void);

#ifdef __cplusplus
}
#endif

#endif /* GHOST_GHOST_H */
