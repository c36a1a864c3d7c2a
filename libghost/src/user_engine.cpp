// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ghost/user_engine.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include <fmt/format.h>
#include <linux/ghost.h>

#include "ghost/image.hpp"
#include "sys.hpp"
#include "user/lazy.hpp"
#include "user/user.hpp"
#include "zstd_stream.hpp"

namespace ghost {

namespace {

constexpr std::uint64_t kPage = 4096;

Result<UniqueFd> new_memfd() {
    UniqueFd fd(::memfd_create("ghost-image", MFD_CLOEXEC));
    if (!fd)
        return Error::from_errno(errno, fmt::format("memfd_create: {}", errno_text(errno)));
    return move_fd_high(std::move(fd));
}

Result<ImageView> map_fd(int fd, std::uint64_t off, std::uint64_t len) {
    if (len == 0)
        return ImageView();
    void* p = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(off));
    if (p == MAP_FAILED)
        return Error::from_errno(errno, fmt::format("mapping the image: {}", errno_text(errno)));
    return ImageView(p, len);
}

// Reads a stream and keeps what it read in a memory file.
class TeeSource final : public image::Source {
  public:
    TeeSource(int in, int copy) : in_(in), copy_(copy) {}
    Result<std::size_t> read(std::span<std::byte> buf) override {
        auto n = in_.read(buf);
        if (n && *n)
            if (auto w = write_all(copy_, buf.first(*n)); !w)
                return w.error();
        return n;
    }

  private:
    image::FdSource in_;
    int copy_;
};

// What every user-engine ghost does; Base is Ghost or MemoryGhost. Its
// image is a memory file (memory ghosts) or the caller's descriptor.
template <class Base> class UserGhostBase : public Base {
  public:
    UserGhostBase(UniqueFd fd, Backend b) : fd_(std::move(fd)), backend_(b) {}

    Result<ExportStats> export_process(pid_t pid, Fate fate) override {
        return export_incremental(pid, fate, {});
    }

    Result<ExportStats> export_incremental(pid_t pid, Fate fate,
                                           const std::string& parent) override {
        if (backend_.kind == Backend::Kind::Memory) {
            if (::ftruncate(fd_.get(), 0) != 0 || ::lseek(fd_.get(), 0, SEEK_SET) != 0)
                return Error::from_errno(
                    errno, fmt::format("emptying the memory ghost: {}", errno_text(errno)));
            len_ = 0;
        }
        auto s = user::export_process(pid, fate, fd_.get(), parent, nullptr);
        if (s && backend_.kind == Backend::Kind::Memory)
            len_ = s->bytes;
        return s;
    }

    Result<ExportStats> export_precopy(pid_t pid, Fate fate, Precopy& precopy) override {
        if (backend_.kind == Backend::Kind::Memory)
            return Error::from_errno(EINVAL, "a pre-copy image goes to a file or stream, not a "
                                             "memory ghost");
        return user::export_process(pid, fate, fd_.get(), {}, &precopy.state());
    }

    Error restore_self(const RestoreOptions& o) override {
        // Before the image is read and checked: what is checked is then
        // what the pager reads.
        if (o.lazy) {
            if (backend_.kind != Backend::Kind::File)
                return Error::from_errno(EINVAL, "a lazy restart reads its image from a file");
            if (auto l = user::lazy::take_lease(fd_.get()); !l)
                return l.error();
        }
        auto b = image_bytes();
        if (!b)
            return b.error();
        if (!b->image) {
            auto img = image::read(b->view.bytes());
            if (!img)
                return img.error();
            b->image = std::move(*img);
        }
        if (o.owner)
            if (auto r = image::check_owner(*b->image, *o.owner); !r)
                return r.error();
        return user::restore_self(b->view.bytes(), *b->image, o.stopped, o.lazy);
    }

    const Backend& backend() const override { return backend_; }

  protected:
    // The image's bytes, and the image if reading them already decoded it.
    struct Bytes {
        ImageView view;
        std::optional<image::Image> image;
    };

    // The image, mapped: a memory ghost's or a file's from its offset; a
    // stream's is read (to its END, not beyond) into memory first, and
    // decoded (checksums included) on the way: that decoding is kept, so
    // its bytes are not checked a second time.
    Result<Bytes> image_bytes() {
        const auto mapped = [](Result<ImageView> v) -> Result<Bytes> {
            if (!v)
                return v.error();
            return Bytes{std::move(*v), std::nullopt};
        };
        if (backend_.kind == Backend::Kind::Memory)
            return mapped(map_fd(fd_.get(), 0, len_));
        struct stat st {};
        const off_t at = ::lseek(fd_.get(), 0, SEEK_CUR);
        if (::fstat(fd_.get(), &st) == 0 && S_ISREG(st.st_mode) && at >= 0 &&
            static_cast<std::uint64_t>(at) % kPage == 0 && st.st_size > at)
            return mapped(map_fd(fd_.get(), static_cast<std::uint64_t>(at),
                                 static_cast<std::uint64_t>(st.st_size - at)));
        auto copy = new_memfd();
        if (!copy)
            return copy.error();
        TeeSource tee(fd_.get(), copy->get());
        auto img = image::read(tee);
        if (!img)
            return img.error();
        auto view = map_fd(copy->get(), 0, img->bytes);
        if (!view)
            return view.error();
        return Bytes{std::move(*view), std::move(*img)};
    }

    UniqueFd fd_;
    Backend backend_;
    std::uint64_t len_ = 0; // bytes in a memory ghost
};

class UserGhost final : public UserGhostBase<Ghost> {
  public:
    using UserGhostBase::UserGhostBase;
};

class UserMemoryGhost final : public UserGhostBase<MemoryGhost> {
  public:
    using UserGhostBase::UserGhostBase;

    Result<void> write(std::span<const std::byte> data) override {
        if (auto w = write_all(fd_.get(), data); !w)
            return w;
        len_ += data.size();
        return {};
    }

    Result<ImageView> view() override { return map_fd(fd_.get(), 0, len_); }
};

} // namespace

Result<EngineInfo> UserEngine::info() {
    EngineInfo i;
    i.engine = std::string(name());
    i.version = GHOST_LIBRARY_VERSION;
    i.features = GHOST_FEAT_EXPORT | GHOST_FEAT_IMPORT | GHOST_FEAT_BACKEND_MEMORY |
                 GHOST_FEAT_BACKEND_FILE | GHOST_FEAT_BACKEND_NET;
    i.image_version = GHOST_IMAGE_VERSION;
    i.image_min = GHOST_IMAGE_VERSION;
    return i;
}

Result<std::unique_ptr<Ghost>> UserEngine::create(const Backend& backend) {
    if (backend.kind == Backend::Kind::Memory)
        return Error::from_errno(EINVAL, "a memory ghost is made by create_memory()");
    UniqueFd fd(::fcntl(backend.fd, F_DUPFD_CLOEXEC, high_fd_base));
    if (!fd)
        return Error::from_errno(errno, fmt::format("cannot use fd {} for the ghost: {}",
                                                    backend.fd, errno_text(errno)));
    return std::unique_ptr<Ghost>(std::make_unique<UserGhost>(std::move(fd), backend));
}

Result<std::unique_ptr<MemoryGhost>> UserEngine::create_memory(std::uint64_t capacity) {
    auto m = new_memfd();
    if (!m)
        return m.error();
    return std::unique_ptr<MemoryGhost>(
        std::make_unique<UserMemoryGhost>(std::move(*m), Backend::memory(capacity)));
}

} // namespace ghost
