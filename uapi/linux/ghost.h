/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * ghost: process virtualization for Linux clusters.
 *
 * This header is the contract between ghost.ko and user space: the ioctls on
 * /dev/ghost and (from image format v1 on) the records of a ghost image.
 * Kernel C and userland C/C++ both include it.
 *
 * Rules every struct here follows (see Documentation/ioctl-api.md):
 *  - fixed-size __u16/__u32/__u64 fields, natural alignment, explicit padding;
 *  - pointers travel as __u64;
 *  - the first field is __u32 size: the caller sets it to the sizeof() it was
 *    compiled with. The module accepts smaller (older) structs by treating
 *    the missing tail as zero, and larger (newer) ones only when the part it
 *    does not know is all zero (E2BIG otherwise). Output is copied back up to
 *    the smaller of the two sizes. Structs grow only at the end;
 *  - unknown flags and non-zero reserved or padding fields give EINVAL.
 *
 * The whole command is checked: type, number and direction must be those
 * below, and the size bits of the command must equal @size (the _IOC macros
 * of a caller compiled with an older or newer header encode its sizeof).
 */
#ifndef _UAPI_LINUX_GHOST_H
#define _UAPI_LINUX_GHOST_H

#include <linux/const.h>
#include <linux/ioctl.h>
#include <linux/types.h>

#define GHOST_DEVICE_NAME "ghost"

/*
 * 0xBC, numbers 0x00-0x0F: free in Documentation/userspace-api/ioctl/
 * ioctl-number.rst from 6.1 to the newest tables (0xB8 belongs to MSHV_IOCTL,
 * 0xBA to liveupdate). Documentation/ioctl-api.md records the entry.
 */
#define GHOST_IOC_MAGIC 0xBC

/* Version of this interface. A new major means an incompatible change. */
#define GHOST_ABI_MAJOR 0
#define GHOST_ABI_MINOR 6
#define GHOST_ABI_PATCH 0

/*
 * Feature bits reported by GHOST_IOC_VERSION. A bit is set only when the
 * loaded module implements the feature completely; tools must test the bit
 * rather than the version numbers.
 */
#define GHOST_FEAT_EXPORT         _BITULL(0) /* GHOST_IOC_EXPORT */
#define GHOST_FEAT_IMPORT         _BITULL(1) /* GHOST_IOC_IMPORT */
#define GHOST_FEAT_BACKEND_MEMORY _BITULL(2) /* memory resource object */
#define GHOST_FEAT_BACKEND_FILE   _BITULL(3) /* file/pipe resource object */
#define GHOST_FEAT_BACKEND_NET    _BITULL(4) /* stream socket resource object */
#define GHOST_FEAT_EVENTS         _BITULL(5) /* generic netlink "ghost" events */
#define GHOST_FEAT_IMPORT_STOPPED _BITULL(6) /* GHOST_IMPORT_STOPPED */
#define GHOST_FEAT_EXPORT_SNAPSHOT _BITULL(7) /* GHOST_EXPORT_SNAPSHOT, _FINISH */
#define GHOST_FEAT_IMPORT_DIRECT  _BITULL(8) /* GHOST_IMPORT_DIRECT */
#define GHOST_FEAT_IMPORT_OWNER   _BITULL(9) /* GHOST_IMPORT_OWNER, ghost_import.owner */

/* All bits this header knows about, so tools can name unknown ones. */
#define GHOST_FEAT_ALL \
	(GHOST_FEAT_EXPORT | GHOST_FEAT_IMPORT | GHOST_FEAT_BACKEND_MEMORY | \
	 GHOST_FEAT_BACKEND_FILE | GHOST_FEAT_BACKEND_NET | GHOST_FEAT_EVENTS | \
	 GHOST_FEAT_IMPORT_STOPPED | GHOST_FEAT_EXPORT_SNAPSHOT | \
	 GHOST_FEAT_IMPORT_DIRECT | GHOST_FEAT_IMPORT_OWNER)

/**
 * struct ghost_version - argument of GHOST_IOC_VERSION
 * @size:          in: sizeof(struct ghost_version) as compiled by the caller
 * @flags:         in: must be 0
 * @major:         out: GHOST_ABI_MAJOR of the module
 * @minor:         out: GHOST_ABI_MINOR of the module
 * @patch:         out: GHOST_ABI_PATCH of the module
 * @__pad:         must be 0
 * @image_version: out: image format version export writes (0: no export)
 * @image_min:     out: oldest image format version import accepts (0: none)
 * @features:      out: GHOST_FEAT_* bits implemented by the module
 * @resv:          must be 0
 */
struct ghost_version {
	__u32 size;
	__u32 flags;
	__u16 major;
	__u16 minor;
	__u16 patch;
	__u16 __pad;
	__u32 image_version;
	__u32 image_min;
	__u64 features;
	__u64 resv[4];
};

#define GHOST_VERSION_SIZE_VER0 64 /* sizeof first published struct */

/* Query the module's interface version and features; on /dev/ghost. */
#define GHOST_IOC_VERSION _IOWR(GHOST_IOC_MAGIC, 0x00, struct ghost_version)

/* ---- ghost objects ------------------------------------------------------ */

#define GHOST_CREATE_CLOEXEC _BITUL(0) /* the new descriptor is close-on-exec */
#define GHOST_CREATE_FLAGS   GHOST_CREATE_CLOEXEC

/**
 * struct ghost_create - argument of GHOST_IOC_CREATE (on /dev/ghost)
 * @size:  in: sizeof(struct ghost_create)
 * @flags: in: GHOST_CREATE_*
 * @resv:  must be 0
 *
 * The ioctl returns a new file descriptor: the ghost object. A resource
 * object is plugged into it (GHOST_IOC_PLUG), then it exports a process into
 * that resource or imports one from it. Closing it frees everything.
 */
struct ghost_create {
	__u32 size;
	__u32 flags;
	__u64 resv[3];
};

#define GHOST_CREATE_SIZE_VER0 32

#define GHOST_IOC_CREATE _IOW(GHOST_IOC_MAGIC, 0x01, struct ghost_create)

/* Resource object types (ghost_plug.type). */
enum ghost_resource_type {
	GHOST_RES_MEMORY = 1,	/* kernel buffer owned by the ghost */
	GHOST_RES_FILE = 2,	/* regular file or pipe, front to back */
	GHOST_RES_NETWORK = 3,	/* connected stream socket */
};

/**
 * struct ghost_plug - argument of GHOST_IOC_PLUG (on a ghost object)
 * @size:     in: sizeof(struct ghost_plug)
 * @type:     in: enum ghost_resource_type
 * @fd:       in: FILE/NETWORK: the descriptor (the ghost takes a reference)
 * @flags:    in: must be 0
 * @capacity: in: MEMORY: largest image the buffer may hold, in bytes
 *            (0: GHOST_MEMORY_DEFAULT_CAPACITY)
 * @resv:     must be 0
 *
 * One resource per ghost; a second PLUG gives EBUSY.
 */
struct ghost_plug {
	__u32 size;
	__u32 type;
	__s32 fd;
	__u32 flags;
	__u64 capacity;
	__u64 resv[3];
};

#define GHOST_PLUG_SIZE_VER0 48
#define GHOST_MEMORY_DEFAULT_CAPACITY _BITULL(32)

#define GHOST_IOC_PLUG _IOW(GHOST_IOC_MAGIC, 0x02, struct ghost_plug)

/* What becomes of the process after a successful export (exactly one). */
#define GHOST_EXPORT_RUN  _BITUL(0) /* keeps running: checkpoint, duplication */
#define GHOST_EXPORT_STOP _BITUL(1) /* stays stopped (SIGSTOP): migration */
#define GHOST_EXPORT_KILL _BITUL(2) /* is killed (SIGKILL) */
#define GHOST_EXPORT_FLAGS (GHOST_EXPORT_RUN | GHOST_EXPORT_STOP | GHOST_EXPORT_KILL)

/*
 * A copy-on-write export in two calls, so that a process which runs on is
 * held only while its state is read, not while its pages are copied:
 *
 * GHOST_EXPORT_SNAPSHOT (with GHOST_EXPORT_RUN): the process is stopped
 * under ptrace by the calling thread, which has just made it fork (the
 * child, @snap_pidfd, is stopped under ptrace by the same thread and has
 * not run). The module reads everything but the page contents from the
 * process now, keeps it in the ghost object with a reference to the
 * child's memory, and writes nothing (@bytes 0). The caller then lets the
 * process go on.
 * GHOST_EXPORT_FINISH (alone): writes the image kept by the last SNAPSHOT
 * call on this ghost, its pages taken from the child's memory, which the
 * fork left as the process's was. The child may then be killed.
 */
#define GHOST_EXPORT_SNAPSHOT _BITUL(3)
#define GHOST_EXPORT_FINISH   _BITUL(4)

#define GHOST_REASON_LEN 128

/**
 * struct ghost_export - argument of GHOST_IOC_EXPORT (on a ghost object)
 * @size:      in: sizeof(struct ghost_export)
 * @flags:     in: exactly one GHOST_EXPORT_{RUN,STOP,KILL}
 * @pidfd:     in: a pidfd of the process (pidfd_open(2)): no pid reuse race
 * @mem_fd:    in: a descriptor of the process's /proc/PID/mem opened by the
 *             caller (or handed to it). Its open is the access check: the
 *             kernel's own ptrace rule (PTRACE_MODE_ATTACH_FSCREDS), LSMs and
 *             Yama included. It must belong to the process @pidfd names.
 * @snap_pidfd:  in, GHOST_EXPORT_SNAPSHOT only: a pidfd of the fork child
 *             whose memory the image takes (ignored otherwise)
 * @snap_mem_fd: in, GHOST_EXPORT_SNAPSHOT only: its /proc/PID/mem, as
 *             @mem_fd (ignored otherwise)
 * @bytes:     out: image bytes written to the resource
 * @frozen_ns: out: how long the process was held still for the capture (0
 *             for SNAPSHOT and FINISH: the caller held it)
 * @resv:      must be 0
 * @reason:    out: on failure, a NUL-terminated sentence saying why (for
 *             EOPNOTSUPP: what the process holds that ghost cannot carry)
 *
 * If the process changes its memory or credentials (execve) between the
 * open of @mem_fd and the moment it is held still, the export fails with
 * ESTALE. On failure the process is left running as it was. ABI 0.1 took a
 * pid number here under another ioctl magic; that form is gone with it.
 */
struct ghost_export {
	__u32 size;
	__u32 flags;
	__s32 pidfd;
	__s32 mem_fd;
	__u64 bytes;
	__u64 frozen_ns;
	__s32 snap_pidfd;
	__s32 snap_mem_fd;
	__u64 resv[3];
	char reason[GHOST_REASON_LEN];
};

#define GHOST_EXPORT_SIZE_VER0 192

#define GHOST_IOC_EXPORT _IOWR(GHOST_IOC_MAGIC, 0x03, struct ghost_export)

/* Read and check the whole image, report where its vDSO goes, and return. */
#define GHOST_IMPORT_PREPARE _BITUL(0)
/*
 * The restored process stops (SIGSTOP, queued at the end of a successful
 * import and delivered on the way back to user mode) before it runs one
 * instruction of the image. Ignored with PREPARE (but accepted, so that a
 * module without it refuses the first call, before anything changed).
 */
#define GHOST_IMPORT_STOPPED _BITUL(1)
/*
 * Page data is read from the image file straight into the new mappings,
 * after the point of no return, instead of into kernel pages first: one
 * copy of every page instead of two. Everything else is read and checked
 * before, as without it, and the checksum of the whole image is checked
 * as the pages are read, before the restored process runs an instruction;
 * but a mismatch there (page data damaged, or the file changed between the
 * two readings) can only kill the caller, which gets SIGKILL instead of an
 * error. For callers that exist to become the image (a restore stub). Used
 * when the resource is a regular file and the image has an XXH64 checksum;
 * otherwise ignored (the image is staged as without it). Given to both
 * calls, or with PREPARE: the staging decides.
 */
#define GHOST_IMPORT_DIRECT  _BITUL(2)
/*
 * The image must run as user @owner and as nothing more: a CREDS section
 * whose uids are all @owner, one gid (no set-group-id process) and, unless
 * @owner is 0, that gid and its supplementary groups among the caller's
 * own gid and groups (a privileged caller first takes the owner's) and no
 * capability. Anything else, or an image without credentials (which would
 * run as its importer), is refused (EPERM) as soon as its credentials are
 * read, before any file it names is opened. For a privileged importer
 * restoring a user's image on the user's behalf (migd). Checked when the
 * image is staged: given to the call that stages it (PREPARE, or the only
 * call).
 */
#define GHOST_IMPORT_OWNER   _BITUL(3)
#define GHOST_IMPORT_FLAGS   (GHOST_IMPORT_PREPARE | GHOST_IMPORT_STOPPED | \
			      GHOST_IMPORT_DIRECT | GHOST_IMPORT_OWNER)

/**
 * struct ghost_import - argument of GHOST_IOC_IMPORT (on a ghost object)
 * @size:       in: sizeof(struct ghost_import)
 * @flags:      in: GHOST_IMPORT_*
 * @bytes:      out: image bytes read
 * @vvar_start: out (PREPARE): where the image had [vvar], 0 if nowhere
 * @vdso_start: out (PREPARE): where the image had [vdso], 0 if nowhere
 * @creds:      in (PREPARE): address of @creds_size bytes where the image's
 *              credentials go, a struct ghost_creds and its groups (as in
 *              a CREDS section); 0 if the caller does not take them
 * @creds_size: in: bytes at @creds
 * @creds_len:  out (PREPARE): bytes written at @creds, 0 if the image has
 *              no CREDS section
 * @attrs:      out (PREPARE): GHOST_ATTRS_SESSION_LEADER or _GROUP_LEADER:
 *              what the caller must make itself before the import
 *              (setsid(), setpgid(0, 0)), which no module can do; and
 *              GHOST_ATTRS_NOT_DUMPABLE: the caller should make itself not
 *              dumpable now and after any change of its credentials, as
 *              the import's pages go into its memory (the import makes it
 *              so too, before the first page)
 * @membarrier: out (PREPARE): GHOST_MEMBARRIER_* registrations the caller
 *              must make before the import (membarrier(2) REGISTER_*)
 * @owner:      in (GHOST_IMPORT_OWNER): the uid the image must run as
 * @__pad:      must be 0
 * @cpu_limit:  out (PREPARE): with GHOST_IMPORT_ATTRS_CPU_LIMIT in @attrs,
 *              the image's RLIMIT_CPU soft limit, in seconds, which the
 *              caller must set itself (below)
 * @reason:     out: on failure, a NUL-terminated sentence saying why
 *
 * Rebuilds the calling process from the image, in place, like execve(): on
 * success the ioctl does not return to its caller but into the restored
 * process. Everything that can be checked is checked before the point of no
 * return, so a bad image returns an error and leaves the caller as it was;
 * a failure after it kills the caller with SIGKILL.
 *
 * The running kernel's vDSO must sit where the image had it. A module cannot
 * move it, so the caller does, between two calls: IMPORT with PREPARE reads
 * and checks the image (kept in the ghost) and reports @vvar_start; the
 * caller unmaps its [vvar] and [vdso] and calls
 * arch_prctl(ARCH_MAP_VDSO_64, vvar_start); IMPORT without flags then
 * restores. If the vDSO already is in place, one call without PREPARE does.
 * In the same way the caller makes itself a session or process group leader
 * and registers for membarrier commands between the calls, as @attrs and
 * @membarrier say (libghost/include/ghost/c/restore_self.h); the import
 * checks that it did. @attrs and @membarrier are ignored on input.
 * A prepared image belongs to the process that prepared it, with the
 * credentials, memory and FPU state size it had then: any other importer,
 * or the same one changed, gets EPERM (the staged image is dropped).
 *
 * An image with a CREDS section runs as the credentials it records. PREPARE
 * refuses it (EPERM) unless the caller may assume them (the rule is in
 * image-format.md), opens its files with them, and hands them out at
 * @creds; a module cannot switch a process to another user (the kernel
 * exports no way to charge it to that user), so the caller does, between
 * the two calls, and the final call refuses (EPERM) a caller that does not
 * run exactly as the image. A caller that already does needs neither.
 *
 * The importer must be a 64-bit, single-threaded process that shares
 * neither its memory (vfork, CLONE_VM), its descriptor table (CLONE_FILES)
 * nor its fs struct with another task (EBUSY otherwise).
 */
struct ghost_import {
	__u32 size;
	__u32 flags;
	__u64 bytes;
	__u64 vvar_start;
	__u64 vdso_start;
	__u64 creds;
	__u32 creds_size;
	__u32 creds_len;
	char reason[GHOST_REASON_LEN];
	/* from GHOST_IMPORT_SIZE_VER1 on: */
	__u32 attrs;
	__u32 membarrier;
	/* from GHOST_IMPORT_SIZE_VER2 on: */
	__u32 owner;
	__u32 __pad;
	/* from GHOST_IMPORT_SIZE_VER3 on: */
	__u64 cpu_limit;
};

#define GHOST_IMPORT_SIZE_VER0 176
#define GHOST_IMPORT_SIZE_VER1 184
#define GHOST_IMPORT_SIZE_VER2 192
#define GHOST_IMPORT_SIZE_VER3 200

/*
 * In ghost_import.attrs only, never in an image: the image has a finite
 * RLIMIT_CPU soft limit, @cpu_limit. The import sets the limit, but a
 * module cannot arm the CPU timer that enforces it (update_rlimit_cpu() is
 * not exported), so the caller sets RLIMIT_CPU's soft limit to it with
 * setrlimit(2), which arms it, before the last call. The CPU time the
 * caller spent restoring counts, as the restored process's own.
 */
#define GHOST_IMPORT_ATTRS_CPU_LIMIT	_BITUL(31)

#define GHOST_IOC_IMPORT _IOWR(GHOST_IOC_MAGIC, 0x04, struct ghost_import)

/* ---- events: generic netlink family "ghost" -------------------------------
 *
 * Every finished export and import is multicast to the group "events"
 * (joining it needs CAP_NET_ADMIN) as a message whose command says which,
 * with the attributes below.
 */
#define GHOST_GENL_NAME		"ghost"
#define GHOST_GENL_VERSION	1
#define GHOST_GENL_MCGRP_EVENTS	"events"

enum ghost_genl_cmd {
	GHOST_CMD_UNSPEC,
	GHOST_CMD_EXPORTED,	/* an export finished (or failed) */
	GHOST_CMD_IMPORTED,	/* an import finished (or failed) */
	__GHOST_CMD_MAX,
};

enum ghost_genl_attr {
	GHOST_ATTR_UNSPEC,
	GHOST_ATTR_PID,		/* u32: the exported process / the importer */
	GHOST_ATTR_BYTES,	/* u64: image bytes written or read */
	GHOST_ATTR_FROZEN_NS,	/* u64: export only: time the process was held */
	GHOST_ATTR_RESULT,	/* s32: 0, or the negative errno */
	GHOST_ATTR_FLAGS,	/* u32: the request's GHOST_EXPORT_* / GHOST_IMPORT_* */
	GHOST_ATTR_REASON,	/* string: on failure, why */
	GHOST_ATTR_PAD,
	__GHOST_ATTR_MAX,
};

#define GHOST_ATTR_MAX (__GHOST_ATTR_MAX - 1)

/* ---- image format (Documentation/image-format.md) --------------------------
 *
 * A ghost image is a stream read and written front to back:
 *
 *   header, then sections, each "struct ghost_section" + payload padded with
 *   zeros to 8 bytes, in this order:
 *     TASK, CREDS?, ATTRS?, REGS, XSTATE, SIGNALS, FS, RLIMITS, MM,
 *     (VMA, PAGES*)*   one VMA per mapping, then the runs of its pages
 *     FILE*            open descriptors
 *     LOCK*            file locks held, after the FILE records they name
 *     END              last; holds the checksum of everything before it
 *
 * All integers are little-endian (the only architecture is x86-64). Page
 * data inside PAGES starts at a page-aligned offset of the stream so that
 * backends can move it with page-granular zero-copy primitives.
 *
 * How the format grows (from version 2 on; image-format.md has the rules):
 *  - the header and every record carry their size (header_size, and
 *    ghost_section.record_size for the fixed record that begins a payload).
 *    Records grow only at the end. A reader takes a larger record when the
 *    part it does not know is all zero, and a smaller one down to the
 *    version-1 size (GHOST_*_SIZE_VER1) with the missing tail as zero;
 *  - a section of a type the reader does not know is skipped when it is
 *    flagged GHOST_SECTION_SKIPPABLE, and refused otherwise;
 *  - features[_required] in the header: a reader refuses an image that
 *    requires a feature it does not know, and ignores the others;
 *  - a change a reader of the previous version would misread anyway gets a
 *    new version number.
 */
#define GHOST_IMAGE_MAGIC   0x474d4954534f4847ULL /* "GHOSTIMG" */
#define GHOST_IMAGE_VERSION 2	/* the version ghost writes */
#define GHOST_IMAGE_MIN_VERSION 1	/* the oldest version ghost reads */
#define GHOST_ARCH_X86_64   62 /* ELF EM_X86_64 */

/* ghost_image_header.features and .required_features (version 2 on) */
#define GHOST_IMAGE_FEAT_FILE_ID _BITULL(0) /* ghost_file.file_id names open files */
#define GHOST_IMAGE_FEAT_VDSO_ID _BITULL(1) /* ghost_mm.vdso_size/crc32c are set */
#define GHOST_IMAGE_FEAT_CREDS	 _BITULL(2) /* a CREDS section: restore as its ids */
#define GHOST_IMAGE_FEAT_ATTRS	 _BITULL(3) /* an ATTRS section follows CREDS */
#define GHOST_IMAGE_FEAT_VMA_ATTRS _BITULL(4) /* ghost_vma.flags may hold GHOST_VMA_ATTRS */
#define GHOST_IMAGE_FEAT_LOCKS	 _BITULL(5) /* LOCK sections may follow the FILEs */
#define GHOST_IMAGE_FEAT_PARENT	 _BITULL(6) /* incremental: a PARENT section, inherited runs */
#define GHOST_IMAGE_FEAT_XXH64	 _BITULL(7) /* END holds an XXH64, not a crc32c */
/* All feature bits this header knows about. */
#define GHOST_IMAGE_FEATURES (GHOST_IMAGE_FEAT_FILE_ID | GHOST_IMAGE_FEAT_VDSO_ID | \
			      GHOST_IMAGE_FEAT_CREDS | GHOST_IMAGE_FEAT_ATTRS | \
			      GHOST_IMAGE_FEAT_VMA_ATTRS | GHOST_IMAGE_FEAT_LOCKS | \
			      GHOST_IMAGE_FEAT_PARENT | GHOST_IMAGE_FEAT_XXH64)

struct ghost_image_header {
	__u64 magic;
	__u32 version;
	__u32 header_size;	/* bytes of header: 64, or more (zero tail) */
	__u32 arch;		/* GHOST_ARCH_* */
	__u32 page_size;
	__u64 time_ns;		/* CLOCK_REALTIME when captured */
	__s32 pid;		/* pid at export, exporter's namespace */
	__u32 __pad;
	__u64 features;		/* GHOST_IMAGE_FEAT_* the image uses (0 in v1) */
	__u64 required_features; /* of those, the ones a reader must know */
	__u64 resv[1];
};

#define GHOST_IMAGE_HEADER_SIZE_VER1 64

/*
 * The reason both engines give for an image whose recorded vDSO is not the
 * running kernel's (printf format: image size, crc32c, this kernel's).
 */
#define GHOST_VDSO_MISMATCH_REASON \
	"the image's vDSO (%u bytes, crc32c %#010x) is not this kernel's (%u bytes, crc32c %#010x)"
#define GHOST_IMAGE_HEADER_MAX 4096	/* largest header_size a reader takes */

/*
 * Why both engines refuse to restore an image's process attributes
 * (GHOST_SEC_ATTRS) for this caller, before the point of no return (printf
 * formats).
 */
#define GHOST_NICE_REASON \
	"the image's nice value %d is below the restarter's (%d): RLIMIT_NICE or CAP_SYS_NICE needed"
#define GHOST_OOM_REASON \
	"the image's oom_score_adj %d is below what the restarter may set without CAP_SYS_RESOURCE"
#define GHOST_SETSID_REASON \
	"the image led a session, but the restarter (pid %d) leads a process group: restart from a child"
#define GHOST_MEMBARRIER_REASON \
	"the image's membarrier registrations (%#x) are not offered by this kernel"

/*
 * Bounds of the format, the same for ghost.ko's reader and libghost's. A
 * kernel may be stricter where the machine is (its TASK_SIZE_MAX, its aux
 * vector size).
 */
#define GHOST_MAX_VMAS		65536		/* ghost_mm.nr_vmas */
#define GHOST_XSTATE_MIN	(512 + 64)	/* legacy area + XSAVE header */
#define GHOST_XSTATE_MAX	(64 * 1024)	/* ghost_xstate.size */
#define GHOST_MAX_FD		(1024 * 1024)	/* fds and RLIMIT_NOFILE below it */
#define GHOST_PATH_MAX		4096		/* a path's length is below it */
/* End of user space with 4-level page tables (x86-64 TASK_SIZE_MAX). */
#define GHOST_USER_ADDR_END	0x00007ffffffff000ULL
/* The same with 5-level page tables: a kernel that has them accepts up to it. */
#define GHOST_USER_ADDR_END_LA57 0x00fffffffffff000ULL
/* ghost_sigaction.flags Linux accepts on x86-64 (its UAPI_SA_FLAGS). */
#define GHOST_SA_FLAGS		0xdc000807ULL
/* ghost_signals.altstack_flags: SS_ONSTACK, SS_DISABLE, SS_AUTODISARM. */
#define GHOST_SS_FLAGS		0x80000003U
/* An alternate stack (size not 0, not SS_DISABLE): at least MINSIGSTKSZ. */
#define GHOST_SS_DISABLE	2U
#define GHOST_MINSIGSTKSZ	2048ULL
/* ghost_signals.pending: standard signals only (1 to 31). */
#define GHOST_SIG_PENDING_MASK	0x7fffffffULL
#define GHOST_RSEQ_LEN		32	/* ghost_task.rseq_len when rseq is set */
#define GHOST_ROBUST_LIST_LEN	24	/* ghost_task.robust_list_len when set */

enum ghost_section_type {
	GHOST_SEC_TASK = 1,
	GHOST_SEC_REGS = 2,
	GHOST_SEC_XSTATE = 3,
	GHOST_SEC_SIGNALS = 4,
	GHOST_SEC_FS = 5,
	GHOST_SEC_RLIMITS = 6,
	GHOST_SEC_MM = 7,
	GHOST_SEC_VMA = 8,
	GHOST_SEC_PAGES = 9,
	GHOST_SEC_FILE = 10,
	GHOST_SEC_END = 11,
	GHOST_SEC_CREDS = 12,	/* right after TASK (GHOST_IMAGE_FEAT_CREDS) */
	GHOST_SEC_ATTRS = 13,	/* right after CREDS (GHOST_IMAGE_FEAT_ATTRS) */
	GHOST_SEC_LOCK = 14,	/* after the FILEs (GHOST_IMAGE_FEAT_LOCKS) */
	GHOST_SEC_PARENT = 15,	/* first, right after the header (GHOST_IMAGE_FEAT_PARENT) */
};

/* ghost_section.flags */
#define GHOST_SECTION_SKIPPABLE _BITUL(0) /* a reader not knowing the type skips it */
#define GHOST_SECTION_FLAGS	GHOST_SECTION_SKIPPABLE

struct ghost_section {
	__u32 type;		/* enum ghost_section_type */
	__u16 flags;		/* GHOST_SECTION_* (0 in v1) */
	__u16 record_size;	/* bytes of the record that begins the payload (0 in v1) */
	__u64 size;		/* payload bytes, before padding to 8 */
};

struct ghost_task {
	char comm[16];		/* NUL-padded */
	__u32 personality;
	__u32 rseq_len;
	__u64 rseq;		/* rseq(2) area, 0 if none registered */
	__u32 rseq_sig;
	__u32 __pad;
	__u64 clear_child_tid;	/* set_tid_address(2) */
	__u64 robust_list;	/* set_robust_list(2) head, 0 if none */
	__u64 robust_list_len;
	__u64 resv[2];
};

/* General registers, in the order of the kernel's user_regs_struct. */
struct ghost_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	__u64 ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
	__u64 fs_base, gs_base, ds, es, fs, gs;
};

/* FPU/SSE/AVX state: an XSAVE image in the standard (non-compacted) format
 * of NT_X86_XSTATE, @size bytes following this struct.
 */
struct ghost_xstate {
	__u32 size;
	__u32 __pad;
	__u64 xfeatures;	/* XCR0 bits the exporting task could use */
};

struct ghost_sigaction {
	__u64 handler;		/* SIG_DFL 0, SIG_IGN 1, or an address */
	__u64 flags;		/* SA_* */
	__u64 restorer;
	__u64 mask;		/* bit N-1 = signal N */
};

#define GHOST_NSIG 64

struct ghost_signals {
	__u64 blocked;		/* bit N-1 = signal N */
	__u64 pending;		/* standard signals pending, same encoding */
	__u64 altstack_sp;
	__u64 altstack_size;
	__u32 altstack_flags;	/* SS_* */
	__u32 __pad;
	struct ghost_sigaction action[GHOST_NSIG];
};

/* Followed by @cwd_len bytes of the working directory's path (no NUL). */
struct ghost_fs {
	__u32 umask;
	__u32 cwd_len;
};

/*
 * Who the process was (GHOST_SEC_CREDS, followed by @ngroups __u32
 * supplementary group ids). An importer restores exactly these, and only
 * when its caller may assume them: it has CAP_SETUID and CAP_SETGID (root),
 * or every id is one of its own real/effective/saved ids and the groups are
 * its groups; the capability sets must be subsets of the caller's (the
 * whole rule: common/ghost_creds.h, Documentation/image-format.md).
 * Otherwise the import is refused before the point of no return. An image
 * without this section (versions before it) is restored with the caller's
 * credentials.
 */
struct ghost_creds {
	__u32 uid, euid, suid, fsuid;
	__u32 gid, egid, sgid, fsgid;
	__u64 cap_inheritable;
	__u64 cap_permitted;
	__u64 cap_effective;
	__u64 cap_bset;		/* bounding set */
	__u64 cap_ambient;
	__u32 securebits;	/* SECBIT_* */
	__u32 ngroups;		/* <= GHOST_NGROUPS_MAX */
	__u32 loginuid;		/* audit login uid, (__u32)-1 if unset */
	__u32 __pad;
	__u64 resv[2];
};

#define GHOST_NGROUPS_MAX 65536	/* the kernel's NGROUPS_MAX */

/* ghost_attrs.flags */
#define GHOST_ATTRS_NO_NEW_PRIVS	_BITUL(0) /* PR_SET_NO_NEW_PRIVS */
#define GHOST_ATTRS_THP_DISABLE		_BITUL(1) /* PR_SET_THP_DISABLE */
#define GHOST_ATTRS_CHILD_SUBREAPER	_BITUL(2) /* PR_SET_CHILD_SUBREAPER */
#define GHOST_ATTRS_SESSION_LEADER	_BITUL(3) /* its pid was its session id */
#define GHOST_ATTRS_GROUP_LEADER	_BITUL(4) /* its pid was its process group id */
/*
 * Not dumpable (PR_GET_DUMPABLE 0, or 2 after a setuid exec): restored
 * with PR_SET_DUMPABLE 0, so that its owner can no more ptrace it or read
 * its memory after a restart than before. Readers before this flag refuse
 * the image (an unknown flag).
 */
#define GHOST_ATTRS_NOT_DUMPABLE	_BITUL(5)
#define GHOST_ATTRS_FLAGS		0x3f

/* ghost_attrs.membarrier: registrations, membarrier(2) MEMBARRIER_CMD_REGISTER_* */
#define GHOST_MEMBARRIER_GLOBAL_EXPEDITED		_BITUL(0)
#define GHOST_MEMBARRIER_PRIVATE_EXPEDITED		_BITUL(1)
#define GHOST_MEMBARRIER_PRIVATE_EXPEDITED_SYNC_CORE	_BITUL(2)
#define GHOST_MEMBARRIER_PRIVATE_EXPEDITED_RSEQ		_BITUL(3)
#define GHOST_MEMBARRIER_FLAGS				0xf

/* Process attributes (GHOST_SEC_ATTRS). */
struct ghost_attrs {
	__u32 flags;		/* GHOST_ATTRS_* */
	__s32 oom_score_adj;	/* -1000 .. 1000 */
	__u32 membarrier;	/* GHOST_MEMBARRIER_* */
	__s32 nice;		/* -20 .. 19 */
	__u64 timerslack_ns;	/* PR_GET_TIMERSLACK */
	__u64 resv[4];
};

#define GHOST_NRLIMITS 16

struct ghost_rlimits {
	struct {
		__u64 cur;
		__u64 max;
	} rlim[GHOST_NRLIMITS];
};

#define GHOST_AUXV_WORDS 64

struct ghost_mm {
	__u64 start_code, end_code, start_data, end_data;
	__u64 start_brk, brk, start_stack;
	__u64 arg_start, arg_end, env_start, env_end;
	__u64 vdso;		/* [vdso] start in the image, 0 if none */
	__u32 nr_vmas;		/* VMA sections that follow */
	__u32 auxv_words;	/* used entries of @auxv */
	__u64 auxv[GHOST_AUXV_WORDS];
	/* version 2, with GHOST_IMAGE_FEAT_VDSO_ID (else 0): */
	__u32 vdso_size;	/* bytes of the [vdso] mapping */
	__u32 vdso_crc32c;	/* crc32c of those bytes */
};

#define GHOST_MM_SIZE_VER1 616

/* ghost_vma.flags */
#define GHOST_VMA_SHARED    _BITUL(0) /* MAP_SHARED (file mappings only) */
#define GHOST_VMA_GROWSDOWN _BITUL(1) /* stack */
#define GHOST_VMA_FILE      _BITUL(2) /* backed by the file at @path */
#define GHOST_VMA_HEAP      _BITUL(3) /* the brk area */
#define GHOST_VMA_STACK     _BITUL(4) /* contains mm->start_stack */
#define GHOST_VMA_VDSO      _BITUL(5) /* [vdso]: never carried, remapped */
#define GHOST_VMA_VVAR      _BITUL(6) /* [vvar]: never carried, remapped */
/* With GHOST_IMAGE_FEAT_VMA_ATTRS: the mapping's attributes (smaps VmFlags). */
#define GHOST_VMA_MAYWRITE   _BITUL(7)  /* may be made writable (shared: file open rw) */
#define GHOST_VMA_LOCKED     _BITUL(8)  /* mlock: "lo" */
#define GHOST_VMA_LOCKONFAULT _BITUL(9) /* mlock2(MLOCK_ONFAULT) */
#define GHOST_VMA_NORESERVE  _BITUL(10) /* MAP_NORESERVE: "nr" */
#define GHOST_VMA_DONTDUMP   _BITUL(11) /* MADV_DONTDUMP: "dd" */
#define GHOST_VMA_WIPEONFORK _BITUL(12) /* MADV_WIPEONFORK: "wf" */
#define GHOST_VMA_DONTFORK   _BITUL(13) /* MADV_DONTFORK: "dc" */
#define GHOST_VMA_MERGEABLE  _BITUL(14) /* MADV_MERGEABLE: "mg" */
#define GHOST_VMA_HUGEPAGE   _BITUL(15) /* MADV_HUGEPAGE: "hg" */
#define GHOST_VMA_NOHUGEPAGE _BITUL(16) /* MADV_NOHUGEPAGE: "nh" */
#define GHOST_VMA_SEQ_READ   _BITUL(17) /* MADV_SEQUENTIAL: "sr" */
#define GHOST_VMA_RAND_READ  _BITUL(18) /* MADV_RANDOM: "rr" */
#define GHOST_VMA_ATTRS      0x7ff80
#define GHOST_VMA_FLAGS     (0x7f | GHOST_VMA_ATTRS)

/* Followed by @path_len bytes of the file's path (no NUL) when FILE. */
struct ghost_vma {
	__u64 start, end;
	__u64 pgoff;		/* file offset in pages */
	__u32 prot;		/* PROT_READ | PROT_WRITE | PROT_EXEC */
	__u32 flags;		/* GHOST_VMA_* */
	__u64 nr_pages;		/* pages carried in the PAGES sections after it */
	__u32 path_len;
	__u32 __pad;
};

/* ghost_pages.flags (GHOST_IMAGE_FEAT_PARENT images only) */
#define GHOST_PAGES_PARENT _BITUL(0) /* no data here: the pages are the parent's */
#define GHOST_PAGES_FLAGS  GHOST_PAGES_PARENT

/* A run of @nr_pages pages from @addr; the data starts @data_offset bytes
 * after the start of this struct, at a page-aligned stream offset. A run
 * flagged GHOST_PAGES_PARENT has no data (@data_offset 0, the section is
 * the record alone): its pages are those the parent image chain holds at
 * the same addresses.
 */
struct ghost_pages {
	__u64 addr;
	__u64 nr_pages;
	__u32 data_offset;
	__u32 flags;		/* GHOST_PAGES_* (0 in v1, and without FEAT_PARENT) */
};

/*
 * An incremental image's parent (GHOST_SEC_PARENT, followed by @path_len
 * bytes of the parent's path as the writer knew it, no NUL: a hint). The
 * parent is named by content, not by path: the image of @bytes whose END
 * section has checksum @crc32c (or, with GHOST_IMAGE_FEAT_XXH64, @xxh64),
 * and whose header says @time_ns and @pid. Every page the process had at
 * this capture is in exactly one PAGES run of this image: with data, or
 * flagged GHOST_PAGES_PARENT; a page in no run is absent (zero, or the
 * file's), whatever the parent has.
 */
struct ghost_parent {
	__u64 bytes;		/* the parent image's size, END included */
	__u32 crc32c;		/* its END section's crc32c (0 with an XXH64 END) */
	__u32 depth;		/* images below this one: 1 when the parent is whole */
	__u64 time_ns;		/* the parent's header time_ns */
	__u64 start_time;	/* the process's start time (/proc/PID/stat field 22, ticks) */
	__s32 pid;		/* the process, as in both headers */
	__u32 path_len;		/* 1 .. GHOST_PATH_MAX - 1 */
	__u64 xxh64;		/* its END's xxh64 (0: its END has a crc32c) */
	__u64 resv[1];
};

#define GHOST_PARENT_DEPTH_MAX 256	/* longest chain a reader follows */

enum ghost_file_kind {
	GHOST_FILE_PATH = 1,	/* reopened by path: regular files, dirs, null-like devices */
	GHOST_FILE_INHERIT = 2,	/* pipes, FIFOs, ttys: the importer supplies the same fd */
	GHOST_FILE_DUP = 3,	/* the same open file (dup(2)) as an earlier record */
};

/* Followed by @path_len bytes of the path (no NUL). A GHOST_FILE_DUP record
 * shares the open file, offset included, of an earlier record: the one with
 * the same @file_id (GHOST_IMAGE_FEAT_FILE_ID), or in version 1 the one whose
 * descriptor number is in @pos. Its path is for people only.
 */
struct ghost_file {
	__s32 fd;
	__u32 kind;		/* enum ghost_file_kind */
	__u32 flags;		/* open flags: O_ACCMODE, O_APPEND, O_NONBLOCK, ... */
	__u32 fd_flags;		/* FD_CLOEXEC */
	__u64 pos;		/* file offset (v1 DUP: the earlier descriptor) */
	__u32 mode;		/* S_IFMT bits of the file */
	__u32 path_len;
	/* version 2, with GHOST_IMAGE_FEAT_FILE_ID (else 0): */
	__u64 file_id;		/* non-zero; the same for the same open file */
};

#define GHOST_FILE_SIZE_VER1 32

enum ghost_lock_kind {
	GHOST_LOCK_POSIX = 1,	/* fcntl(F_SETLK): owned by the process */
	GHOST_LOCK_OFD = 2,	/* fcntl(F_OFD_SETLK): owned by the open file */
	GHOST_LOCK_FLOCK = 3,	/* flock(2): owned by the open file */
};

/*
 * A lock the process held (GHOST_SEC_LOCK), taken again on the reopened file
 * before the restored process runs; an importer fails, before its point of
 * no return, when another holder has a conflicting lock now.
 */
struct ghost_lock {
	__u64 file_id;		/* the FILE record's file_id */
	__u32 kind;		/* enum ghost_lock_kind */
	__u32 type;		/* F_RDLCK or F_WRLCK (flock: LOCK_SH as F_RDLCK) */
	__u64 start;		/* byte range; POSIX and OFD only */
	__u64 len;		/* 0: to the end of the file */
	__u64 resv[2];
};

/*
 * The checksum of every byte of the stream before this section's header:
 * @crc32c, or with GHOST_IMAGE_FEAT_XXH64 (set in features and
 * required_features) @xxh64 (XXH64, seed 0) and @crc32c 0. An image with
 * the feature has the whole record; one without has @xxh64 0, or a record
 * of GHOST_END_SIZE_VER1 bytes.
 */
struct ghost_end {
	__u32 crc32c;
	__u32 __pad;
	__u64 bytes;		/* stream offset of this section's header */
	/* with GHOST_IMAGE_FEAT_XXH64 (else 0 or absent): */
	__u64 xxh64;
};

#define GHOST_END_SIZE_VER1 16

#endif /* _UAPI_LINUX_GHOST_H */
