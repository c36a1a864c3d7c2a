// SPDX-License-Identifier: LGPL-2.1-or-later
#include "zstd_stream.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <zstd.h>

#include "buffered_source.hpp"
#include "ghost/process.hpp"
#include "sys.hpp"

namespace ghost {

namespace {

struct CCtxFree {
    void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
    void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

Error zstd_error(std::size_t rc, std::string_view what) {
    return Error::from_errno(EIO, fmt::format("{}: {}", what, ZSTD_getErrorName(rc)));
}

} // namespace

Result<std::size_t> read_some(int fd, std::span<std::byte> buf) {
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n >= 0)
            return static_cast<std::size_t>(n);
        if (errno != EINTR)
            return Error::from_errno(errno, fmt::format("read: {}", errno_text(errno)));
    }
}

Result<void> compress_fd(int in, int out, int level,
                         const std::function<void(std::uint64_t)>& counted) {
    std::unique_ptr<ZSTD_CCtx, CCtxFree> cctx(ZSTD_createCCtx());
    if (!cctx)
        return Error::from_errno(ENOMEM, "cannot create a zstd compression context");
    ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
    std::vector<std::byte> ibuf(ZSTD_CStreamInSize() * 8), obuf(ZSTD_CStreamOutSize() * 8);
    for (;;) {
        auto n = read_some(in, ibuf);
        if (!n)
            return n.error();
        const bool last = *n == 0;
        ZSTD_inBuffer ib{ibuf.data(), *n, 0};
        for (;;) {
            ZSTD_outBuffer ob{obuf.data(), obuf.size(), 0};
            const std::size_t rc =
                ZSTD_compressStream2(cctx.get(), &ob, &ib, last ? ZSTD_e_end : ZSTD_e_continue);
            if (ZSTD_isError(rc))
                return zstd_error(rc, "compressing the image");
            if (auto w = write_all(out, std::span(obuf.data(), ob.pos)); !w)
                return w.error();
            if (last ? rc == 0 : ib.pos == ib.size)
                break;
        }
        if (counted && *n)
            counted(*n);
        if (last)
            return {};
    }
}

namespace {

// Bytes already read from the descriptor (to sniff the format), then the rest.
class PrefixedFdSource final : public image::Source {
  public:
    PrefixedFdSource(int fd, std::vector<std::byte> head) : fd_(fd), head_(std::move(head)) {}
    Result<std::size_t> read(std::span<std::byte> buf) override {
        if (off_ < head_.size()) {
            const std::size_t n = std::min(buf.size(), head_.size() - off_);
            std::copy_n(head_.begin() + static_cast<std::ptrdiff_t>(off_), n, buf.begin());
            off_ += n;
            return n;
        }
        return read_some(fd_, buf);
    }
    Result<bool> skip(std::uint64_t n) override {
        if (off_ < head_.size())
            return false;
        return image::FdSource(fd_).skip(n);
    }

  private:
    int fd_;
    std::vector<std::byte> head_;
    std::size_t off_ = 0;
};

class ZstdSource final : public image::Source {
  public:
    ZstdSource(int fd, std::vector<std::byte> head, std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx)
        : in_(fd, std::move(head)), dctx_(std::move(dctx)), ibuf_(ZSTD_DStreamInSize()) {}

    Result<std::size_t> read(std::span<std::byte> buf) override {
        ZSTD_outBuffer ob{buf.data(), buf.size(), 0};
        while (ob.pos == 0 && !buf.empty()) {
            if (ib_.pos == ib_.size) {
                auto n = in_.read(ibuf_);
                if (!n)
                    return n.error();
                if (*n == 0) {
                    if (rc_ != 0)
                        return Error::from_errno(
                            EBADMSG, "the compressed image ends in the middle of a frame");
                    return std::size_t{0};
                }
                ib_ = {ibuf_.data(), *n, 0};
            }
            rc_ = ZSTD_decompressStream(dctx_.get(), &ob, &ib_);
            if (ZSTD_isError(rc_))
                return zstd_error(rc_, "decompressing the image");
        }
        return ob.pos;
    }

  private:
    PrefixedFdSource in_;
    std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx_;
    std::vector<std::byte> ibuf_;
    ZSTD_inBuffer ib_{nullptr, 0, 0};
    std::size_t rc_ = 1;
};

} // namespace

Result<std::unique_ptr<image::Source>> image_source(int fd) {
    std::vector<std::byte> head(4);
    std::size_t got = 0;
    while (got < head.size()) {
        auto n = read_some(fd, std::span(head).subspan(got));
        if (!n)
            return n.error();
        if (*n == 0)
            break;
        got += *n;
    }
    head.resize(got);
    if (!is_zstd(head))
        return std::unique_ptr<image::Source>(std::make_unique<BufferedSource>(
            std::make_unique<PrefixedFdSource>(fd, std::move(head))));
    std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
    if (!dctx)
        return Error::from_errno(ENOMEM, "cannot create a zstd decompression context");
    return std::unique_ptr<image::Source>(
        std::make_unique<ZstdSource>(fd, std::move(head), std::move(dctx)));
}

} // namespace ghost
