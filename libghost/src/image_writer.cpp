// SPDX-License-Identifier: LGPL-2.1-or-later
// The image writer: records into a buffer, page data straight through to the
// descriptor (or all into memory), the END checksum computed on the way.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "checksum.hpp"
#include "ghost/image.hpp"
#include "ghost_format.h"

namespace ghost::image {

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::size_t kFlushAt = 1 << 20; // buffer this much before writing

template <class T> std::span<const std::byte> cbytes_of(const T& v) {
    return std::as_bytes(std::span(&v, 1));
}

} // namespace

Writer::Writer() : sum_(std::make_unique<Checksum>()) {}

Writer::Writer(int fd) : fd_(fd), sum_(std::make_unique<Checksum>()) {
    out_.reserve(kFlushAt + kPage);
}

Writer::~Writer() = default;

void Writer::write_out(std::span<const std::byte> b) {
    sum_->update(b);
    while (!failed_ && !b.empty()) {
        const ssize_t n = ::write(fd_, b.data(), b.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            const int err = n < 0 ? errno : EIO;
            failed_ = true;
            err_ = Error::from_errno(
                err, fmt::format("writing the image: {}",
                                 std::error_code(err, std::system_category()).message()));
            return;
        }
        flushed_ += static_cast<std::uint64_t>(n);
        b = b.subspan(static_cast<std::size_t>(n));
    }
}

void Writer::put(std::span<const std::byte> b) {
    if (failed_)
        return;
    if (fd_ >= 0 && b.size() >= kFlushAt) {
        flush(); // page data goes straight through, no copy
        write_out(b);
        return;
    }
    out_.insert(out_.end(), b.begin(), b.end());
    if (fd_ >= 0 && out_.size() >= kFlushAt)
        flush();
}

void Writer::pad_to(std::uint64_t n) {
    static constexpr std::array<std::byte, kPage> zeros{};
    while (!failed_ && n > 0) {
        const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(n, kPage));
        put(std::span(zeros.data(), k));
        n -= k;
    }
}

void Writer::flush() {
    if (fd_ < 0 || failed_ || out_.empty())
        return;
    write_out(out_);
    out_.clear();
}

Result<void> Writer::status() const {
    if (failed_)
        return err_;
    return {};
}

void Writer::header(const ghost_image_header& h) {
    version_ = h.version;
    if (h.version != 1 && (h.features & GHOST_IMAGE_FEAT_XXH64) && offset() == 0)
        sum_->use_xxh64({});
    put(cbytes_of(h));
    if (h.version != 1 && h.header_size > sizeof(h) && h.header_size <= GHOST_IMAGE_HEADER_MAX)
        pad_to(h.header_size - sizeof(h));
}

void Writer::section(std::uint32_t type, std::span<const std::byte> payload, std::uint16_t flags,
                     std::uint16_t record_size) {
    const ghost_section s{type, flags, record_size, payload.size()};
    put(cbytes_of(s));
    put(payload);
    pad_to((8 - payload.size() % 8) % 8);
}

void Writer::pages_begin(std::uint64_t addr, std::uint64_t nr_pages) {
    // As ghost.ko writes it: the least padding that page-aligns the data.
    const std::uint64_t hdr_end = offset() + sizeof(ghost_section) + sizeof(ghost_pages);
    const std::uint64_t pad = (kPage - hdr_end % kPage) % kPage;
    const ghost_pages p{addr, nr_pages, static_cast<std::uint32_t>(sizeof(p) + pad), 0};
    const ghost_section s{GHOST_SEC_PAGES, 0, wire_record_size(sizeof(p)),
                          p.data_offset + nr_pages * kPage};
    put(cbytes_of(s));
    put(cbytes_of(p));
    pad_to(pad);
}

void Writer::page_data(std::span<const std::byte> data) {
    // data_offset is a multiple of 8 (see pages_begin), so whole pages need
    // no padding after them. Page data goes straight through to a
    // descriptor whatever its size: the exporter's chunks are small enough
    // to stay in cache between the read, the checksum and the write.
    if (fd_ >= 0 && !failed_) {
        flush();
        write_out(data);
        return;
    }
    put(data);
}

void Writer::parent_pages(std::uint64_t addr, std::uint64_t nr_pages) {
    const ghost_pages p{addr, nr_pages, 0, GHOST_PAGES_PARENT};
    record(GHOST_SEC_PAGES, p);
}

void Writer::pages(std::uint64_t addr, std::span<const std::byte> data) {
    pages_begin(addr, data.size() / kPage);
    page_data(data);
    pad_to((8 - data.size() % 8) % 8); // only for malformed, partial pages
}

void Writer::end() {
    flush();
    const std::uint64_t at = offset();
    const std::uint64_t sum = sum_->value(out_);
    ghost_end e{};
    e.bytes = at;
    if (sum_->xxh64()) {
        e.xxh64 = sum;
        record(GHOST_SEC_END, e);
    } else { // the record as it was before XXH64: old images encode back the same
        e.crc32c = static_cast<std::uint32_t>(sum);
        const auto rec = cbytes_of(e).first(GHOST_END_SIZE_VER1);
        section(GHOST_SEC_END, rec, 0, wire_record_size(rec.size()));
    }
    end_ = e;
    flush();
}

Result<void> write(Writer& w, const Image& img,
                   const std::function<Result<void>(Writer&, const Vma&)>& pages) {
    w.header(img.header);
    if (img.parent)
        w.record(GHOST_SEC_PARENT, *img.parent, std::as_bytes(std::span(img.parent_path)));
    w.record(GHOST_SEC_TASK, img.task);
    if (img.creds)
        w.record(GHOST_SEC_CREDS, *img.creds, std::as_bytes(std::span(img.groups)));
    if (img.attrs)
        w.record(GHOST_SEC_ATTRS, *img.attrs);
    w.record(GHOST_SEC_REGS, img.regs);
    w.record(GHOST_SEC_XSTATE, img.xstate, img.xsave);
    w.record(GHOST_SEC_SIGNALS, img.signals);
    const ghost_fs fs{img.umask, static_cast<std::uint32_t>(img.cwd.size())};
    w.record(GHOST_SEC_FS, fs, std::as_bytes(std::span(img.cwd)));
    w.record(GHOST_SEC_RLIMITS, img.rlimits);
    w.record(GHOST_SEC_MM, img.mm);
    for (const auto& v : img.vmas) {
        w.record(GHOST_SEC_VMA, v.rec, std::as_bytes(std::span(v.path)));
        if (auto r = pages(w, v); !r)
            return r;
    }
    for (const auto& f : img.files)
        w.record(GHOST_SEC_FILE, f.rec, std::as_bytes(std::span(f.path)));
    for (const auto& l : img.locks)
        w.record(GHOST_SEC_LOCK, l);
    w.end();
    return w.status();
}

std::vector<std::byte>
encode(const Image& img,
       const std::function<std::span<const std::byte>(const Vma&, const PageRun&)>& data) {
    Writer w;
    (void)write(w, img, [&](Writer& out, const Vma& v) -> Result<void> {
        for (const auto& r : v.runs)
            if (r.parent)
                out.parent_pages(r.addr, r.nr_pages);
            else
                out.pages(r.addr, data(v, r));
        return {};
    });
    return std::move(w.bytes());
}

} // namespace ghost::image
