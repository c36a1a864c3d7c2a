// SPDX-License-Identifier: LGPL-2.1-or-later
// The tracer's first half (rebuild.hpp): where its scratch mapping and the
// vDSO go, what it checks and changes before the point of no return, and the
// memory: the caller's unmapped, the image's mapped, filled and protected.
#include "user/rebuild.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ghost_policy.h"
#include "sys.hpp"
#include "user/lazy.hpp"
#include "user/vma_attrs.hpp"

namespace ghost::user::rebuild {

namespace {

bool overlaps(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
    return a < d && c < b;
}

} // namespace

// The descriptor each DUP record shares its open file with: the earlier
// record with the same file id, or in images without file ids the
// descriptor number in pos (the reader checked that it exists); -1 for the
// others. In one pass: an image may have a million descriptors.
std::vector<int> dup_sources(const image::Image& img) {
    const bool by_id = img.header.features & GHOST_IMAGE_FEAT_FILE_ID;
    std::unordered_map<std::uint64_t, int> first_fd; // by file id
    std::vector<int> out(img.files.size(), -1);
    for (std::size_t i = 0; i < img.files.size(); i++) {
        const auto& r = img.files[i].rec;
        if (r.kind != GHOST_FILE_DUP) {
            first_fd.try_emplace(r.file_id, r.fd);
        } else if (!by_id) {
            out[i] = static_cast<int>(r.pos);
        } else if (const auto f = first_fd.find(r.file_id); f != first_fd.end()) {
            out[i] = f->second;
        }
    }
    return out;
}

namespace {

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

} // namespace

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
    if (built_ahead(v.rec))
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
        if (const std::uint64_t buf = built_ahead(r)) {
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
    if (auto l = start_lazy(); !l)
        return l;
    for (const auto& v : img_.vmas)
        if (ours(v) && !built_ahead(v.rec) && !lazy(v))
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

// Whether a mapping's pages are left to the lazy restart's pager: private
// anonymous memory that no fork treats specially and that is not locked
// (mlock would fault it all in during the rebuild).
bool Rebuild::lazy(const image::Vma& v) const {
    constexpr std::uint32_t kNot = GHOST_VMA_SHARED | GHOST_VMA_FILE | GHOST_VMA_VDSO |
                                   GHOST_VMA_VVAR | GHOST_VMA_LOCKED | GHOST_VMA_LOCKONFAULT |
                                   GHOST_VMA_WIPEONFORK | GHOST_VMA_DONTFORK;
    return p_.pager >= 0 && !v.runs.empty() && !(v.rec.flags & kNot) && !built_ahead(v.rec);
}

// A lazy restart: its mappings, made empty, are named to the pager, which
// registers them with the userfaultfd and fills them, now, before anything
// could touch them (a fault would wait for it).
Result<void> Rebuild::start_lazy() {
    if (p_.pager < 0)
        return {};
    std::vector<std::uint32_t> vmas;
    for (std::size_t i = 0; i < img_.vmas.size(); i++)
        if (lazy(img_.vmas[i]))
            vmas.push_back(static_cast<std::uint32_t>(i));
    return lazy::hand_over(p_.pager, vmas);
}

// The page data that goes into mapping v (p_.pages is sorted by address).
std::span<const PageData> Rebuild::pages_of(const image::Vma& v) const {
    const auto first = std::lower_bound(
        p_.pages.begin(), p_.pages.end(), v.rec.start,
        [](const PageData& d, std::uint64_t a) { return d.addr + d.data.size() <= a; });
    const auto last =
        std::find_if(first, p_.pages.end(), [&](const PageData& d) { return d.addr >= v.rec.end; });
    return {first, last};
}

// A mapping's pages, written in from here.
Result<void> Rebuild::fill_vma(const image::Vma& v) {
    if (v.runs.empty())
        return {};
    for (const auto& pg : pages_of(v))
        if (auto w = t_.write(pg.addr, pg.data); !w)
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

} // namespace ghost::user::rebuild
