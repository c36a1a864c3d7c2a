// SPDX-License-Identifier: LGPL-2.1-or-later
// The user engine's rebuild of a process (Documentation/user-engine.md): what
// the caller prepares for its tracer (Plan), and the tracer's work, which
// import.cpp starts with tracer_main(). Internal to libghost.
//
// The tracer seizes the caller and, with system calls run in it from a
// scratch mapping, unmaps all of it, maps and fills the image's mappings,
// moves the vDSO, sets the mm fields, descriptors, limits, task and signal
// state, FPU and registers, and lets go: the caller continues as the image.
// Up to the point of no return (prepare()) the tracer can put the caller
// back as it was; after it (commit()), a failure kills the caller.
#pragma once

#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ghost/fd.hpp"
#include "ghost/image.hpp"
#include "ghost/result.hpp"
#include "user/attrs.hpp"
#include "user/call_batch.hpp"
#include "user/proc.hpp"
#include "user/shadow.hpp"
#include "user/tracee.hpp"

namespace ghost::user::rebuild {

inline constexpr std::uint64_t kPage = 4096;
inline constexpr std::uint64_t kTaskSize = (1ULL << 47) - kPage;
// The scratch mapping: a code page, a data page, then the table of system
// calls run in one stop (call_batch.hpp).
inline constexpr std::uint64_t kTablePages = 4;
inline constexpr std::uint64_t kScratchLen = (2 + kTablePages) * kPage;
inline constexpr int kArchMapVdso64 = 0x2003;
inline constexpr int kCapSysResource = 24;
inline constexpr std::uint64_t kUnblockable = (1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1));

// Sets every signal's action from consecutive ghost_sigaction slots in one
// run (Tracee::run_to_trap) instead of one ptrace round trip per signal,
// SIGKILL and SIGSTOP skipped:
//   loop: cmp ebx, 9; je next; cmp ebx, 19; je next;
//         mov eax, SYS_rt_sigaction; mov edi, ebx; mov rsi, r12;
//         xor edx, edx; mov r10d, 8; syscall; test rax, rax; jnz done
//   next: add r12, 32; inc ebx; cmp ebx, r13d; jne loop
//   done: int3
// with ebx the first signal, r12 its slot, r13d the signal after the last;
// it stops at the first failure (rax, and ebx the signal). It lies in the
// scratch code page at kSetActionsOff, after the syscall instruction.
inline constexpr std::uint8_t kSetActionsLoop[] = {
    0x83, 0xfb, 0x09, 0x74, 0x1e, 0x83, 0xfb, 0x13, 0x74, 0x19, 0xb8, 0x0d, 0x00, 0x00, 0x00, 0x89,
    0xdf, 0x4c, 0x89, 0xe6, 0x31, 0xd2, 0x41, 0xba, 0x08, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x48, 0x85,
    0xc0, 0x75, 0x0b, 0x49, 0x83, 0xc4, 0x20, 0xff, 0xc3, 0x44, 0x39, 0xeb, 0x75, 0xd2, 0xcc};
static_assert(sizeof(ghost_sigaction) == 32 && SYS_rt_sigaction == 13 && SIGKILL == 9 &&
              SIGSTOP == 19);
inline constexpr std::uint64_t kSetActionsOff = 16;
inline constexpr std::uint64_t kCallLoopOff = 128; // call_loop_code()

// Offsets in the scratch data page.
inline constexpr std::uint64_t kMmMapOff = 0, kAuxvOff = 256, kActOff = 1024, kCommOff = 3072,
                               kAltOff = 3104, kLockOff = 3136;

struct PrctlMmMap { // struct prctl_mm_map
    std::uint64_t start_code, end_code, start_data, end_data, start_brk, brk, start_stack;
    std::uint64_t arg_start, arg_end, env_start, env_end;
    std::uint64_t auxv;
    std::uint32_t auxv_size;
    std::uint32_t exe_fd;
};
static_assert(sizeof(PrctlMmMap) == 104);

// Everything the caller prepared; the tracer works from its copy.
// Page data and where it goes, sorted by address: an image's runs, or a
// chain's extents (each from the newest image that has it).
struct PageData {
    std::uint64_t addr = 0;
    std::span<const std::byte> data; // whole pages
};

struct Plan {
    const image::Image* img = nullptr;
    std::vector<PageData> pages;
    Shadow* shadow = nullptr; // mappings built ahead, moved into place
    std::vector<int> vma_fd;  // per img->vmas: the open mapped file, or -1
    std::vector<int> file_fd; // per img->files: the reopened file (PATH), or -1
    int cwd_fd = -1;
    int fd_base = 0; // our descriptors are at or above it, the image's below
    std::vector<UniqueFd> owned;
    pid_t self = 0;
    AttrsPlan attrs;      // attrs.cpp: set by the caller, or by the tracer
    bool stopped = false; // queue SIGSTOP as the tracer lets go
    int pager = -1;       // a lazy restart's link to its pager (lazy.hpp), or -1
};

// The tracer's whole life: report (errno, reason) on the pipe if the caller
// is still itself, else kill it.
[[noreturn]] void tracer_main(const Plan& p, int report);

// ---- inside the tracer (rebuild.cpp, rebuild_task.cpp) ------------------------------

struct Layout {
    std::uint64_t scratch = 0;
    bool move_vdso = false; // unmap ours and map this kernel's at new_vvar
    bool keep_vdso = false; // ours already is where the image wants it
    std::uint64_t new_vvar = 0;
};

// The descriptor each DUP record (by index in files) shares its open file
// with; -1 for the records that are not DUPs.
std::vector<int> dup_sources(const image::Image& img);

class Rebuild {
  public:
    Rebuild(const Plan& p, Tracee& t) : p_(p), img_(*p.img), t_(t) {}

    // Phase one: nothing the caller could not get back.
    Result<void> prepare();
    // Puts the caller back as it was (after a failed prepare()).
    void roll_back();
    // Phase two, after the point of no return.
    Result<void> commit();

  private:
    Result<long> call(const char* what, long nr, std::uint64_t a1 = 0, std::uint64_t a2 = 0,
                      std::uint64_t a3 = 0, std::uint64_t a4 = 0, std::uint64_t a5 = 0,
                      std::uint64_t a6 = 0);
    Result<void> unmap_caller();
    Result<void> map_image();
    Result<void> fill_vma(const image::Vma& v);
    std::span<const PageData> pages_of(const image::Vma& v) const;
    bool lazy(const image::Vma& v) const;
    Result<void> start_lazy();
    Result<void> finish_vma(const ghost_vma& r, std::uint32_t prot);
    std::uint32_t made_prot(const image::Vma& v) const;
    // The buffer the mapping's memory was built ahead in (Shadow), or 0.
    std::uint64_t built_ahead(const ghost_vma& r) const {
        return p_.shadow ? p_.shadow->buffer(r.start, r.end) : 0;
    }
    Result<void> set_mm();
    Result<void> set_files();
    Result<void> set_locks();
    Result<void> set_task();
    Result<void> set_signals();
    // Queues a call for the next batch_.flush() (call_batch.hpp).
    Result<void> queue(std::string what, long nr, std::uint64_t a1 = 0, std::uint64_t a2 = 0,
                       std::uint64_t a3 = 0, std::uint64_t a4 = 0, std::uint64_t a5 = 0,
                       std::uint64_t a6 = 0, std::optional<std::uint64_t> expect = std::nullopt) {
        return batch_->add(std::move(what), nr, a1, a2, a3, a4, a5, a6, expect);
    }
    Result<void> poke(std::uint64_t off, std::span<const std::byte> b) {
        return t_.write(layout_.scratch + kPage + off, b);
    }
    std::uint64_t data(std::uint64_t off) const { return layout_.scratch + kPage + off; }

    const Plan& p_;
    const image::Image& img_;
    Tracee& t_;
    Layout layout_;
    Regs regs0_{};
    std::uint64_t mask0_ = 0;
    std::vector<std::byte> xsave_; // the image's FPU state, in this kernel's size
    std::vector<MapEntry> ours_;
    bool scratch_mapped_ = false;
    RseqConfig rseq0_;
    bool rseq_off_ = false;
    std::optional<CallBatch> batch_; // once the scratch mapping is there
};

} // namespace ghost::user::rebuild
