// SPDX-License-Identifier: LGPL-2.1-or-later
// The user-space image reader (the writer is in image_writer.cpp). It
// applies the checks of ghost.ko's own reader (kmod/stage.c), in the same
// order, except those that depend on the importing machine: opening paths,
// the CPU's FPU features,
// the caller's resource limits, the vDSO's place. Two bounds are the
// format's rather than one kernel's (see Documentation/image-format.md):
// user addresses end at 2^47 - 4096 (a kernel with 5-level page tables
// accepts more), and the aux vector holds up to GHOST_AUXV_WORDS words
// (Linux 6.1 keeps 48 on x86-64 with IA32 emulation, 46 without, and
// refuses more).
#include "ghost/image.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "checksum.hpp"
#include "ghost_creds.h"
#include "ghost_format.h"
#include "ghost_lock.h"
#include "ghost_vma_attrs.h"

namespace ghost::image {

// ---- reading ------------------------------------------------------------------

namespace {

constexpr std::uint64_t kPage = 4096;
// The format's bounds (uapi/linux/ghost.h), shared with kmod/stage.c. User
// space ends where it does with 4-level page tables.
constexpr std::uint64_t kUserEnd = GHOST_USER_ADDR_END;
constexpr std::uint32_t kMaxVmas = GHOST_MAX_VMAS;
constexpr std::uint32_t kMinXstate = GHOST_XSTATE_MIN;
constexpr std::uint32_t kMaxXstate = GHOST_XSTATE_MAX;
constexpr std::uint32_t kPathMax = GHOST_PATH_MAX; // counting the NUL
constexpr std::int64_t kMaxFd = GHOST_MAX_FD;
constexpr int kRlimitNofile = 7;

constexpr std::uint64_t kSaFlags = GHOST_SA_FLAGS;
constexpr std::uint32_t kSsFlags = GHOST_SS_FLAGS;
constexpr int kSigKill = 9, kSigStop = 19;
constexpr std::uint64_t kAtNull = 0;

// XSAVE layout (standard format).
constexpr std::size_t kMxcsr = 24;
constexpr std::size_t kXstateBv = 512, kXcompBv = 520, kXsaveReserved = 528;
constexpr std::uint64_t kXfeatureFpSseYmm = 0x7;

Error bad(std::string msg) {
    return Error{std::make_error_code(std::errc::bad_message), std::move(msg)};
}

bool user_addr(std::uint64_t a) {
    return a < kUserEnd;
}

template <class T> std::span<std::byte> bytes_of(T& v) {
    return std::as_writable_bytes(std::span(&v, 1));
}

template <class T> std::span<const std::byte> cbytes_of(const T& v) {
    return std::as_bytes(std::span(&v, 1));
}

template <class T> bool all_zero(const T& v) {
    const auto b = cbytes_of(v);
    return std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0}; });
}

std::uint64_t load64(std::span<const std::byte> b, std::size_t off) {
    std::uint64_t v;
    std::memcpy(&v, b.data() + off, sizeof(v));
    return v;
}

std::string name_of(std::uint32_t type) {
    const auto n = section_name(type);
    return n == "unknown" ? fmt::format("type {}", type) : std::string(n);
}

// The byte stream: exact reads, the running offset and checksum, the limit.
class Stream {
  public:
    Stream(Source& src, std::uint64_t max) : src_(src), max_(max) {}

    std::uint64_t off() const { return off_; }
    // Checksum of every byte so far (a crc32c until use_xxh64()).
    std::uint64_t sum() const { return sum_.value(); }
    void use_xxh64(std::span<const std::byte> seen) { sum_.use_xxh64(seen); }

    // placed: into its final place (Source::read_placed).
    Result<void> read(std::span<std::byte> buf, bool placed = false) {
        if (auto r = within_limit(buf.size()); !r)
            return r;
        std::size_t got = 0;
        while (got < buf.size()) {
            auto r = placed ? src_.read_placed(buf.subspan(got)) : src_.read(buf.subspan(got));
            if (!r)
                return r.error();
            if (*r > buf.size() - got)
                return Error{std::make_error_code(std::errc::io_error),
                             "the image source returned more bytes than asked for"};
            if (*r == 0) {
                account(buf.first(got));
                return bad(fmt::format("the image ends early, at byte {}", off_));
            }
            got += *r;
        }
        account(buf);
        return {};
    }

    template <class T> Result<void> read(T& v) { return read(bytes_of(v)); }

    // Past the next n bytes, unread and out of the checksum, if the source
    // can skip them (false: nothing moved).
    Result<bool> skip(std::uint64_t n) {
        if (auto r = within_limit(n); !r)
            return r.error();
        auto r = src_.skip(n);
        if (r && *r)
            off_ += n;
        return r;
    }

    // The next n bytes: in place where the source holds them in memory
    // (page data is then checksummed where it lies, not copied first), else
    // read into buf.
    Result<std::span<const std::byte>> view(std::size_t n, std::vector<std::byte>& buf) {
        if (auto r = within_limit(n); !r)
            return r.error();
        if (const auto in_place = src_.take(n); in_place.size() == n) {
            account(in_place);
            return in_place;
        }
        if (buf.size() < n)
            buf.resize(n);
        if (auto r = read(std::span(buf).first(n)); !r)
            return r.error();
        return std::span<const std::byte>(buf).first(n);
    }

    // @n bytes that must be zero; @what names them for the error.
    Result<void> zeros(std::uint64_t n, std::string_view what) {
        std::array<std::byte, 4096> buf;
        while (n) {
            const auto k = static_cast<std::size_t>(std::min<std::uint64_t>(n, buf.size()));
            const auto start = off_;
            if (auto r = read(std::span(buf).first(k)); !r)
                return r;
            for (std::size_t i = 0; i < k; i++)
                if (buf[i] != std::byte{0})
                    return bad(fmt::format("non-zero {} (byte {})", what, start + i));
            n -= k;
        }
        return {};
    }

  private:
    Result<void> within_limit(std::size_t n) const {
        if (max_ && (n > max_ || off_ > max_ - n))
            return Error{std::make_error_code(std::errc::file_too_large),
                         fmt::format("the image is larger than the limit of {} bytes (at byte {})",
                                     max_, off_)};
        return {};
    }

    void account(std::span<const std::byte> b) {
        sum_.update(b);
        off_ += b.size();
    }

    Source& src_;
    std::uint64_t max_;
    std::uint64_t off_ = 0;
    Checksum sum_;
};

struct Sec {
    ghost_section h{};
    std::uint64_t at = 0;  // stream offset of the section header
    std::uint64_t sum = 0; // checksum of the stream before the header
    std::uint64_t rec = 0; // bytes of the record that begins the payload
    // Stream offset of a field of the payload.
    std::uint64_t field(std::size_t offset) const { return at + sizeof(h) + offset; }
};

#define FIELD(sec, type, member) (sec).field(offsetof(type, member))

class Reader {
  public:
    Reader(Source& src, const ReadOptions& o) : s_(src, o.max_bytes), o_(o) {}

    Result<Image> run() {
        Result<void> r = header();
        if (r)
            r = parent();
        if (r)
            r = task();
        if (r)
            r = creds();
        if (r)
            r = attrs();
        if (r)
            r = regs();
        if (r)
            r = xstate();
        if (r)
            r = signals();
        if (r)
            r = fs();
        if (r)
            r = rlimits();
        if (r)
            r = mm();
        for (std::uint32_t i = 0; r && i < img_.mm.nr_vmas; i++)
            r = vma(i);
        if (r)
            r = tail();
        if (r)
            r = layout();
        if (!r)
            return r.error();
        return std::move(img_);
    }

  private:
    Result<void> header() {
        auto& h = img_.header;
        if (auto r = s_.read(h); !r)
            return r;
        if (h.magic != GHOST_IMAGE_MAGIC)
            return bad(fmt::format("not a ghost image: bad magic {:#018x} at byte 0", h.magic));
        if (h.version < GHOST_IMAGE_MIN_VERSION || h.version > GHOST_IMAGE_VERSION)
            return bad(fmt::format("image format version {} (byte 8) is not supported: this "
                                   "reader reads versions {} to {}",
                                   h.version, GHOST_IMAGE_MIN_VERSION, GHOST_IMAGE_VERSION));
        if (h.version == 1 ? h.header_size != sizeof(h)
                           : (h.header_size < sizeof(h) || h.header_size > GHOST_IMAGE_HEADER_MAX ||
                              h.header_size % 8))
            return bad(
                fmt::format("the image header size is {} (byte 12), expected {}", h.header_size,
                            h.version == 1 ? fmt::format("{}", sizeof(h))
                                           : fmt::format("a multiple of 8 from {} to {}", sizeof(h),
                                                         GHOST_IMAGE_HEADER_MAX)));
        if (h.arch != GHOST_ARCH_X86_64)
            return bad(fmt::format("the image is for architecture {} (byte 16), not x86-64 ({})",
                                   h.arch, GHOST_ARCH_X86_64));
        if (h.page_size != kPage)
            return bad(
                fmt::format("the image's page size is {} (byte 20), not {}", h.page_size, kPage));
        if (h.__pad || !all_zero(h.resv) || (h.version == 1 && (h.features || h.required_features)))
            return bad("the image header has non-zero reserved fields (bytes 36-63)");
        if (h.required_features & ~h.features)
            return bad(fmt::format("the image header requires features {:#x} (byte 48) that it "
                                   "does not use (byte 40)",
                                   h.required_features & ~h.features));
        if (const auto unknown = h.required_features & ~GHOST_IMAGE_FEATURES)
            return bad(fmt::format("the image requires feature bit {} (byte 48), which this "
                                   "reader does not know",
                                   std::countr_zero(unknown)));
        // The checksum covers the header too: restart it over the bytes read.
        if (h.features & GHOST_IMAGE_FEAT_XXH64)
            s_.use_xxh64(bytes_of(h));
        if (h.header_size > sizeof(h)) {
            if (auto r = s_.zeros(
                    h.header_size - sizeof(h),
                    fmt::format("header bytes beyond the {} this reader knows", sizeof(h)));
                !r)
                return r;
        }
        return {};
    }

    // The next section header (its flags checked), at an 8-aligned offset.
    // Skippable sections of unknown types are read past (their bytes still
    // count in the checksum); an unknown type that is not skippable is
    // refused. Of a known type, the record size is checked against the
    // section: from version 2 it is in the header, in version 1 it is fixed.
    Result<Sec> next() {
        if (peeked_) { // read ahead by an optional section's reader
            const Sec s = *peeked_;
            peeked_.reset();
            return s;
        }
        const bool v1 = img_.header.version == 1;
        for (;;) {
            Sec s;
            s.at = s_.off();
            s.sum = s_.sum();
            if (auto r = s_.read(s.h); !r)
                return r.error();
            if ((s.h.flags & ~GHOST_SECTION_FLAGS) || (v1 && (s.h.flags || s.h.record_size)))
                return bad(fmt::format("the {} section at byte {} has unknown flags {:#x}",
                                       name_of(s.h.type), s.at,
                                       v1 ? (s.h.flags | s.h.record_size << 16) : s.h.flags));
            const auto known = ghost_record_min_size(s.h.type, img_.header.version);
            if (!known && !(s.h.flags & GHOST_SECTION_SKIPPABLE))
                return bad(fmt::format("section type {} at byte {} is unknown to this reader and "
                                       "not skippable",
                                       s.h.type, s.at));
            if (!known) {
                if (auto r = skip(s.h.size); !r)
                    return r.error();
                img_.exact = false;
                img_.skipped++;
                continue;
            }
            s.rec = v1 ? known : s.h.record_size;
            if (s.rec < known)
                return bad(fmt::format("the {} section at byte {} has a {}-byte record, shorter "
                                       "than the {} bytes of version 1",
                                       name_of(s.h.type), s.at, s.rec, known));
            if (s.h.size < s.rec)
                return bad(fmt::format("the {} section at byte {} has {} bytes, too short for its "
                                       "{}-byte record",
                                       name_of(s.h.type), s.at, s.h.size, s.rec));
            // What encode() writes: END holds no XXH64 unless the image uses it.
            const auto canon =
                s.h.type == GHOST_SEC_END && !(img_.header.features & GHOST_IMAGE_FEAT_XXH64)
                    ? GHOST_END_SIZE_VER1
                    : record_size(s.h.type, GHOST_IMAGE_VERSION);
            if (s.rec != canon && (!v1 || s.rec > canon))
                img_.exact = false;
            return s;
        }
    }

    // The payload and padding of a skipped section, unseen.
    Result<void> skip(std::uint64_t size) {
        std::array<std::byte, 4096> buf;
        for (std::uint64_t n : {size, (8 - size % 8) % 8}) // no sum: size may be near 2^64
            while (n) {
                const auto k = static_cast<std::size_t>(std::min<std::uint64_t>(n, buf.size()));
                if (auto r = s_.read(std::span(buf).first(k)); !r)
                    return r;
                n -= k;
            }
        return {};
    }

    // The record that begins the payload of @s: a shorter (older) one reads
    // as if its missing tail were zero, a longer (newer) one only when the
    // part this reader does not know is zero.
    template <class T> Result<void> record(const Sec& s, T& rec) {
        rec = T{};
        const auto n = std::min<std::uint64_t>(s.rec, sizeof(T));
        if (auto r = s_.read(bytes_of(rec).first(n)); !r)
            return r;
        if (s.rec > sizeof(T))
            return s_.zeros(s.rec - sizeof(T),
                            fmt::format("bytes beyond the {} this reader knows of the {}-byte {} "
                                        "record at byte {}",
                                        sizeof(T), s.rec, name_of(s.h.type), s.at));
        return {};
    }

    // A section of @type; its record's size is checked by next().
    Result<Sec> expect(std::uint32_t type) {
        auto s = next();
        if (!s)
            return s;
        if (s->h.type != type)
            return bad(fmt::format("expected section {} at byte {}, found section {}",
                                   name_of(type), s->at, name_of(s->h.type)));
        return s;
    }

    // The payload ends after @fixed + @tail bytes, then the padding.
    Result<void> size_is(const Sec& s, std::uint64_t want) {
        if (s.h.size != want)
            return bad(fmt::format("the {} section at byte {} has {} bytes, expected {}",
                                   name_of(s.h.type), s.at, s.h.size, want));
        return {};
    }

    Result<void> pad(const Sec& s) {
        return s_.zeros(
            (8 - s.h.size % 8) % 8,
            fmt::format("padding after the {} section at byte {}", name_of(s.h.type), s.at));
    }

    template <class T> Result<Sec> fixed(std::uint32_t type, T& rec) {
        auto s = expect(type);
        if (!s)
            return s;
        if (auto r = size_is(*s, s->rec); !r)
            return r.error();
        if (auto r = record(*s, rec); !r)
            return r.error();
        if (auto r = pad(*s); !r)
            return r.error();
        return s;
    }

    // A name of @len bytes after a @fixed-byte record; @absolute when it is a
    // path to open (an inherited descriptor's name is informational).
    Result<std::string> path(const Sec& s, std::size_t fixed, std::uint32_t len, bool absolute,
                             std::uint64_t len_at) {
        if (len == 0 || len >= kPathMax)
            return bad(fmt::format("the {} section at byte {} has a path of length {} (byte {}): "
                                   "must be 1 to {}",
                                   name_of(s.h.type), s.at, len, len_at, kPathMax - 1));
        if (auto r = size_is(s, fixed + len); !r)
            return r.error();
        std::string p(len, '\0');
        const auto at = s_.off();
        if (auto r = s_.read(std::as_writable_bytes(std::span(p))); !r)
            return r.error();
        if (auto r = pad(s); !r)
            return r.error();
        if (const auto nul = p.find('\0'); nul != std::string::npos)
            return bad(fmt::format("the path in the {} section at byte {} has a NUL at byte {}",
                                   name_of(s.h.type), s.at, at + nul));
        if (absolute && p[0] != '/')
            return bad(fmt::format("the path in the {} section at byte {} is not absolute: {}",
                                   name_of(s.h.type), s.at, p));
        return p;
    }

    // In incremental images (GHOST_IMAGE_FEAT_PARENT), right after the
    // header: which image this one builds on.
    Result<void> parent() {
        if (!(img_.header.features & GHOST_IMAGE_FEAT_PARENT))
            return {};
        ghost_parent p{};
        auto s = expect(GHOST_SEC_PARENT);
        if (!s)
            return s.error();
        if (auto r = record(*s, p); !r)
            return r;
        const std::string where = fmt::format("the parent section at byte {}", s->at);
        if (!all_zero(p.resv))
            return bad(where + " has non-zero reserved fields");
        if (p.depth == 0 || p.depth > GHOST_PARENT_DEPTH_MAX)
            return bad(fmt::format("{}: depth {} (byte {}) must be 1 to {}", where, p.depth,
                                   FIELD(*s, ghost_parent, depth), GHOST_PARENT_DEPTH_MAX));
        if (p.pid != img_.header.pid)
            return bad(fmt::format("{}: pid {} (byte {}) is not the header's {}", where, p.pid,
                                   FIELD(*s, ghost_parent, pid), img_.header.pid));
        // The smallest whole image: a header and an END.
        if (p.bytes < sizeof(ghost_image_header) + sizeof(ghost_section) + GHOST_END_SIZE_VER1 ||
            p.bytes % 8)
            return bad(fmt::format("{}: the parent's size {} (byte {}) is not an image's", where,
                                   p.bytes, FIELD(*s, ghost_parent, bytes)));
        auto path_hint = path(*s, s->rec, p.path_len, false, FIELD(*s, ghost_parent, path_len));
        if (!path_hint)
            return path_hint.error();
        img_.parent = p;
        img_.parent_path = std::move(*path_hint);
        return {};
    }

    Result<void> task() {
        auto& t = img_.task;
        auto s = fixed(GHOST_SEC_TASK, t);
        if (!s)
            return s.error();
        const std::string where = fmt::format("the task section at byte {}", s->at);
        if (t.__pad || !all_zero(t.resv))
            return bad(where + " has non-zero reserved fields");
        if (!user_addr(t.rseq))
            return bad(fmt::format("{}: the rseq area {:#x} (byte {}) is not a user address", where,
                                   t.rseq, FIELD(*s, ghost_task, rseq)));
        if (!user_addr(t.clear_child_tid))
            return bad(fmt::format("{}: clear_child_tid {:#x} (byte {}) is not a user address",
                                   where, t.clear_child_tid,
                                   FIELD(*s, ghost_task, clear_child_tid)));
        if (!user_addr(t.robust_list))
            return bad(fmt::format("{}: the robust list {:#x} (byte {}) is not a user address",
                                   where, t.robust_list, FIELD(*s, ghost_task, robust_list)));
        if (t.robust_list && t.robust_list_len != 24)
            return bad(fmt::format("{}: robust_list_len is {} (byte {}), not 24", where,
                                   t.robust_list_len, FIELD(*s, ghost_task, robust_list_len)));
        // rseq(2)'s rule: a misaligned area would fail the restore past
        // the user engine's point of no return.
        if (t.rseq % GHOST_RSEQ_LEN)
            return bad(fmt::format("{}: the rseq area {:#x} (byte {}) is not 32-byte aligned",
                                   where, t.rseq, FIELD(*s, ghost_task, rseq)));
        if (t.rseq && t.rseq_len != 32)
            return bad(fmt::format("{}: rseq_len is {} (byte {}), not 32", where, t.rseq_len,
                                   FIELD(*s, ghost_task, rseq_len)));
        return {};
    }

    // In images with GHOST_IMAGE_FEAT_CREDS, right after the task.
    Result<void> creds() {
        if (!(img_.header.features & GHOST_IMAGE_FEAT_CREDS))
            return {};
        ghost_creds c{};
        auto s = expect(GHOST_SEC_CREDS);
        if (!s)
            return s.error();
        if (auto r = record(*s, c); !r)
            return r;
        char why[GHOST_REASON_LEN];
        if (ghost_creds_valid(&c, why, sizeof(why)))
            return bad(fmt::format("{} at byte {}", why, s->at));
        if (auto r = size_is(*s, s->rec + std::uint64_t{c.ngroups} * 4); !r)
            return r;
        img_.groups.resize(c.ngroups);
        if (auto r = s_.read(std::as_writable_bytes(std::span(img_.groups))); !r)
            return r;
        if (auto r = pad(*s); !r)
            return r;
        img_.creds = c;
        return {};
    }

    // ATTRS follows the task (or CREDS) exactly when the header has
    // GHOST_IMAGE_FEAT_ATTRS; the ranges are those the kernel accepts.
    Result<void> attrs() {
        auto s = next();
        if (!s)
            return s.error();
        const bool want = img_.header.features & GHOST_IMAGE_FEAT_ATTRS;
        if (s->h.type != GHOST_SEC_ATTRS) {
            if (want)
                return bad(fmt::format("the header has the ATTRS feature (byte 40) but the {} "
                                       "section at byte {} follows the task, not attrs",
                                       name_of(s->h.type), s->at));
            peeked_ = *s;
            return {};
        }
        if (!want)
            return bad(fmt::format("the attrs section at byte {} is in an image without the "
                                   "ATTRS feature (byte 40)",
                                   s->at));
        ghost_attrs a{};
        if (auto r = size_is(*s, s->rec); !r)
            return r;
        if (auto r = record(*s, a); !r)
            return r;
        if (auto r = pad(*s); !r)
            return r;
        const std::string where = fmt::format("the attrs section at byte {}", s->at);
        if (a.flags & ~static_cast<std::uint32_t>(GHOST_ATTRS_FLAGS))
            return bad(fmt::format("{} has unknown flags {:#x} (byte {})", where,
                                   a.flags & ~static_cast<std::uint32_t>(GHOST_ATTRS_FLAGS),
                                   FIELD(*s, ghost_attrs, flags)));
        if (a.membarrier & ~static_cast<std::uint32_t>(GHOST_MEMBARRIER_FLAGS))
            return bad(
                fmt::format("{} has unknown membarrier registrations {:#x} (byte {})", where,
                            a.membarrier & ~static_cast<std::uint32_t>(GHOST_MEMBARRIER_FLAGS),
                            FIELD(*s, ghost_attrs, membarrier)));
        if (a.oom_score_adj < -1000 || a.oom_score_adj > 1000)
            return bad(fmt::format("{}: oom_score_adj {} (byte {}) is not in -1000..1000", where,
                                   a.oom_score_adj, FIELD(*s, ghost_attrs, oom_score_adj)));
        if (a.nice < -20 || a.nice > 19)
            return bad(fmt::format("{}: nice {} (byte {}) is not in -20..19", where, a.nice,
                                   FIELD(*s, ghost_attrs, nice)));
        if (!all_zero(a.resv))
            return bad(fmt::format("{} has non-zero reserved fields (byte {})", where,
                                   FIELD(*s, ghost_attrs, resv)));
        img_.attrs = a;
        return {};
    }

    Result<void> regs() {
        auto& r = img_.regs;
        auto s = fixed(GHOST_SEC_REGS, r);
        if (!s)
            return s.error();
        const auto check = [&](bool ok, std::string_view what, std::uint64_t v,
                               std::size_t off) -> Result<void> {
            if (ok)
                return {};
            return bad(fmt::format("the registers at byte {} are not those of a 64-bit user "
                                   "process: {} is {:#x} (byte {})",
                                   s->at, what, v, s->field(off)));
        };
        Result<void> res = check(r.cs == 0x33, "cs", r.cs, offsetof(ghost_regs, cs));
        if (res)
            res = check(r.ss == 0x2b, "ss", r.ss, offsetof(ghost_regs, ss));
        if (res)
            res = check(r.fs == 0, "the fs selector", r.fs, offsetof(ghost_regs, fs));
        if (res)
            res = check(r.gs == 0, "the gs selector", r.gs, offsetof(ghost_regs, gs));
        if (res)
            res = check(user_addr(r.ip), "ip", r.ip, offsetof(ghost_regs, ip));
        if (res)
            res = check(user_addr(r.fs_base), "fs_base", r.fs_base, offsetof(ghost_regs, fs_base));
        if (res)
            res = check(user_addr(r.gs_base), "gs_base", r.gs_base, offsetof(ghost_regs, gs_base));
        return res;
    }

    // What XRSTOR would refuse on any CPU; the features themselves are the
    // importing CPU's business.
    Result<void> xstate() {
        auto& x = img_.xstate;
        auto s = expect(GHOST_SEC_XSTATE);
        if (!s)
            return s.error();
        if (auto r = record(*s, x); !r)
            return r;
        if (x.__pad)
            return bad(fmt::format("the FPU section at byte {} has non-zero padding", s->at));
        if (x.size < kMinXstate || x.size > kMaxXstate)
            return bad(fmt::format("the FPU section at byte {} holds {} bytes of XSAVE data "
                                   "(byte {}): must be {} to {}",
                                   s->at, x.size, FIELD(*s, ghost_xstate, size), kMinXstate,
                                   kMaxXstate));
        if (auto r = size_is(*s, s->rec + x.size); !r)
            return r;
        const auto data_at = s_.off();
        img_.xsave.resize(x.size);
        if (auto r = s_.read(std::span(img_.xsave)); !r)
            return r;
        if (auto r = pad(*s); !r)
            return r;
        const auto xsave = std::span<const std::byte>(img_.xsave);
        if (load64(xsave, kXcompBv))
            return bad(fmt::format("the XSAVE header at byte {} is in the compacted format "
                                   "(xcomp_bv {:#x}): the format is the standard one",
                                   data_at + kXcompBv, load64(xsave, kXcompBv)));
        for (std::size_t i = kXsaveReserved; i < kMinXstate; i += 8)
            if (load64(xsave, i))
                return bad(fmt::format("the XSAVE header has non-zero reserved bytes at byte {}",
                                       data_at + i));
        std::uint32_t mxcsr;
        std::memcpy(&mxcsr, xsave.data() + kMxcsr, sizeof(mxcsr));
        if ((load64(xsave, kXstateBv) & kXfeatureFpSseYmm) && (mxcsr & 0xffff0000u))
            return bad(fmt::format("MXCSR {:#x} (byte {}) has reserved bits set", mxcsr,
                                   data_at + kMxcsr));
        return {};
    }

    Result<void> signals() {
        auto& sg = img_.signals;
        auto s = fixed(GHOST_SEC_SIGNALS, sg);
        if (!s)
            return s.error();
        for (int i = 0; i < GHOST_NSIG; i++) {
            const auto& a = sg.action[i];
            const int sig = i + 1;
            const auto at = s->field(offsetof(ghost_signals, action) + i * sizeof(a));
            if (a.flags & ~kSaFlags)
                return bad(fmt::format("the action of signal {} (byte {}) has unknown flags {:#x}",
                                       sig, at, a.flags & ~kSaFlags));
            if (!user_addr(a.restorer))
                return bad(fmt::format("the action of signal {} (byte {}) has restorer {:#x}, "
                                       "not a user address",
                                       sig, at, a.restorer));
            if ((sig == kSigKill || sig == kSigStop) && a.handler != 0)
                return bad(fmt::format("the action of signal {} (byte {}) is not the default: "
                                       "SIGKILL and SIGSTOP cannot be caught",
                                       sig, at));
        }
        const std::string where = fmt::format("the signal section at byte {}", s->at);
        if (sg.__pad)
            return bad(where + " has non-zero padding");
        if (sg.pending & ~GHOST_SIG_PENDING_MASK)
            return bad(fmt::format("{}: pending {:#x} (byte {}) holds real-time or unknown "
                                   "signals",
                                   where, sg.pending, FIELD(*s, ghost_signals, pending)));
        // Never exported; the user engine would send them into the process
        // it is rebuilding.
        if (sg.pending & ((1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1))))
            return bad(fmt::format("{}: pending {:#x} (byte {}) holds SIGKILL or SIGSTOP", where,
                                   sg.pending, FIELD(*s, ghost_signals, pending)));
        if (sg.altstack_flags & ~kSsFlags)
            return bad(fmt::format("{}: the alternate stack has unknown flags {:#x} (byte {})",
                                   where, sg.altstack_flags,
                                   FIELD(*s, ghost_signals, altstack_flags)));
        if (!user_addr(sg.altstack_sp))
            return bad(fmt::format("{}: the alternate stack {:#x} (byte {}) is not a user address",
                                   where, sg.altstack_sp, FIELD(*s, ghost_signals, altstack_sp)));
        // sigaltstack(2)'s rule: the user engine would meet its ENOMEM past
        // its point of no return. (Size 0 is no stack, whatever the flags:
        // ghost.ko records the task's own flags, 0 for a task that never
        // had one.)
        if (sg.altstack_size && !(sg.altstack_flags & GHOST_SS_DISABLE) &&
            sg.altstack_size < GHOST_MINSIGSTKSZ)
            return bad(fmt::format("{}: the alternate stack's size {} (byte {}) is below "
                                   "MINSIGSTKSZ ({})",
                                   where, sg.altstack_size, FIELD(*s, ghost_signals, altstack_size),
                                   GHOST_MINSIGSTKSZ));
        return {};
    }

    Result<void> fs() {
        ghost_fs f{};
        auto s = expect(GHOST_SEC_FS);
        if (!s)
            return s.error();
        if (auto r = record(*s, f); !r)
            return r;
        auto p = path(*s, s->rec, f.cwd_len, true, FIELD(*s, ghost_fs, cwd_len));
        if (!p)
            return p.error();
        img_.umask = f.umask;
        img_.cwd = std::move(*p);
        return {};
    }

    Result<void> rlimits() {
        auto& rl = img_.rlimits;
        auto s = fixed(GHOST_SEC_RLIMITS, rl);
        if (!s)
            return s.error();
        for (int i = 0; i < GHOST_NRLIMITS; i++) {
            const auto at = s->field(i * sizeof(rl.rlim[0]));
            if (rl.rlim[i].cur > rl.rlim[i].max)
                return bad(fmt::format("limit {} (byte {}): the soft limit {} is above the hard "
                                       "limit {}",
                                       i, at, rl.rlim[i].cur, rl.rlim[i].max));
            if (i == kRlimitNofile && rl.rlim[i].max > static_cast<std::uint64_t>(kMaxFd))
                return bad(fmt::format("the file limit {} (byte {}) is above {}", rl.rlim[i].max,
                                       at + 8, kMaxFd));
        }
        return {};
    }

    Result<void> mm() {
        auto& m = img_.mm;
        auto s = fixed(GHOST_SEC_MM, m);
        if (!s)
            return s.error();
        mm_ = *s;
        const std::string where = fmt::format("the memory layout section at byte {}", s->at);
        if (m.nr_vmas == 0 || m.nr_vmas > kMaxVmas)
            return bad(fmt::format("{}: {} mappings (byte {}), must be 1 to {}", where, m.nr_vmas,
                                   FIELD(*s, ghost_mm, nr_vmas), kMaxVmas));
        if (m.auxv_words < 2 || m.auxv_words > GHOST_AUXV_WORDS || (m.auxv_words & 1))
            return bad(fmt::format("{}: auxv_words is {} (byte {}): must be an even number from "
                                   "2 to {}",
                                   where, m.auxv_words, FIELD(*s, ghost_mm, auxv_words),
                                   GHOST_AUXV_WORDS));
        if (m.auxv[m.auxv_words - 2] != kAtNull)
            return bad(fmt::format(
                "{}: the aux vector does not end with AT_NULL (byte {})", where,
                s->field(offsetof(ghost_mm, auxv) + (m.auxv_words - 2) * sizeof(m.auxv[0]))));
        struct Pair {
            const char* lo_name;
            std::uint64_t lo;
            const char* hi_name;
            std::uint64_t hi;
        };
        for (const Pair& p : {Pair{"start_brk", m.start_brk, "brk", m.brk},
                              Pair{"arg_start", m.arg_start, "arg_end", m.arg_end},
                              Pair{"env_start", m.env_start, "env_end", m.env_end}})
            if (p.lo > p.hi)
                return bad(fmt::format("{}: {} {:#x} is above {} {:#x}", where, p.lo_name, p.lo,
                                       p.hi_name, p.hi));
        struct Addr {
            const char* name;
            std::uint64_t v;
            std::size_t off;
        };
        for (const Addr& a : {Addr{"brk", m.brk, offsetof(ghost_mm, brk)},
                              Addr{"arg_end", m.arg_end, offsetof(ghost_mm, arg_end)},
                              Addr{"env_end", m.env_end, offsetof(ghost_mm, env_end)},
                              Addr{"start_stack", m.start_stack, offsetof(ghost_mm, start_stack)},
                              Addr{"end_code", m.end_code, offsetof(ghost_mm, end_code)},
                              Addr{"end_data", m.end_data, offsetof(ghost_mm, end_data)}})
            if (!user_addr(a.v))
                return bad(fmt::format("{}: {} {:#x} (byte {}) is not a user address", where,
                                       a.name, a.v, s->field(a.off)));
        if (!(img_.header.features & GHOST_IMAGE_FEAT_VDSO_ID)
                ? (m.vdso_size || m.vdso_crc32c)
                : (!m.vdso_size || m.vdso_size % kPage))
            return bad(fmt::format("{}: vdso_size {} (byte {}) does not fit the image's vDSO "
                                   "feature bit",
                                   where, m.vdso_size, FIELD(*s, ghost_mm, vdso_size)));
        return {};
    }

    Result<void> vma(std::uint32_t idx) {
        Vma v;
        auto& r = v.rec;
        auto s = expect(GHOST_SEC_VMA);
        if (!s)
            return s.error();
        if (auto res = record(*s, r); !res)
            return res;
        const auto pages = (r.end - r.start) / kPage;
        const auto what = [&](std::string_view why) {
            return bad(fmt::format("the mapping {:#x}-{:#x} (section at byte {}) {}", r.start,
                                   r.end, s->at, why));
        };
        if (r.__pad)
            return what("has non-zero padding");
        if ((r.start | r.end) % kPage)
            return what("is not page-aligned");
        if (r.start >= r.end)
            return what("is empty or inverted");
        if (r.end > kUserEnd)
            return what("ends above user space");
        if (idx && r.start < img_.vmas.back().rec.end)
            return what(fmt::format("overlaps or precedes the mapping before it, which ends at "
                                    "{:#x}",
                                    img_.vmas.back().rec.end));
        if (r.prot & ~7u)
            return what(fmt::format("has unknown protection bits {:#x}", r.prot));
        if (r.flags & ~static_cast<std::uint32_t>(GHOST_VMA_FLAGS))
            return what(fmt::format("has unknown flags {:#x}", r.flags));
        if (!ghost_vma_attrs_valid(r.flags, img_.header.features))
            return what(fmt::format("has attributes {:#x} that are not allowed here",
                                    r.flags & GHOST_VMA_ATTRS));
        if (r.nr_pages > pages)
            return what(fmt::format("carries {} pages but has only {}", r.nr_pages, pages));
        if (!(r.flags & GHOST_VMA_FILE) != !r.path_len)
            return what((r.flags & GHOST_VMA_FILE) ? "is a file mapping without a path"
                                                   : "is anonymous but has a path");
        if ((r.flags & GHOST_VMA_SHARED) && !(r.flags & GHOST_VMA_FILE))
            return what("is shared but not a file mapping");
        if ((r.flags & (GHOST_VMA_SHARED | GHOST_VMA_VDSO | GHOST_VMA_VVAR)) && r.nr_pages)
            return what("carries pages but is shared or the vDSO");
        if ((r.flags & GHOST_VMA_FILE) && (r.flags & GHOST_VMA_GROWSDOWN))
            return what("is a file mapping that grows down (mmap() makes none)");
        // As mmap() sees it: the byte offset plus the length stays within
        // the largest file offset (2^63 - 1), or mmap() would refuse it.
        constexpr std::uint64_t kMaxFileOffset = ~0ULL >> 1;
        if ((r.flags & GHOST_VMA_FILE) && r.pgoff > (kMaxFileOffset - (r.end - r.start)) / kPage)
            return what(fmt::format("has file offset page {}, past the largest file", r.pgoff));
        if (r.flags & GHOST_VMA_FILE) {
            auto p = path(*s, s->rec, r.path_len, true, FIELD(*s, ghost_vma, path_len));
            if (!p)
                return p.error();
            v.path = std::move(*p);
        } else {
            if (auto res = size_is(*s, s->rec); !res)
                return res;
            if (auto res = pad(*s); !res)
                return res;
        }
        std::uint64_t carried = 0;
        while (carried < r.nr_pages)
            if (auto res = run(v, carried); !res)
                return res;
        img_.vmas.push_back(std::move(v));
        return {};
    }

    Result<void> run(Vma& v, std::uint64_t& carried) {
        const auto& vr = v.rec;
        ghost_pages p{};
        auto s = expect(GHOST_SEC_PAGES);
        if (!s)
            return s.error();
        if (auto r = record(*s, p); !r)
            return r;
        const auto what = [&](std::string_view why) {
            return bad(fmt::format("the page run at byte {} ({} page{} at {:#x}, mapping "
                                   "{:#x}-{:#x}) {}",
                                   s->at, p.nr_pages, p.nr_pages == 1 ? "" : "s", p.addr, vr.start,
                                   vr.end, why));
        };
        if (p.flags & ~static_cast<std::uint32_t>(GHOST_PAGES_FLAGS))
            return what(fmt::format("has unknown flags {:#x}", p.flags));
        const bool inherited = p.flags & GHOST_PAGES_PARENT;
        if (inherited && !img_.parent)
            return what("is inherited from a parent, but the image has none");
        if (inherited ? p.data_offset != 0 : p.data_offset < s->rec)
            return what(
                fmt::format("has data_offset {}, {}", p.data_offset,
                            inherited ? "not 0 in a run without data" : "inside its own record"));
        if (p.nr_pages == 0)
            return what("is empty");
        if (p.addr % kPage)
            return what("is not page-aligned");
        if (p.addr < vr.start || p.addr >= vr.end)
            return what("starts outside its mapping");
        // Overflow-free: nr_pages is not trusted to be small.
        if (p.nr_pages > (vr.end - p.addr) / kPage)
            return what("ends past its mapping");
        if (!v.runs.empty() && p.addr < v.runs.back().addr + v.runs.back().nr_pages * kPage)
            return what("overlaps or precedes the run before it");
        if (p.nr_pages > vr.nr_pages - carried)
            return what(
                fmt::format("brings the mapping's pages above its nr_pages {}", vr.nr_pages));
        if (inherited) {
            if (auto r = size_is(*s, s->rec); !r)
                return r;
            if (auto r = pad(*s); !r)
                return r;
            carried += p.nr_pages;
            v.runs.push_back({p.addr, p.nr_pages, 0, true});
            return {};
        }
        if (s->h.size != p.data_offset + p.nr_pages * kPage)
            return what(fmt::format("has a section size of {}, expected {}", s->h.size,
                                    p.data_offset + p.nr_pages * kPage));
        if ((s->field(0) + p.data_offset) % kPage)
            return what(fmt::format("has its data at byte {}, not page-aligned",
                                    s->field(0) + p.data_offset));
        if (auto r = s_.zeros(p.data_offset - s->rec,
                              fmt::format("padding in the page run at byte {}", s->at));
            !r)
            return r;

        PageRun run{p.addr, p.nr_pages, s_.off()};
        std::uint64_t done = 0;
        if (o_.skip_pages && !o_.on_pages && !o_.place) { // the whole run, unread
            auto skipped = s_.skip(p.nr_pages * kPage);
            if (!skipped)
                return skipped.error();
            if (*skipped) {
                img_.unchecked = true;
                done = p.nr_pages;
            }
        }
        for (; done < p.nr_pages;) {
            const auto n = std::min<std::uint64_t>(p.nr_pages - done, kPagesChunk / kPage);
            const PageRun part{p.addr + done * kPage, n, s_.off()};
            const std::size_t len = static_cast<std::size_t>(n * kPage);
            const std::span<std::byte> to =
                o_.place ? o_.place(img_, v, part) : std::span<std::byte>{};
            Result<std::span<const std::byte>> data = std::span<const std::byte>(to);
            if (to.size() == len) {
                if (auto r = s_.read(to, true); !r)
                    return r;
            } else {
                data = s_.view(len, chunk_);
            }
            if (!data)
                return data.error();
            if (o_.on_pages)
                if (auto r = o_.on_pages(v, part, *data); !r)
                    return r;
            done += n;
        }
        carried += p.nr_pages;
        v.runs.push_back(run);
        return {};
    }

    // FILE sections, LOCK sections (GHOST_IMAGE_FEAT_LOCKS), then END.
    Result<void> tail() {
        const bool locks = img_.header.features & GHOST_IMAGE_FEAT_LOCKS;
        for (;;) {
            auto s = next();
            if (!s)
                return s.error();
            if (s->h.type == GHOST_SEC_LOCK && locks) {
                if (auto r = lock(*s); !r)
                    return r;
                continue;
            }
            if (s->h.type == GHOST_SEC_FILE && img_.locks.empty()) {
                if (auto r = file(*s); !r)
                    return r;
                continue;
            }
            if (s->h.type != GHOST_SEC_END)
                return bad(
                    fmt::format("unexpected section {} at byte {}: expected a file, a lock or the "
                                "end section",
                                name_of(s->h.type), s->at));
            ghost_end e{};
            if (auto r = size_is(*s, s->rec); !r)
                return r;
            if (auto r = record(*s, e); !r)
                return r;
            if (auto r = check_end(*s, e); !r)
                return r;
            img_.crc32c = e.crc32c;
            img_.xxh64 = e.xxh64;
            img_.bytes = s_.off();
            return {};
        }
    }

    // END against the checksum of the bytes before it: an XXH64 in images
    // with GHOST_IMAGE_FEAT_XXH64 (their END record must hold one), else a
    // crc32c (the field the other kind does not use is zero).
    Result<void> check_end(const Sec& s, const ghost_end& e) {
        const bool xxh = img_.header.features & GHOST_IMAGE_FEAT_XXH64;
        if (e.__pad)
            return bad(fmt::format("the end section at byte {} has non-zero padding", s.at));
        if (e.bytes != s.at)
            return bad(
                fmt::format("the end section at byte {} says it is at byte {}", s.at, e.bytes));
        if (xxh && s.rec < offsetof(ghost_end, xxh64) + sizeof(e.xxh64))
            return bad(fmt::format("the image's checksum is an XXH64 (header feature bit 7), but "
                                   "its end section at byte {} has a {}-byte record, without one",
                                   s.at, s.rec));
        if (xxh ? e.crc32c != 0 : e.xxh64 != 0)
            return bad(fmt::format("the end section at byte {} holds {} in an image whose "
                                   "checksum is {}",
                                   s.at, xxh ? "a crc32c" : "an xxh64",
                                   xxh ? "an XXH64" : "a crc32c"));
        if (img_.unchecked) // page data skipped (skip_pages): no sum to compare
            return {};
        if (xxh && e.xxh64 != s.sum)
            return bad(fmt::format("checksum mismatch: the image is corrupted (the {} bytes "
                                   "before the end section have xxh64 {:#018x}, it says {:#018x})",
                                   s.at, s.sum, e.xxh64));
        if (!xxh && e.crc32c != s.sum)
            return bad(fmt::format("checksum mismatch: the image is corrupted (the {} bytes "
                                   "before the end section have crc32c {:#010x}, it says "
                                   "{:#010x})",
                                   s.at, s.sum, e.crc32c));
        return {};
    }

    Result<void> file(const Sec& s) {
        File f;
        auto& r = f.rec;
        if (auto res = record(s, r); !res)
            return res;
        auto p =
            path(s, s.rec, r.path_len, r.kind == GHOST_FILE_PATH, FIELD(s, ghost_file, path_len));
        if (!p)
            return p.error();
        f.path = std::move(*p);
        const auto what = [&](std::string_view why) {
            return bad(fmt::format("the file section of fd {} at byte {} {}", r.fd, s.at, why));
        };
        if (r.fd < 0 || r.fd >= kMaxFd)
            return what(fmt::format("has a descriptor out of range (0 to {})", kMaxFd - 1));
        if (!img_.files.empty() && r.fd <= img_.files.back().rec.fd)
            return what(fmt::format("does not come after fd {}: descriptors must ascend",
                                    img_.files.back().rec.fd));
        if (r.fd_flags & ~1u) // FD_CLOEXEC
            return what(fmt::format("has unknown descriptor flags {:#x}", r.fd_flags));
        if (r.kind != GHOST_FILE_PATH && r.kind != GHOST_FILE_INHERIT && r.kind != GHOST_FILE_DUP)
            return what(fmt::format("has unknown kind {}", r.kind));
        if (r.kind == GHOST_FILE_INHERIT && !ghost_file_inheritable(r.mode))
            return what(
                fmt::format("is inherited but is not a pipe or a terminal (mode {:#o})", r.mode));
        if (r.kind == GHOST_FILE_PATH && !ghost_file_reopenable(r.mode))
            return what(fmt::format("is reopened by path but is not a file, a directory or a "
                                    "device (mode {:#o})",
                                    r.mode));
        if (!(img_.header.features & GHOST_IMAGE_FEAT_FILE_ID)) {
            if (r.file_id)
                return what(fmt::format("has file id {} in an image without file ids", r.file_id));
        } else if (!r.file_id) {
            return what("has no file id");
        } else if (r.kind != GHOST_FILE_DUP && r.file_id <= last_file_id_) {
            return what(fmt::format("opens file id {}, not above the last one, {}", r.file_id,
                                    last_file_id_));
        } else if (r.kind == GHOST_FILE_DUP && r.pos) {
            return what(fmt::format("shares an open file but has offset {}", r.pos));
        }
        if (r.kind == GHOST_FILE_DUP) {
            // An earlier record of the same kind of file: by file id, or in
            // images without ids by the descriptor number in pos.
            // Found by binary search (an image may have a million
            // descriptors): FILE records come in fd order, those that are
            // not DUPs in file id order (by_id_).
            const bool by_id = img_.header.features & GHOST_IMAGE_FEAT_FILE_ID;
            const File* t = by_id ? opened(r.file_id) : nullptr;
            if (!by_id) {
                const auto at =
                    std::lower_bound(img_.files.begin(), img_.files.end(), r.pos,
                                     [](const File& e, std::uint64_t fd) {
                                         return static_cast<std::uint64_t>(e.rec.fd) < fd;
                                     });
                if (at != img_.files.end() && static_cast<std::uint64_t>(at->rec.fd) == r.pos)
                    t = &*at;
            }
            if (!t || t->rec.mode != r.mode)
                return what(
                    by_id ? fmt::format("shares file id {}, which the image lacks", r.file_id)
                          : fmt::format("shares the file of fd {}, which the image lacks", r.pos));
        } else {
            last_file_id_ = r.file_id;
            by_id_.push_back(img_.files.size());
        }
        img_.files.push_back(std::move(f));
        return {};
    }

    // The first FILE record that is not a DUP with file id id, or null.
    const File* opened(std::uint64_t id) const {
        const auto at = std::lower_bound(
            by_id_.begin(), by_id_.end(), id,
            [&](std::size_t i, std::uint64_t want) { return img_.files[i].rec.file_id < want; });
        return at != by_id_.end() && img_.files[*at].rec.file_id == id ? &img_.files[*at] : nullptr;
    }

    // A lock held through an open file that the image reopens by path.
    Result<void> lock(const Sec& s) {
        ghost_lock l{};
        if (auto r = size_is(s, s.rec); !r)
            return r;
        if (auto r = record(s, l); !r)
            return r;
        if (const char* why = ghost_lock_malformed(&l))
            return bad(fmt::format("the lock section at byte {} {}", s.at, why));
        const File* f = opened(l.file_id);
        if (!f || f->rec.kind != GHOST_FILE_PATH)
            return bad(fmt::format("the lock section at byte {} names file id {}, which the "
                                   "image does not reopen by path",
                                   s.at, l.file_id));
        img_.locks.push_back(l);
        return {};
    }

    // The arguments, environment and stack lie in the mappings.
    Result<void> layout() {
        const auto& m = img_.mm;
        struct Addr {
            const char* name;
            std::uint64_t v;
            std::size_t off;
        };
        for (const Addr& a :
             {Addr{"arg_start", m.arg_start, offsetof(ghost_mm, arg_start)},
              Addr{"env_start", m.env_start, offsetof(ghost_mm, env_start)},
              Addr{"start_stack", m.start_stack, offsetof(ghost_mm, start_stack)}}) {
            if (!a.v)
                continue;
            const bool inside = std::any_of(img_.vmas.begin(), img_.vmas.end(), [&](const Vma& v) {
                return v.rec.start <= a.v && a.v < v.rec.end;
            });
            if (!inside)
                return bad(fmt::format("the memory layout points outside the mappings: {} {:#x} "
                                       "(byte {})",
                                       a.name, a.v, mm_.field(a.off)));
        }
        // The recorded vDSO is the [vdso] mapping at mm.vdso.
        if (m.vdso_size && std::none_of(img_.vmas.begin(), img_.vmas.end(), [&](const Vma& v) {
                return (v.rec.flags & GHOST_VMA_VDSO) && v.rec.start == m.vdso &&
                       v.rec.end - v.rec.start == m.vdso_size;
            }))
            return bad(fmt::format("the memory layout records a {}-byte vDSO at {:#x} (byte {}) "
                                   "that is not among the mappings",
                                   m.vdso_size, m.vdso, FIELD(mm_, ghost_mm, vdso_size)));
        return {};
    }

    Stream s_;
    const ReadOptions& o_;
    Image img_;
    Sec mm_;
    std::optional<Sec> peeked_; // a section header next() returns again
    std::uint64_t last_file_id_ = 0;
    std::vector<std::size_t> by_id_; // files that are not DUPs, by file id
    std::vector<std::byte> chunk_;
};

#undef FIELD

} // namespace

std::string_view section_name(std::uint32_t type) {
    switch (type) {
    case GHOST_SEC_TASK:
        return "task";
    case GHOST_SEC_REGS:
        return "regs";
    case GHOST_SEC_XSTATE:
        return "xstate";
    case GHOST_SEC_SIGNALS:
        return "signals";
    case GHOST_SEC_FS:
        return "fs";
    case GHOST_SEC_RLIMITS:
        return "rlimits";
    case GHOST_SEC_MM:
        return "mm";
    case GHOST_SEC_VMA:
        return "vma";
    case GHOST_SEC_PAGES:
        return "pages";
    case GHOST_SEC_FILE:
        return "file";
    case GHOST_SEC_END:
        return "end";
    case GHOST_SEC_CREDS:
        return "creds";
    case GHOST_SEC_LOCK:
        return "lock";
    case GHOST_SEC_ATTRS:
        return "attrs";
    case GHOST_SEC_PARENT:
        return "parent";
    default:
        return "unknown";
    }
}

std::size_t record_size(std::uint32_t type, std::uint32_t version) {
    return ghost_record_size(type, version);
}

std::uint64_t Image::pages() const {
    std::uint64_t n = 0;
    for (const auto& v : vmas)
        for (const auto& r : v.runs)
            n += r.parent ? 0 : r.nr_pages;
    return n;
}

std::uint64_t Image::inherited_pages() const {
    std::uint64_t n = 0;
    for (const auto& v : vmas)
        for (const auto& r : v.runs)
            n += r.parent ? r.nr_pages : 0;
    return n;
}

Result<std::size_t> SpanSource::read(std::span<std::byte> buf) {
    const auto n = std::min(buf.size(), data_.size() - off_);
    if (n)
        std::memcpy(buf.data(), data_.data() + off_, n);
    off_ += n;
    return n;
}

std::span<const std::byte> SpanSource::take(std::size_t n) {
    if (n > data_.size() - off_)
        return {};
    const auto in_place = data_.subspan(off_, n);
    off_ += n;
    return in_place;
}

Result<bool> SpanSource::skip(std::uint64_t n) {
    if (n > data_.size() - off_)
        return false; // read(), which reports where the image ends
    off_ += static_cast<std::size_t>(n);
    return true;
}

Result<bool> FdSource::skip(std::uint64_t n) {
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    if (n > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()) ||
        ::lseek(fd_, static_cast<off_t>(n), SEEK_CUR) < 0)
        return false;
    return true;
}

Result<std::size_t> FdSource::read(std::span<std::byte> buf) {
    for (;;) {
        const auto n = ::read(fd_, buf.data(), buf.size());
        if (n >= 0)
            return static_cast<std::size_t>(n);
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            // A non-blocking pipe or socket: wait for the writer.
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, -1) >= 0 || errno == EINTR)
                continue;
        }
        const int err = errno;
        return Error::from_errno(
            err, fmt::format("reading the image failed: {}", std::generic_category().message(err)));
    }
}

Result<Image> read(Source& src, const ReadOptions& opts) {
    return Reader(src, opts).run();
}

Result<Image> read(std::span<const std::byte> data, const ReadOptions& opts) {
    SpanSource src(data);
    return read(src, opts);
}

} // namespace ghost::image
