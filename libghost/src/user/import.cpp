// SPDX-License-Identifier: LGPL-2.1-or-later
// The user engine's import: the caller becomes the image, rebuilt by a
// tracer it forks (Documentation/user-engine.md).
//
// The caller opens everything the image names (files, mapped files, the
// working directory) while it still is itself, so any refusal comes back as
// an error. Then a tracer process seizes it and, with system calls run in it
// from a scratch page, unmaps all of it, maps and fills the image's
// mappings, moves the vDSO, sets the mm fields, descriptors, limits, task
// and signal state, FPU and registers, and lets go: the caller continues as
// the image. Up to the point of no return the tracer can put the caller back
// as it was; after it, a failure kills the caller.
#include "user/user.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ghost_policy.h"
#include "ghost_vma_attrs.h"
#include "sys.hpp"
#include "user/attrs.hpp"
#include "user/call_batch.hpp"
#include "user/creds.hpp"
#include "user/locks.hpp"
#include "user/proc.hpp"
#include "user/shadow.hpp"
#include "user/tracee.hpp"
#include "user/vma_attrs.hpp"
#include "zstd_stream.hpp"

namespace ghost::user {

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kTaskSize = (1ULL << 47) - kPage;
// The scratch mapping: a code page, a data page, then the table of system
// calls run in one stop (call_batch.hpp).
constexpr std::uint64_t kTablePages = 4;
constexpr std::uint64_t kScratchLen = (2 + kTablePages) * kPage;
constexpr int kArchMapVdso64 = 0x2003;
constexpr int kCapSysResource = 24;
constexpr std::uint64_t kUnblockable = (1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1));

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
constexpr std::uint8_t kSetActionsLoop[] = {
    0x83, 0xfb, 0x09, 0x74, 0x1e, 0x83, 0xfb, 0x13, 0x74, 0x19, 0xb8, 0x0d, 0x00, 0x00, 0x00, 0x89,
    0xdf, 0x4c, 0x89, 0xe6, 0x31, 0xd2, 0x41, 0xba, 0x08, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x48, 0x85,
    0xc0, 0x75, 0x0b, 0x49, 0x83, 0xc4, 0x20, 0xff, 0xc3, 0x44, 0x39, 0xeb, 0x75, 0xd2, 0xcc};
static_assert(sizeof(ghost_sigaction) == 32 && SYS_rt_sigaction == 13 && SIGKILL == 9 &&
              SIGSTOP == 19);
constexpr std::uint64_t kSetActionsOff = 16;
constexpr std::uint64_t kCallLoopOff = 128; // call_loop_code()

// Offsets in the scratch data page.
constexpr std::uint64_t kMmMapOff = 0, kAuxvOff = 256, kActOff = 1024, kCommOff = 3072,
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
};

// ---- in the caller, before anything is touched ------------------------------------

bool has_cap(int cap) {
    auto status = read_text("/proc/self/status");
    if (!status)
        return false;
    return (parse_u64(status_field(*status, "CapEff"), 16) >> cap) & 1;
}

Result<int> keep_high(Plan& p, int fd, const std::string& what) {
    if (fd < 0)
        return Error::from_errno(errno, what + ": " + errno_text(errno));
    UniqueFd owned(fd);
    const int hi = ::fcntl(fd, F_DUPFD_CLOEXEC, p.fd_base);
    if (hi < 0)
        return Error::from_errno(errno, fmt::format("{}: cannot move it to fd {} or above: {}",
                                                    what, p.fd_base, errno_text(errno)));
    p.owned.emplace_back(hi);
    return hi;
}

Result<void> check_limits(const image::Image& img) {
    const bool privileged = has_cap(kCapSysResource);
    for (int i = 0; i < GHOST_NRLIMITS; i++) {
        rlimit cur{};
        ::getrlimit(static_cast<__rlimit_resource>(i), &cur);
        if (img.rlimits.rlim[i].max > cur.rlim_max && !privileged)
            return Error::from_errno(
                EPERM, fmt::format("the image raises hard limit {} above the caller's", i));
    }
    int top = -1;
    for (const auto& f : img.files)
        top = std::max(top, f.rec.fd);
    if (top >= 0 && static_cast<std::uint64_t>(top) >= img.rlimits.rlim[RLIMIT_NOFILE].cur)
        return Error::from_errno(EINVAL,
                                 fmt::format("the image has fd {} but its RLIMIT_NOFILE is {}", top,
                                             img.rlimits.rlim[RLIMIT_NOFILE].cur));
    return {};
}

// prctl(PR_SET_MM_MAP)'s own checks, so that it cannot fail after the point
// of no return.
Result<void> check_mm(const ghost_mm& m) {
    std::uint64_t min_addr = 65536;
    if (auto t = read_text("/proc/sys/vm/mmap_min_addr"); t)
        min_addr = parse_u64(*t);
    const std::uint64_t v[] = {m.start_code, m.end_code,  m.start_data,  m.end_data,
                               m.start_brk,  m.brk,       m.start_stack, m.arg_start,
                               m.arg_end,    m.env_start, m.env_end};
    bool ok = std::all_of(std::begin(v), std::end(v),
                          [&](std::uint64_t a) { return a >= min_addr && a < kTaskSize; });
    ok = ok && m.start_code < m.end_code && m.start_data <= m.end_data && m.start_brk <= m.brk &&
         m.arg_start <= m.arg_end && m.env_start <= m.env_end;
    if (!ok)
        return Error::from_errno(EINVAL, "the image's code, data, brk, argument or environment "
                                         "bounds are not accepted by this kernel");
    return {};
}

Result<void> open_everything(Plan& p) {
    const image::Image& img = *p.img;
    int top = -1;
    for (const auto& f : img.files)
        top = std::max(top, f.rec.fd);
    p.fd_base = std::max(high_fd_base, top + 1);
    rlimit nofile{};
    ::getrlimit(RLIMIT_NOFILE, &nofile);
    if (nofile.rlim_cur < static_cast<rlim_t>(p.fd_base) + 64 &&
        nofile.rlim_max > nofile.rlim_cur) {
        nofile.rlim_cur = nofile.rlim_max; // room for our descriptors above the image's
        ::setrlimit(RLIMIT_NOFILE, &nofile);
    }

    std::map<std::pair<std::string, int>, int> opened;
    for (const auto& v : img.vmas) {
        if (!(v.rec.flags & GHOST_VMA_FILE)) {
            p.vma_fd.push_back(-1);
            continue;
        }
        // A shared mapping that may be made writable needs its file so.
        const bool rw = (v.rec.flags & GHOST_VMA_SHARED) &&
                        ((v.rec.flags & GHOST_VMA_MAYWRITE) || (v.rec.prot & PROT_WRITE));
        const int mode = rw ? O_RDWR : O_RDONLY;
        auto [it, fresh] = opened.try_emplace({v.path, mode}, -1);
        if (fresh) {
            const int fd0 = ::open(v.path.c_str(), mode | O_CLOEXEC);
            if (fd0 < 0 && rw && (v.rec.flags & GHOST_VMA_MAYWRITE)) {
                char why[GHOST_REASON_LEN];
                std::snprintf(why, sizeof(why), GHOST_MAYWRITE_REASON, v.path.c_str(),
                              static_cast<unsigned long long>(v.rec.start), -errno);
                return Error::from_errno(errno, why);
            }
            auto fd = keep_high(
                p, fd0, fmt::format("cannot open {}, mapped at {:#x}", v.path, v.rec.start));
            if (!fd)
                return fd.error();
            it->second = *fd;
        }
        p.vma_fd.push_back(it->second);
    }

    for (const auto& f : img.files) {
        const auto& r = f.rec;
        p.file_fd.push_back(-1);
        if (r.kind == GHOST_FILE_INHERIT) {
            struct stat st {};
            if (::fstat(r.fd, &st) != 0 || (st.st_mode & S_IFMT) != r.mode)
                return Error::from_errno(EBADF,
                                         fmt::format("fd {} ({}) must be inherited: open it at "
                                                     "that number",
                                                     r.fd, f.path));
            continue;
        }
        if (r.kind != GHOST_FILE_PATH)
            continue;
        const int flags = static_cast<int>(r.flags) & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);
        auto fd = keep_high(p, ::open(f.path.c_str(), flags | O_CLOEXEC),
                            fmt::format("cannot reopen {} as fd {}", f.path, r.fd));
        if (!fd)
            return fd.error();
        struct stat st {};
        if (::fstat(*fd, &st) != 0 || (st.st_mode & S_IFMT) != r.mode)
            return Error::from_errno(
                EBADMSG,
                fmt::format("{} (fd {}) is no longer the same kind of file", f.path, r.fd));
        if (S_ISREG(r.mode) && !(r.flags & O_PATH) &&
            ::lseek(*fd, static_cast<off_t>(r.pos), SEEK_SET) != static_cast<off_t>(r.pos))
            return Error::from_errno(
                EBADMSG, fmt::format("cannot seek {} (fd {}) to {}", f.path, r.fd, r.pos));
        p.file_fd.back() = *fd;
    }

    auto cwd = keep_high(p, ::open(img.cwd.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC),
                         fmt::format("cannot enter the working directory {}", img.cwd));
    if (!cwd)
        return cwd.error();
    p.cwd_fd = *cwd;
    return {};
}

// ---- in the tracer --------------------------------------------------------------------

struct Layout {
    std::uint64_t scratch = 0;
    bool move_vdso = false; // unmap ours and map this kernel's at new_vvar
    bool keep_vdso = false; // ours already is where the image wants it
    std::uint64_t new_vvar = 0;
};

bool overlaps(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
    return a < d && c < b;
}

// The descriptor a DUP record (files[i]) shares its open file with: the
// earlier record with the same file id, or in images without file ids the
// descriptor number in pos. The reader checked that it exists.
int dup_source(const image::Image& img, std::size_t i) {
    const auto& r = img.files[i].rec;
    if (!(img.header.features & GHOST_IMAGE_FEAT_FILE_ID))
        return static_cast<int>(r.pos);
    for (std::size_t j = 0; j < i; j++)
        if (img.files[j].rec.file_id == r.file_id)
            return img.files[j].rec.fd;
    return -1;
}

// Where this kernel's vDSO goes, and a scratch area free in both the
// caller and the image.
Result<Layout> plan_layout(const image::Image& img, const std::vector<MapEntry>& ours) {
    Layout l;
    std::uint64_t vvar_lo = ~0ULL, vdso_lo = 0, vdso_hi = 0;
    for (const auto& m : ours) {
        if (m.name == "[vvar]" || m.name == "[vvar_vclock]")
            vvar_lo = std::min(vvar_lo, m.start);
        if (m.name == "[vdso]") {
            vdso_lo = m.start;
            vdso_hi = m.end;
        }
    }
    std::vector<std::pair<std::uint64_t, std::uint64_t>> taken;
    for (const auto& m : ours)
        taken.emplace_back(m.start, m.end);
    const image::Vma* ivdso = nullptr;
    for (const auto& v : img.vmas) {
        if (v.rec.flags & GHOST_VMA_VDSO)
            ivdso = &v;
        taken.emplace_back(v.rec.start, v.rec.end);
    }
    if (ivdso) {
        if (!vdso_lo)
            return Error::from_errno(EOPNOTSUPP, "the image has a vDSO but this process has none "
                                                 "to move");
        if (ivdso->rec.end - ivdso->rec.start != vdso_hi - vdso_lo)
            return Error::from_errno(
                EOPNOTSUPP, fmt::format("the image's vDSO ({} bytes) is not this kernel's ({} "
                                        "bytes): restore it on the kernel it was taken on",
                                        ivdso->rec.end - ivdso->rec.start, vdso_hi - vdso_lo));
        if (vvar_lo > vdso_lo)
            vvar_lo = vdso_lo;
        l.new_vvar = ivdso->rec.start - (vdso_lo - vvar_lo);
        const std::uint64_t new_end = l.new_vvar + (vdso_hi - vvar_lo);
        for (const auto& v : img.vmas)
            if (!(v.rec.flags & (GHOST_VMA_VDSO | GHOST_VMA_VVAR)) &&
                overlaps(v.rec.start, v.rec.end, l.new_vvar, new_end))
                return Error::from_errno(
                    EOPNOTSUPP, fmt::format("this kernel's vDSO and its data pages do not fit "
                                            "where the image had its vDSO ({:#x})",
                                            ivdso->rec.start));
        l.keep_vdso = l.new_vvar == vvar_lo;
        l.move_vdso = !l.keep_vdso;
        taken.emplace_back(l.new_vvar, new_end);
    }
    std::sort(taken.begin(), taken.end());
    for (std::uint64_t at = 1ULL << 32; at + kScratchLen < kTaskSize;) {
        bool clash = false;
        for (const auto& [s, e] : taken)
            if (overlaps(at, at + kScratchLen, s, e)) {
                at = (e + kPage - 1) & ~(kPage - 1);
                clash = true;
                break;
            }
        if (!clash) {
            l.scratch = at;
            return l;
        }
    }
    return Error::from_errno(ENOMEM, "no room for the restorer's scratch page");
}

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
    Result<void> finish_vma(const ghost_vma& r, std::uint32_t prot);
    std::uint32_t made_prot(const image::Vma& v) const;
    Result<void> set_mm();
    Result<void> set_files();
    Result<void> set_locks();
    Result<void> set_task();
    Result<void> set_signals();
    Result<void> set_attrs() { return commit_attrs(t_, p_.attrs); }
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

Result<long> Rebuild::call(const char* what, long nr, std::uint64_t a1, std::uint64_t a2,
                           std::uint64_t a3, std::uint64_t a4, std::uint64_t a5, std::uint64_t a6) {
    auto r = t_.call(nr, a1, a2, a3, a4, a5, a6);
    if (!r)
        return r.error();
    if (is_err(*r))
        return Error::from_errno(static_cast<int>(-*r),
                                 fmt::format("{}: {}", what, errno_text(static_cast<int>(-*r))));
    return *r;
}

Result<void> Rebuild::prepare() {
    auto regs = t_.regs();
    if (!regs)
        return regs.error();
    regs0_ = *regs;
    auto mask = t_.signal_mask();
    if (!mask)
        return mask.error();
    mask0_ = *mask;
    if (auto s = t_.set_signal_mask(~0ULL); !s)
        return s;

    // The FPU state, checked against this CPU and laid out in this
    // kernel's XSAVE size.
    auto cur = t_.xstate();
    if (!cur)
        return cur.error();
    std::uint64_t have = 0, want = 0;
    if (cur->size() < 512 + 64)
        return Error::from_errno(EIO, "this kernel's XSAVE area is too small");
    std::memcpy(&have, cur->data() + 464, 8); // XCR0, as ptrace puts it there
    std::memcpy(&want, img_.xsave.data() + 512, 8);
    if (want & ~have)
        return Error::from_errno(
            EINVAL,
            fmt::format("the image uses FPU features this CPU lacks ({:#x})", want & ~have));
    xsave_ = *cur;
    std::fill(xsave_.begin() + 512, xsave_.end(), std::byte{0});
    std::memcpy(xsave_.data(), img_.xsave.data(), 464); // legacy area, not sw_reserved
    const std::size_t ext = std::min(xsave_.size(), img_.xsave.size());
    if (ext > 512)
        std::memcpy(xsave_.data() + 512, img_.xsave.data() + 512, ext - 512);

    // An image that recorded its vDSO restores only on a kernel with the
    // same one (the same check and reason as ghost.ko's).
    if (img_.header.features & GHOST_IMAGE_FEAT_VDSO_ID) {
        auto ours = t_.vdso_id();
        if (!ours)
            return ours.error();
        if (ours->size != img_.mm.vdso_size || ours->crc32c != img_.mm.vdso_crc32c) {
            char why[GHOST_REASON_LEN];
            std::snprintf(why, sizeof(why), GHOST_VDSO_MISMATCH_REASON, img_.mm.vdso_size,
                          img_.mm.vdso_crc32c, ours->size, ours->crc32c);
            return Error::from_errno(EOPNOTSUPP, why);
        }
    }
    auto maps = read_maps(t_.pid());
    if (!maps)
        return maps.error();
    auto l = plan_layout(img_, *maps);
    if (!l)
        return l.error();
    layout_ = *l;

    auto insn = t_.find_syscall_insn(regs0_);
    if (!insn)
        return insn.error();
    t_.use_syscall_insn(*insn);
    auto at =
        call("mapping the restorer's scratch page", SYS_mmap, layout_.scratch, kScratchLen,
             PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
             static_cast<std::uint64_t>(-1), 0);
    if (!at)
        return at.error();
    scratch_mapped_ = true;
    if (static_cast<std::uint64_t>(*at) != layout_.scratch)
        return Error::from_errno(EEXIST, "the restorer's scratch page landed elsewhere");
    static constexpr std::byte kCode[] = {std::byte{0x0f}, std::byte{0x05}, std::byte{0xcc}};
    if (auto w = t_.write(layout_.scratch, kCode); !w)
        return w;
    if (auto w =
            t_.write(layout_.scratch + kSetActionsOff, std::as_bytes(std::span(kSetActionsLoop)));
        !w)
        return w;
    if (auto w = t_.write(layout_.scratch + kCallLoopOff, call_loop_code()); !w)
        return w;
    t_.use_syscall_trap(layout_.scratch);
    batch_.emplace(t_, regs0_, layout_.scratch + kCallLoopOff, layout_.scratch + 2 * kPage,
                   kTablePages * kPage / sizeof(CallEntry));

    // The caller's rseq area goes with its memory: unregister it now, while
    // the kernel can still write to it.
    if (const auto rc = t_.rseq_config()) {
        rseq0_ = *rc;
        auto r = call("unregistering the caller's rseq area", SYS_rseq, rseq0_.addr, rseq0_.size,
                      1 /* RSEQ_FLAG_UNREGISTER */, rseq0_.sig);
        if (!r)
            return r.error();
        rseq_off_ = true;
    }
    auto again = read_maps(t_.pid());
    if (!again)
        return again.error();
    ours_ = std::move(*again);
    return {};
}

void Rebuild::roll_back() {
    if (rseq_off_)
        (void)t_.call(SYS_rseq, rseq0_.addr, rseq0_.size, 0, rseq0_.sig);
    const Regs back = restarted(regs0_, true);
    if (scratch_mapped_ &&
        t_.call_and_release(back, mask0_, 0, SYS_munmap, layout_.scratch, kScratchLen))
        return;
    (void)t_.set_regs(back);
    (void)t_.set_signal_mask(mask0_);
    (void)t_.detach();
}

Result<void> Rebuild::unmap_caller() {
    auto keep = [&](const MapEntry& m) {
        return m.start == layout_.scratch || m.name == "[vsyscall]" ||
               (layout_.keep_vdso &&
                (m.name == "[vdso]" || m.name == "[vvar]" || m.name == "[vvar_vclock]"));
    };
    // The memory built ahead stays (it may share a mapping with ours).
    const auto built =
        p_.shadow ? p_.shadow->ranges() : std::vector<std::pair<std::uint64_t, std::uint64_t>>{};
    std::uint64_t s = 0, e = 0;
    auto flush = [&]() -> Result<void> {
        std::uint64_t from = s;
        for (const auto& [bs, be] : built) {
            if (be <= from || bs >= e)
                continue;
            if (bs > from)
                if (auto r = queue("unmapping the caller", SYS_munmap, from, bs - from); !r)
                    return r;
            from = std::max(from, be);
        }
        if (e > from)
            if (auto r = queue("unmapping the caller", SYS_munmap, from, e - from); !r)
                return r;
        s = e = 0;
        return {};
    };
    for (const auto& m : ours_) {
        if (keep(m)) {
            if (auto r = flush(); !r)
                return r;
            continue;
        }
        if (e != m.start)
            if (auto r = flush(); !r)
                return r;
        if (e == 0)
            s = m.start;
        e = m.end;
    }
    if (auto r = flush(); !r)
        return r;
    return batch_->flush();
}

// A mapping in place with protection prot: the image's protection and
// attributes, queued.
Result<void> Rebuild::finish_vma(const ghost_vma& r, std::uint32_t prot) {
    if (prot != r.prot)
        if (auto m = queue("mprotect", SYS_mprotect, r.start, r.end - r.start, r.prot); !m)
            return m;
    if (r.flags & GHOST_VMA_ATTRS)
        return apply_vma_attrs(
            [&](const char* what, long nr, std::uint64_t a1, std::uint64_t a2,
                std::uint64_t a3) -> Result<long> {
                if (auto q = queue(what, nr, a1, a2, a3); !q)
                    return q.error();
                return 0;
            },
            r);
    return {};
}

// The protection a mapping is made with: its own, and writable while its
// pages are written in (none is for memory built ahead: its buffer is
// moved into place, and is read-write).
std::uint32_t Rebuild::made_prot(const image::Vma& v) const {
    if (p_.shadow && p_.shadow->buffer(v.rec.start, v.rec.end))
        return PROT_READ | PROT_WRITE;
    return v.rec.prot | (v.runs.empty() ? 0 : PROT_WRITE);
}

// Every mapping is made (or moved into place) in one batch, then filled from
// here, then given its protection and attributes in a second batch: two
// stops for the whole address space rather than two per mapping.
Result<void> Rebuild::map_image() {
    auto ours = [](const image::Vma& v) {
        return !(v.rec.flags & (GHOST_VMA_VDSO | GHOST_VMA_VVAR));
    };
    for (std::size_t i = 0; i < img_.vmas.size(); i++) {
        const auto& v = img_.vmas[i];
        const auto& r = v.rec;
        if (!ours(v))
            continue;
        if (const std::uint64_t buf = p_.shadow ? p_.shadow->buffer(r.start, r.end) : 0) {
            // Built ahead: its pages move into place, none is copied.
            if (auto at = queue(
                    fmt::format("moving the memory of {:#x}-{:#x} into place", r.start, r.end),
                    SYS_mremap, buf, r.end - r.start, r.end - r.start,
                    MREMAP_MAYMOVE | MREMAP_FIXED, r.start, 0, r.start);
                !at)
                return at;
            if (!(r.flags & GHOST_VMA_DONTFORK)) // the buffer's, not the image's
                if (auto m = queue("madvise(MADV_DOFORK)", SYS_madvise, r.start, r.end - r.start,
                                   MADV_DOFORK);
                    !m)
                    return m;
            continue;
        }
        std::uint64_t flags =
            MAP_FIXED_NOREPLACE | ((r.flags & GHOST_VMA_SHARED) ? MAP_SHARED : MAP_PRIVATE);
        if (!(r.flags & GHOST_VMA_FILE))
            flags |= MAP_ANONYMOUS;
        if (r.flags & GHOST_VMA_GROWSDOWN)
            flags |= MAP_GROWSDOWN;
        if (r.flags & GHOST_VMA_NORESERVE)
            flags |= MAP_NORESERVE;
        const int fd = p_.vma_fd[i];
        if (auto at = queue(fmt::format("mapping {:#x}-{:#x}", r.start, r.end), SYS_mmap, r.start,
                            r.end - r.start, made_prot(v), flags, static_cast<std::uint64_t>(fd),
                            fd >= 0 ? r.pgoff * kPage : 0, r.start);
            !at)
            return at;
    }
    if (auto b = batch_->flush(); !b)
        return b;
    for (const auto& v : img_.vmas)
        if (ours(v) && !(p_.shadow && p_.shadow->buffer(v.rec.start, v.rec.end)))
            if (auto f = fill_vma(v); !f)
                return f;
    for (const auto& v : img_.vmas)
        if (ours(v))
            if (auto f = finish_vma(v.rec, made_prot(v)); !f)
                return f;
    if (layout_.move_vdso)
        if (auto r = queue(fmt::format("mapping the vDSO at {:#x}", layout_.new_vvar),
                           SYS_arch_prctl, kArchMapVdso64, layout_.new_vvar);
            !r)
            return r;
    return batch_->flush();
}

// A mapping's pages, written in from here.
Result<void> Rebuild::fill_vma(const image::Vma& v) {
    if (v.runs.empty())
        return {};
    auto pg = std::lower_bound(
        p_.pages.begin(), p_.pages.end(), v.rec.start,
        [](const PageData& d, std::uint64_t a) { return d.addr + d.data.size() <= a; });
    for (; pg != p_.pages.end() && pg->addr < v.rec.end; ++pg)
        if (auto w = t_.write(pg->addr, pg->data); !w)
            return w;
    return {};
}

Result<void> Rebuild::set_mm() {
    const auto& m = img_.mm;
    std::uint32_t words = m.auxv_words;
    for (;;) {
        PrctlMmMap mm{m.start_code, m.end_code,     m.start_data, m.end_data, m.start_brk,
                      m.brk,        m.start_stack,  m.arg_start,  m.arg_end,  m.env_start,
                      m.env_end,    data(kAuxvOff), words * 8,    ~0u};
        if (auto w = poke(kMmMapOff, std::as_bytes(std::span(&mm, 1))); !w)
            return w;
        if (auto w = poke(kAuxvOff, std::as_bytes(std::span(m.auxv, words))); !w)
            return w;
        auto r = t_.call(SYS_prctl, PR_SET_MM, PR_SET_MM_MAP, data(kMmMapOff), sizeof(mm));
        if (!r)
            return r.error();
        // A kernel that keeps fewer aux words than the image's: end the
        // vector early (its last pair is AT_NULL).
        if (*r == -EINVAL && words > 2) {
            words -= 2;
            continue;
        }
        if (*r != 0)
            return Error::from_errno(
                static_cast<int>(-*r),
                fmt::format("prctl(PR_SET_MM_MAP): {}", errno_text(static_cast<int>(-*r))));
        return {};
    }
}

Result<void> Rebuild::set_files() {
    auto fds = list_fds(t_.pid());
    if (!fds)
        return fds.error();
    for (const int fd : *fds) {
        if (fd >= p_.fd_base)
            continue;
        const bool inherited = std::any_of(img_.files.begin(), img_.files.end(), [&](auto& f) {
            return f.rec.fd == fd && f.rec.kind == GHOST_FILE_INHERIT;
        });
        if (!inherited)
            if (auto r = queue("closing the caller's descriptors", SYS_close,
                               static_cast<std::uint64_t>(fd));
                !r)
                return r;
    }
    for (std::size_t i = 0; i < img_.files.size(); i++) {
        const auto& r = img_.files[i].rec;
        const std::uint64_t cloexec = (r.fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0;
        int from = -1;
        if (r.kind == GHOST_FILE_PATH)
            from = p_.file_fd[i];
        else if (r.kind == GHOST_FILE_DUP)
            from = dup_source(img_, i);
        if (from < 0)
            continue;
        if (auto d =
                queue(fmt::format("placing fd {}", r.fd), SYS_dup3,
                      static_cast<std::uint64_t>(from), static_cast<std::uint64_t>(r.fd), cloexec);
            !d)
            return d;
    }
    if (auto r = queue("entering the working directory", SYS_fchdir,
                       static_cast<std::uint64_t>(p_.cwd_fd));
        !r)
        return r;
    if (auto r = queue("umask", SYS_umask, img_.umask); !r)
        return r;
    // The files it opened go first: POSIX locks are taken after the last
    // close of their files and before the rest (a restart waits for them).
    for (const auto& fd : p_.owned)
        if (auto r = queue("closing the restorer's files", SYS_close,
                           static_cast<std::uint64_t>(fd.get()));
            !r)
            return r;
    if (auto r = batch_->flush(); !r)
        return r;
    for (int i = 0; i < GHOST_NRLIMITS; i++) {
        const rlimit rl{img_.rlimits.rlim[i].cur, img_.rlimits.rlim[i].max};
        if (::prlimit(t_.pid(), static_cast<__rlimit_resource>(i), &rl, nullptr) != 0)
            return Error::from_errno(errno,
                                     fmt::format("setting limit {}: {}", i, errno_text(errno)));
    }
    return {};
}

// POSIX locks belong to the process and any close of the file drops them:
// taken here, after the last close of a file the image names
// (take_early_locks() tested them); then the restorer's last descriptors
// go, which tells a waiting restart that the process is restored.
Result<void> Rebuild::set_locks() {
    for (const auto& l : img_.locks) {
        if (l.kind != GHOST_LOCK_POSIX)
            continue;
        const struct flock fl = posix_request(l);
        if (auto w = poke(kLockOff, std::as_bytes(std::span(&fl, 1))); !w)
            return w;
        auto r = t_.call(SYS_fcntl, static_cast<std::uint64_t>(lock_fd(img_, l)), F_SETLK,
                         data(kLockOff));
        if (!r)
            return r.error();
        if (*r == -EAGAIN || *r == -EACCES)
            return lock_conflict(img_, l);
        if (is_err(*r))
            return Error::from_errno(static_cast<int>(-*r),
                                     fmt::format("taking the POSIX lock of fd {} again: {}",
                                                 lock_fd(img_, l),
                                                 errno_text(static_cast<int>(-*r))));
    }
    if (auto r = call("closing the restorer's descriptors", SYS_close_range, p_.fd_base, ~0U, 0);
        !r)
        return r.error();
    return {};
}

Result<void> Rebuild::set_task() {
    const auto& tk = img_.task;
    if (auto w = poke(kCommOff, std::as_bytes(std::span(tk.comm))); !w)
        return w;
    if (auto r = call("prctl(PR_SET_NAME)", SYS_prctl, PR_SET_NAME, data(kCommOff)); !r)
        return r.error();
    if (auto r = call("personality", SYS_personality, tk.personality); !r)
        return r.error();
    if (auto r = call("set_tid_address", SYS_set_tid_address, tk.clear_child_tid); !r)
        return r.error();
    if (auto r = call("set_robust_list", SYS_set_robust_list, tk.robust_list,
                      tk.robust_list_len ? tk.robust_list_len : 24);
        !r)
        return r.error();
    if (tk.rseq)
        if (auto r = call("registering the image's rseq area", SYS_rseq, tk.rseq, tk.rseq_len, 0,
                          tk.rseq_sig);
            !r)
            return r.error();
    return {};
}

Result<void> Rebuild::set_signals() {
    // Signals pending in the caller are not the image's: ignoring a signal
    // discards it.
    auto status = read_text(fmt::format("/proc/{}/status", t_.pid()));
    if (!status)
        return status.error();
    const std::uint64_t stale = pending_signals(*status);
    std::array<ghost_sigaction, GHOST_NSIG> act{};
    for (int i = 0; i < GHOST_NSIG; i++) {
        act[static_cast<std::size_t>(i)] = img_.signals.action[i];
        act[static_cast<std::size_t>(i)].mask &= ~kUnblockable;
    }
    ghost_sigaction ign{};
    ign.handler = reinterpret_cast<std::uint64_t>(SIG_IGN);
    if (auto w = poke(kActOff, std::as_bytes(std::span(act))); !w)
        return w;
    if (auto w = poke(kActOff + sizeof(act), std::as_bytes(std::span(&ign, 1))); !w)
        return w;
    for (int sig = 1; sig <= GHOST_NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        if ((stale >> (sig - 1)) & 1)
            if (auto r =
                    call("rt_sigaction", SYS_rt_sigaction, sig, data(kActOff + sizeof(act)), 0, 8);
                !r)
                return r.error();
    }
    // Then every action, in one run of the loop.
    Regs r = regs0_;
    r.rip = layout_.scratch + kSetActionsOff;
    r.rbx = 1;
    r.r12 = data(kActOff);
    r.r13 = GHOST_NSIG + 1;
    auto done = t_.run_to_trap(r);
    if (!done)
        return done.error();
    if (done->rax != 0)
        return Error::from_errno(
            static_cast<int>(-static_cast<long>(done->rax)),
            fmt::format("rt_sigaction of signal {}: {}", done->rbx,
                        errno_text(static_cast<int>(-static_cast<long>(done->rax)))));
    const auto& sg = img_.signals;
    stack_t ss{};
    ss.ss_sp = reinterpret_cast<void*>(sg.altstack_sp);
    ss.ss_size = sg.altstack_size;
    ss.ss_flags = static_cast<int>(sg.altstack_flags & ~1u); // never SS_ONSTACK
    if (auto w = poke(kAltOff, std::as_bytes(std::span(&ss, 1))); !w)
        return w;
    if (auto r = call("sigaltstack", SYS_sigaltstack, data(kAltOff), 0); !r)
        return r.error();
    // Pending signals wait, blocked, until the tracer lets go.
    for (int sig = 1; sig < 32; sig++)
        if ((sg.pending >> (sig - 1)) & 1)
            if (::syscall(SYS_tgkill, t_.pid(), t_.pid(), sig) != 0)
                return Error::from_errno(
                    errno, fmt::format("queueing signal {}: {}", sig, errno_text(errno)));
    return {};
}

Result<void> Rebuild::commit() {
    if (auto r = t_.kill_on_exit(); !r)
        return r;
    for (auto step :
         {&Rebuild::unmap_caller, &Rebuild::map_image, &Rebuild::set_mm, &Rebuild::set_files,
          &Rebuild::set_locks, &Rebuild::set_task, &Rebuild::set_attrs, &Rebuild::set_signals})
        if (auto r = (this->*step)(); !r)
            return r;
    if (auto r = t_.set_xstate(xsave_); !r)
        return r;

    Regs final{};
    std::memcpy(&final, &img_.regs, sizeof(final));
    final.cs = regs0_.cs;
    final.ss = regs0_.ss;
    final.ds = regs0_.ds;
    final.es = regs0_.es;
    final.fs = regs0_.fs;
    final.gs = regs0_.gs;
    final.orig_rax = static_cast<unsigned long long>(-1); // not in a system call any more
    final.eflags = (regs0_.eflags & ~GHOST_USER_EFLAGS) | (img_.regs.flags & GHOST_USER_EFLAGS);
    // Stopped: SIGSTOP is queued while we still hold it, so the group stop
    // comes on its way back to user mode, before the image's first
    // instruction.
    return t_.call_and_release(final, img_.signals.blocked & ~kUnblockable,
                               p_.stopped ? SIGSTOP : 0, SYS_munmap, layout_.scratch, kScratchLen);
}

// The tracer's whole life: report (errno, reason) on the pipe if the caller
// is still itself, else kill it.
[[noreturn]] void tracer_main(const Plan& p, int report) {
    auto say = [report](const Error& e) {
        const std::string msg = failure_report(e);
        (void)write_all(report, std::as_bytes(std::span(msg)));
    };
    auto t = Tracee::seize(p.self);
    if (!t) {
        say(t.error());
        ::_exit(1);
    }
    Rebuild rb(p, *t);
    if (auto r = rb.prepare(); !r) {
        rb.roll_back();
        say(r.error());
        ::_exit(1);
    }
    if (auto r = rb.commit(); !r) {
        ::kill(p.self, SIGKILL);
        std::fprintf(stderr,
                     "ghost: user engine: restoring pid %d failed after the point of no "
                     "return (it is killed): %s\n",
                     p.self, r.error().what().c_str());
        ::_exit(1);
    }
    ::_exit(0);
}

// Closes every descriptor but those in keep.
void close_all_but(std::vector<int> keep) {
    std::sort(keep.begin(), keep.end());
    unsigned lo = 0;
    for (const int k : keep) {
        if (static_cast<unsigned>(k) > lo)
            ::syscall(SYS_close_range, lo, static_cast<unsigned>(k) - 1, 0);
        lo = static_cast<unsigned>(k) + 1;
    }
    ::syscall(SYS_close_range, lo, ~0U, 0);
}

} // namespace

namespace {

Error restore(const image::Image& img, std::vector<PageData> pages, bool stopped,
              Shadow* shadow = nullptr) {
    auto threads = list_numeric("/proc/self/task");
    if (!threads)
        return threads.error();
    if (threads->size() != 1)
        return Error::from_errno(EBUSY, "the importer must be single-threaded, not sharing its fs");
    if (img.xsave.size() < 512 + 64)
        return Error::from_errno(EBADMSG, "the FPU section is malformed");
    if (auto r = check_limits(img); !r)
        return r.error();
    if (auto r = check_mm(img.mm); !r)
        return r.error();
    if (auto r = check_memlock(img); !r)
        return r.error();
    if (auto r = check_advice(img); !r)
        return r.error();
    // The image's files are opened as the image's credentials (creds.cpp).
    if (auto r = assume_image_creds(img); !r)
        return r.error();
    Plan p;
    p.img = &img;
    p.pages = std::move(pages);
    p.shadow = shadow;
    if (shadow)
        if (auto r = shadow->clear_of(img); !r)
            return r.error();
    p.self = ::getpid();
    p.stopped = stopped;
    if (auto r = open_everything(p); !r)
        return r.error();
    if (auto r = take_early_locks(img, p.file_fd); !r)
        return r.error();
    // Last, as it changes the caller: put back whenever we return.
    if (auto r = prepare_attrs(img.attrs ? &*img.attrs : nullptr, p.attrs); !r)
        return r.error();
    struct Undo {
        const AttrsPlan& plan;
        ~Undo() { undo_attrs(plan); }
    } undo{p.attrs};

    // Two pipes: the tracer's pid, then its report, come on rep; go tells
    // it that it may attach.
    int rep[2], go[2];
    if (::pipe2(rep, O_CLOEXEC) != 0)
        return Error::from_errno(errno, fmt::format("pipe: {}", errno_text(errno)));
    UniqueFd rep_rd(rep[0]), rep_wr(rep[1]);
    if (::pipe2(go, O_CLOEXEC) != 0)
        return Error::from_errno(errno, fmt::format("pipe: {}", errno_text(errno)));
    UniqueFd go_rd(go[0]), go_wr(go[1]);

    // The tracer is a grandchild, orphaned at once, so that the restored
    // process has no child it does not know of.
    const pid_t mid = ::fork();
    if (mid < 0)
        return Error::from_errno(errno, fmt::format("fork: {}", errno_text(errno)));
    if (mid == 0) {
        const pid_t tracer = ::fork();
        if (tracer != 0) {
            (void)!::write(rep_wr.get(), &tracer, sizeof(tracer));
            ::_exit(0);
        }
        close_all_but({2, rep_wr.get(), go_rd.get()});
        char c;
        if (::read(go_rd.get(), &c, 1) != 1)
            ::_exit(1);
        tracer_main(p, rep_wr.get());
    }
    rep_wr.reset();
    go_rd.reset();
    pid_t tracer = -1;
    const ssize_t n = ::read(rep_rd.get(), &tracer, sizeof(tracer));
    int st;
    while (::waitpid(mid, &st, 0) < 0 && errno == EINTR) {
    }
    if (n != sizeof(tracer) || tracer <= 0)
        return Error::from_errno(EAGAIN, "could not start the user engine's restorer (fork)");
    ::prctl(PR_SET_PTRACER, tracer, 0, 0, 0); // under Yama; harmless without
    if (::write(go_wr.get(), "g", 1) != 1)
        return Error::from_errno(errno, "cannot start the user engine's restorer");

    // Here the tracer takes over. If we get past this read, it gave up
    // before the point of no return and put us back.
    std::string report;
    std::array<std::byte, 512> buf;
    for (;;) {
        auto k = read_some(rep_rd.get(), buf);
        if (!k || *k == 0)
            break;
        report.append(reinterpret_cast<const char*>(buf.data()), *k);
    }
    if (report.empty())
        return Error::from_errno(EIO, fmt::format("the user engine's restorer (pid {}) died "
                                                  "without a word",
                                                  tracer));
    return parse_failure_report(report);
}

} // namespace

Error restore_self(std::span<const std::byte> bytes, const image::Image& img, bool stopped) {
    if (img.parent)
        return Error::from_errno(EOPNOTSUPP, "the image is incremental: its chain of parents "
                                             "must be flattened first (ghost::restart does)");
    std::vector<PageData> pages;
    for (const auto& v : img.vmas)
        for (const auto& r : v.runs)
            pages.push_back({r.addr, bytes.subspan(r.data_offset, r.nr_pages * kPage)});
    return restore(img, std::move(pages), stopped);
}

Error restore_chain(const chain::Chain& c, bool stopped, Shadow* shadow) {
    std::vector<PageData> pages;
    pages.reserve(c.extents().size());
    for (const auto& e : c.extents()) {
        if (e.link == chain::kNoLink)
            return Error::from_errno(EINVAL, "restoring a chain whose parents were not followed");
        pages.push_back(
            {e.addr, c.links()[e.link].view.bytes().subspan(e.offset, e.nr_pages * kPage)});
    }
    return restore(c.top().img, std::move(pages), stopped, shadow);
}

} // namespace ghost::user
