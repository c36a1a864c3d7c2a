/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bsp.h - the BSPlib standard C interface (Hill, McColl, Stefanescu, Goudreau,
 * Lang, Rao, Suel, Tsantilas, Bisseling: "BSPlib: The BSP Programming
 * Library", Parallel Computing 24, 1998), implemented by ghost's bsp/ runtime.
 *
 * The signatures are the standard's, so existing BSPlib programs compile and
 * link unchanged (pkg-config --cflags --libs ghost-bsp). Each virtual
 * processor is a process; the runtime may move it to another host inside
 * bsp_sync() (see Documentation/bsp.md).
 */
#ifndef GHOST_BSP_H
#define GHOST_BSP_H

#ifdef __cplusplus
extern "C" {
#endif

/* Runtime version (BSPlib 1.0 semantics; the runtime's own version). */
#define BSPLIB_VERSION 100
#define GHOST_BSP_VERSION 1

/* --- starting and ending an SPMD section ---------------------------------- */

/*
 * For programs whose SPMD section is not the whole of main(): call first in
 * main(); processes other than 0 run spmd_part() and exit.
 */
void bsp_init(void (*spmd_part)(void), int argc, char* argv[]);
/* Starts the SPMD section with at most maxprocs processes. */
void bsp_begin(int maxprocs);
/* Ends it: no BSPlib call but bsp_nprocs() and bsp_pid() may follow. */
void bsp_end(void);
/* Ends the whole job with a printf-style message, from any process. */
void bsp_abort(const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/* --- enquiry --------------------------------------------------------------- */

/* Processes of the job (before bsp_begin: processors available). */
int bsp_nprocs(void);
/* This process's number, 0 .. bsp_nprocs() - 1. */
int bsp_pid(void);
/* Seconds of wall-clock time since bsp_begin, on this process. */
double bsp_time(void);

/* --- superstep ------------------------------------------------------------ */

/* The barrier: ends the superstep; communication takes effect here. */
void bsp_sync(void);

/* --- direct remote memory access (DRMA) ------------------------------------ */

/* Registers (collectively, in the same order everywhere) an area of size bytes. */
void bsp_push_reg(const void* ident, int size);
/* Removes the most recent registration of ident (collective). */
void bsp_pop_reg(const void* ident);
/* Buffered: src is copied at the call; written into dst + offset on pid at the sync. */
void bsp_put(int pid, const void* src, void* dst, int offset, int nbytes);
/* Unbuffered: src must stay unchanged until the end of the next sync. */
void bsp_hpput(int pid, const void* src, void* dst, int offset, int nbytes);
/* Reads src + offset on pid at the start of the sync, before any put lands. */
void bsp_get(int pid, const void* src, int offset, void* dst, int nbytes);
/* Unbuffered get: may read at any time up to the end of the sync. */
void bsp_hpget(int pid, const void* src, int offset, void* dst, int nbytes);

/* --- bulk synchronous message passing (BSMP) ------------------------------- */

/* Sets the tag size from the next superstep on; returns the old one in *tag_nbytes. */
void bsp_set_tagsize(int* tag_nbytes);
/* Sends tag and payload to pid; readable there in the next superstep. */
void bsp_send(int pid, const void* tag, const void* payload, int payload_nbytes);
/* Messages received in the last superstep and not yet moved, and their payload bytes. */
void bsp_qsize(int* nmessages, int* accum_nbytes);
/* *status: -1 if the queue is empty, else the first message's payload size; copies its tag. */
void bsp_get_tag(int* status, void* tag);
/* Copies at most reception_nbytes of the first message's payload and removes it. */
void bsp_move(void* payload, int reception_nbytes);
/* Points at the first message's tag and payload (valid until the next sync),
 * removes it and returns its payload size, or -1 if the queue is empty. */
int bsp_hpmove(void** tag_ptr_buf, void** payload_ptr_buf);

#ifdef __cplusplus
}
#endif

#endif /* GHOST_BSP_H */
