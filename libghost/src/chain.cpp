// SPDX-License-Identifier: LGPL-2.1-or-later
// Incremental image chains (ghost/chain.hpp): loading and checking each
// link, resolving every page of the newest image to the newest image that
// holds its data, and flattening a chain into one whole image.
#include "ghost/chain.hpp"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "ghost/io.hpp"
#include "ghost/process.hpp"
#include "sys.hpp"

namespace ghost::chain {

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kPage = 4096;

Error in_file(const std::string& path, const Error& e) {
    return Error{e.code, fmt::format("{}: {}", path, e.what())};
}

Result<ImageView> map_whole(int fd, std::uint64_t len, const std::string& path) {
    if (len == 0)
        return Error::from_errno(EBADMSG, fmt::format("{}: the image is empty", path));
    void* p = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        return Error::from_errno(errno, fmt::format("mapping {}: {}", path, errno_text(errno)));
    return ImageView(p, len);
}

Result<UniqueFd> new_memfd(const char* name) {
    UniqueFd fd(::memfd_create(name, MFD_CLOEXEC));
    if (!fd)
        return Error::from_errno(errno, fmt::format("memfd_create: {}", errno_text(errno)));
    return move_fd_high(std::move(fd));
}

// Checks the mapped bytes and keeps what the reader decoded.
Result<Link> from_view(ImageView view, const std::string& path) {
    auto img = image::read(view.bytes());
    if (!img)
        return in_file(path, img.error());
    return Link{path, std::move(view), std::move(*img)};
}

// Resolves the runs of an image whose parent's extents are known.
Result<std::vector<Extent>> resolve(const Link& l, std::size_t link,
                                    const std::vector<Extent>* below, const std::string& parent) {
    std::vector<Extent> out;
    auto it = below ? below->begin() : std::vector<Extent>::const_iterator{};
    for (const auto& v : l.img.vmas)
        for (const auto& r : v.runs) {
            if (!r.parent) {
                out.push_back({r.addr, r.nr_pages, link, r.data_offset});
                continue;
            }
            if (!below) {
                out.push_back({r.addr, r.nr_pages, kNoLink, 0});
                continue;
            }
            // The parent's extents over [addr, end), which must cover it all.
            std::uint64_t addr = r.addr;
            const std::uint64_t end = r.addr + r.nr_pages * kPage;
            while (it != below->end() && it->addr + it->nr_pages * kPage <= addr)
                ++it;
            for (auto e = it; addr < end; ++e) {
                if (e == below->end() || e->addr > addr)
                    return Error::from_errno(
                        EBADMSG, fmt::format("{}: the page at {:#x} is inherited from the parent "
                                             "image {}, which does not have it",
                                             l.path, addr, parent));
                const std::uint64_t skip = (addr - e->addr) / kPage;
                const std::uint64_t n = std::min(e->nr_pages - skip, (end - addr) / kPage);
                out.push_back(
                    {addr, n, e->link, e->link == kNoLink ? 0 : e->offset + skip * kPage});
                addr += n * kPage;
            }
        }
    return out;
}

} // namespace

ImageId id_of(const image::Image& img) {
    return {img.bytes, img.crc32c, img.header.time_ns, img.header.pid, img.xxh64};
}

ImageId id_of(const ghost_parent& p) {
    return {p.bytes, p.crc32c, p.time_ns, p.pid, p.xxh64};
}

std::string describe(const ImageId& id) {
    const std::time_t secs = static_cast<std::time_t>(id.time_ns / 1000000000ULL);
    std::tm tm{};
    ::gmtime_r(&secs, &tm);
    std::array<char, 32> when{};
    std::strftime(when.data(), when.size(), "%Y-%m-%d %H:%M:%S", &tm);
    const std::string sum = id.xxh64 ? fmt::format("xxh64 {:#018x}", id.xxh64)
                                     : fmt::format("crc32c {:#010x}", id.crc32c);
    return fmt::format("pid {}'s image of {}.{:09} UTC ({} bytes, {})", id.pid, when.data(),
                       id.time_ns % 1000000000ULL, id.bytes, sum);
}

namespace {

// load_fd() with at most max_bytes decompressed (a parent is no larger than
// its child's record of it says).
Result<Link> load_fd_upto(int fd, const std::string& path, std::uint64_t max_bytes) {
    struct stat st {};
    const off_t at = ::lseek(fd, 0, SEEK_CUR);
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && at == 0 && st.st_size > 0) {
        std::array<std::byte, 4> head{};
        const ssize_t n = ::pread(fd, head.data(), head.size(), 0);
        if (n < 0)
            return Error::from_errno(errno, fmt::format("reading {}: {}", path, errno_text(errno)));
        if (!is_zstd(std::span(head.data(), static_cast<std::size_t>(n)))) {
            auto view = map_whole(fd, static_cast<std::uint64_t>(st.st_size), path);
            if (!view)
                return view.error();
            return from_view(std::move(*view), path);
        }
    }
    // Compressed, a pipe, or not at its start: decompressed into memory.
    auto src = image_source(fd);
    if (!src)
        return in_file(path, src.error());
    auto mem = new_memfd("ghost-parent");
    if (!mem)
        return mem.error();
    std::vector<std::byte> buf(1 << 20);
    std::uint64_t total = 0;
    for (;;) {
        auto n = (*src)->read(buf);
        if (!n)
            return in_file(path, n.error());
        if (*n == 0)
            break;
        if (auto w = write_all(mem->get(), std::span(buf.data(), *n)); !w)
            return w.error();
        total += *n;
        if (total > max_bytes)
            return Error::from_errno(EFBIG, fmt::format("{} holds more than the {} bytes of the "
                                                        "image it should be",
                                                        path, max_bytes));
    }
    auto view = map_whole(mem->get(), total, path);
    if (!view)
        return view.error();
    return from_view(std::move(*view), path);
}

} // namespace

Result<Link> load_fd(int fd, const std::string& path) {
    return load_fd_upto(fd, path, ~std::uint64_t{0});
}

Result<Link> load(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd)
        return Error::from_errno(errno, fmt::format("cannot open {}: {}", path, errno_text(errno)));
    return load_fd(fd.get(), path);
}

Result<Link> load_bytes(std::span<const std::byte> bytes, const std::string& path) {
    auto mem = new_memfd("ghost-image");
    if (!mem)
        return mem.error();
    if (auto w = write_all(mem->get(), bytes); !w)
        return w.error();
    auto view = map_whole(mem->get(), bytes.size(), path);
    if (!view)
        return view.error();
    return from_view(std::move(*view), path);
}

namespace {

// Reads from a source, keeps every byte in a memory file, and counts.
// Placed page data (image::ReadOptions::place) is not kept: the file has a
// hole there, of the same length, so every other byte keeps its offset.
// The kept bytes are gathered and written in pieces of up to kBatch, not a
// write per record: flush() before the file is used.
class KeepSource final : public image::Source {
  public:
    KeepSource(image::Source& in, int copy) : in_(in), copy_(copy) {}
    Result<std::size_t> read(std::span<std::byte> buf) override {
        auto n = in_.read(buf);
        if (n && *n) {
            if (*n >= kBatch) {
                if (auto w = flush(); !w)
                    return w.error();
                if (auto w = write_all(copy_, buf.first(*n)); !w)
                    return kept_failed(w.error());
            } else {
                pending_.insert(pending_.end(), buf.begin(),
                                buf.begin() + static_cast<std::ptrdiff_t>(*n));
                if (pending_.size() >= kBatch)
                    if (auto w = flush(); !w)
                        return w.error();
            }
        }
        return counted(n);
    }
    Result<std::size_t> read_placed(std::span<std::byte> buf) override {
        auto n = in_.read_placed(buf);
        if (n && *n) {
            if (auto w = flush(); !w)
                return w.error();
            if (::lseek(copy_, static_cast<off_t>(*n), SEEK_CUR) < 0)
                return Error::from_errno(
                    errno, fmt::format("keeping the image in memory: {}", errno_text(errno)));
        }
        return counted(n);
    }
    // Writes what is gathered into the memory file.
    Result<void> flush() {
        if (pending_.empty())
            return {};
        auto w = write_all(copy_, pending_);
        pending_.clear();
        if (!w)
            return kept_failed(w.error());
        return {};
    }
    // Nothing read, and the stream ended.
    bool empty_end() const { return got_ == 0 && eof_; }

  private:
    static constexpr std::size_t kBatch = 64 << 10;

    static Error kept_failed(const Error& e) {
        return Error{e.code, fmt::format("keeping the image in memory: {}", e.what())};
    }
    Result<std::size_t> counted(Result<std::size_t> n) {
        if (n)
            got_ += *n;
        eof_ = n && *n == 0;
        return n;
    }

    image::Source& in_;
    int copy_;
    std::vector<std::byte> pending_;
    std::uint64_t got_ = 0;
    bool eof_ = false;
};

} // namespace

Result<std::vector<Link>> read_sequence(int fd, const std::string& name,
                                        const std::function<Result<void>(const Link&)>& on_image,
                                        const Place& place) {
    image::FdSource in(fd);
    return read_sequence(in, name, on_image, place);
}

Result<std::vector<Link>> read_sequence(image::Source& in, const std::string& name,
                                        const std::function<Result<void>(const Link&)>& on_image,
                                        const Place& place) {
    std::vector<Link> out;
    image::ReadOptions ro;
    ro.place = place;
    for (;;) {
        const std::string path = fmt::format("{}, image {}", name, out.size() + 1);
        auto mem = new_memfd("ghost-precopy");
        if (!mem)
            return mem.error();
        KeepSource src(in, mem->get());
        auto img = image::read(src, ro);
        if (!img) {
            if (src.empty_end() && !out.empty())
                return out; // the end of the stream, between two images
            return in_file(path, img.error());
        }
        if (auto f = src.flush(); !f)
            return in_file(path, f.error());
        if (out.size() > GHOST_PARENT_DEPTH_MAX)
            return Error::from_errno(ELOOP, fmt::format("{}: the sequence is longer than {} "
                                                        "images",
                                                        path, GHOST_PARENT_DEPTH_MAX + 1));
        auto view = map_whole(mem->get(), img->bytes, path);
        if (!view)
            return view.error();
        out.push_back(Link{path, std::move(*view), std::move(*img)});
        if (on_image)
            if (auto r = on_image(out.back()); !r)
                return r.error();
    }
}

Result<void> check_link(const Link& child, const Link& parent) {
    const auto& want = *child.img.parent;
    const ImageId got = id_of(parent.img);
    if (id_of(want) != got)
        return Error::from_errno(
            EBADMSG, fmt::format("{} is not the parent of {}: that is {}, this is {}", parent.path,
                                 child.path, describe(id_of(want)), describe(got)));
    const std::uint32_t depth = parent.img.parent ? parent.img.parent->depth + 1 : 1;
    if (want.depth != depth)
        return Error::from_errno(EBADMSG, fmt::format("{} says its chain is {} images deep, but "
                                                      "its parent {} makes it {}",
                                                      child.path, want.depth, parent.path, depth));
    if (parent.img.parent && parent.img.parent->start_time != want.start_time)
        return Error::from_errno(EBADMSG, fmt::format("{} and its parent {} are of different "
                                                      "processes (start times {} and {})",
                                                      child.path, parent.path, want.start_time,
                                                      parent.img.parent->start_time));
    return {};
}

namespace {

// Root opening a file an image names, as the image's user: the filesystem
// ids and the supplementary groups of this thread (setfsuid(), setfsgid(),
// the raw setgroups system call, which unlike glibc's changes the calling
// thread only; the kernel drops the file capabilities with fsuid 0 and
// gives them back after), so that an image cannot make root read a file
// its user could not (its bytes would come back in the errors, or into
// the process). A change of fsuid also makes the process not dumpable,
// which the restore's tracer needs it to be: put back as it was.
class AsImageUser {
  public:
    explicit AsImageUser(const image::Image& img) {
        if (::geteuid() != 0 || !img.creds || img.creds->fsuid == 0)
            return;
        const int n = ::getgroups(0, nullptr);
        groups_.resize(static_cast<std::size_t>(std::max(n, 0)));
        if (n < 0 || ::getgroups(n, groups_.data()) != n) {
            failed_ = errno;
            return;
        }
        const std::vector<gid_t> theirs(img.groups.begin(), img.groups.end());
        if (::syscall(SYS_setgroups, theirs.size(), theirs.data()) != 0) {
            failed_ = errno;
            return;
        }
        dumpable_ = ::prctl(PR_GET_DUMPABLE);
        gid_ = ::setfsgid(img.creds->fsgid);
        uid_ = ::setfsuid(img.creds->fsuid);
        on_ = true;
        // setfsuid() and setfsgid() say nothing of a failure: asked again
        // with an id they refuse, they return the one in force.
        if (static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))) != img.creds->fsuid ||
            static_cast<gid_t>(::setfsgid(static_cast<gid_t>(-1))) != img.creds->fsgid)
            failed_ = EPERM;
    }
    // 0, or why this thread could not take the image user's ids: the file
    // must not then be opened with root's.
    int failed() const { return failed_; }
    ~AsImageUser() {
        if (!on_)
            return;
        ::setfsuid(static_cast<uid_t>(uid_));
        ::setfsgid(static_cast<gid_t>(gid_));
        (void)::syscall(SYS_setgroups, groups_.size(), groups_.data());
        if (dumpable_ >= 0)
            (void)::prctl(PR_SET_DUMPABLE, dumpable_);
    }
    AsImageUser(const AsImageUser&) = delete;
    AsImageUser& operator=(const AsImageUser&) = delete;

  private:
    bool on_ = false;
    int failed_ = 0;
    int uid_ = 0, gid_ = 0, dumpable_ = -1;
    std::vector<gid_t> groups_;
};

// A parent that an image names: opened as the image's user, without
// waiting on a FIFO; a regular file only, and no larger than the parent
// should be.
Result<Link> load_parent(const std::string& path, const Link& child) {
    UniqueFd fd;
    int err = 0;
    {
        AsImageUser as(child.img);
        if (as.failed())
            return Error::from_errno(as.failed(),
                                     fmt::format("cannot open {} as the user of {}: {}", path,
                                                 child.path, errno_text(as.failed())));
        fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
        err = errno;
    }
    if (!fd)
        return Error::from_errno(err, fmt::format("cannot open {}: {}", path, errno_text(err)));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
        return Error::from_errno(EINVAL, fmt::format("{} is not a regular file: it cannot be the "
                                                     "parent image of {}",
                                                     path, child.path));
    return load_fd_upto(fd.get(), path, child.img.parent->bytes);
}

} // namespace

Result<Link> find_parent(const Link& child) {
    const std::string& hint = child.img.parent_path;
    const fs::path dir = fs::path(child.path).parent_path();
    std::vector<std::string> tries;
    if (fs::path(hint).is_absolute() || dir.empty())
        tries.push_back(hint);
    else
        tries.push_back((dir / hint).string());
    if (!dir.empty()) {
        const std::string beside = (dir / fs::path(hint).filename()).string();
        if (beside != tries.front())
            tries.push_back(beside);
    }
    std::optional<Error> mismatch;
    for (const auto& t : tries) {
        auto l = load_parent(t, child);
        if (!l) {
            if (l.error().code.value() != ENOENT) // not there: the next try
                mismatch = l.error();
            continue;
        }
        if (auto c = check_link(child, *l); !c) {
            mismatch = c.error();
            continue;
        }
        return l;
    }
    if (mismatch)
        return *mismatch;
    std::string list;
    for (const auto& t : tries)
        list += (list.empty() ? "" : ", ") + t;
    return Error::from_errno(ENOENT,
                             fmt::format("the parent image of {} is missing: it is {}, "
                                         "and no file {} holds it",
                                         child.path, describe(id_of(*child.img.parent)), list));
}

Result<Chain> Chain::follow(Link top, bool whole) {
    Chain c;
    c.links_.push_back(std::move(top));
    while (whole && c.links_.back().img.parent) {
        if (c.links_.size() > GHOST_PARENT_DEPTH_MAX)
            return Error::from_errno(ELOOP,
                                     fmt::format("{}: the chain of parents is longer than "
                                                 "{} images",
                                                 c.links_.front().path, GHOST_PARENT_DEPTH_MAX));
        auto p = find_parent(c.links_.back());
        if (!p)
            return p.error();
        c.links_.push_back(std::move(*p));
    }
    if (auto r = c.resolve_all(whole); !r)
        return r.error();
    return c;
}

Result<Chain> Chain::of(std::vector<Link> oldest_first) {
    if (oldest_first.empty())
        return Error::from_errno(EINVAL, "a chain of no images");
    if (oldest_first.front().img.parent)
        return Error::from_errno(EBADMSG, fmt::format("{} is incremental, but it is the first "
                                                      "image of the sequence",
                                                      oldest_first.front().path));
    for (std::size_t i = 1; i < oldest_first.size(); i++) {
        if (!oldest_first[i].img.parent)
            return Error::from_errno(EBADMSG,
                                     fmt::format("{} is a whole image, but it follows "
                                                 "{} in the sequence",
                                                 oldest_first[i].path, oldest_first[i - 1].path));
        if (auto l = check_link(oldest_first[i], oldest_first[i - 1]); !l)
            return l.error();
    }
    Chain c;
    c.links_.assign(std::make_move_iterator(oldest_first.rbegin()),
                    std::make_move_iterator(oldest_first.rend()));
    if (auto r = c.resolve_all(true); !r)
        return r.error();
    return c;
}

Result<void> Chain::resolve_all(bool whole) {
    // From the bottom up: each image's runs over its parent's extents.
    std::vector<Extent> below;
    for (std::size_t i = links_.size(); i-- > 0;) {
        const bool has_below = whole && i + 1 < links_.size();
        auto r = resolve(links_[i], i, has_below ? &below : nullptr,
                         has_below ? links_[i + 1].path : std::string());
        if (!r)
            return r.error();
        below = std::move(*r);
    }
    extents_ = std::move(below);
    return {};
}

const Extent* Chain::find(std::uint64_t addr) const {
    auto it = std::upper_bound(extents_.begin(), extents_.end(), addr,
                               [](std::uint64_t a, const Extent& e) { return a < e.addr; });
    if (it == extents_.begin())
        return nullptr;
    --it;
    return addr < it->addr + it->nr_pages * kPage ? &*it : nullptr;
}

std::span<const std::byte> Chain::page(std::uint64_t addr) const {
    const Extent* e = find(addr);
    if (!e || e->link == kNoLink)
        return {};
    return links_[e->link].view.bytes().subspan(e->offset + (addr - e->addr), kPage);
}

Result<UniqueFd> Chain::flattened() const {
    auto mem = new_memfd("ghost-flattened");
    if (!mem)
        return mem.error();
    if (auto f = flatten(mem->get()); !f)
        return f.error();
    if (::lseek(mem->get(), 0, SEEK_SET) != 0)
        return Error::from_errno(
            errno, fmt::format("rewinding the flattened image: {}", errno_text(errno)));
    return mem;
}

Result<void> Chain::flatten(int out) const {
    image::Image img = top().img;
    img.parent.reset();
    img.parent_path.clear();
    img.header.features &= ~static_cast<std::uint64_t>(GHOST_IMAGE_FEAT_PARENT);
    img.header.required_features &= ~static_cast<std::uint64_t>(GHOST_IMAGE_FEAT_PARENT);
    for (const auto& e : extents_)
        if (e.link == kNoLink)
            return Error::from_errno(EINVAL, "flattening a chain whose parents were not followed");
    image::Writer w(out);
    auto e = extents_.begin();
    return image::write(w, img, [&](image::Writer& to, const image::Vma& v) -> Result<void> {
        while (e != extents_.end() && e->addr < v.rec.end) {
            // One PAGES section per stretch of adjacent extents.
            auto last = e;
            std::uint64_t n = e->nr_pages;
            while (std::next(last) != extents_.end() &&
                   std::next(last)->addr == last->addr + last->nr_pages * kPage &&
                   std::next(last)->addr < v.rec.end) {
                ++last;
                n += last->nr_pages;
            }
            to.pages_begin(e->addr, n);
            for (; e != std::next(last); ++e)
                to.page_data(links_[e->link].view.bytes().subspan(e->offset, e->nr_pages * kPage));
            if (auto s = to.status(); !s)
                return s;
        }
        return {};
    });
}

namespace {

// With owner, an image that does not run as that user is refused before
// any parent of it is opened.
Result<UniqueFd> flatten_link(Link top, const Owner* owner) {
    if (owner)
        if (auto r = image::check_owner(top.img, *owner); !r)
            return r.error();
    auto c = Chain::follow(std::move(top));
    if (!c)
        return c.error();
    return c->flattened();
}

} // namespace

Result<UniqueFd> flatten_if_incremental(int fd, const Owner* owner) {
    struct stat st {};
    const off_t at = ::lseek(fd, 0, SEEK_CUR);
    if (at < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return UniqueFd();
    ghost_image_header h{};
    const ssize_t n = ::pread(fd, &h, sizeof(h), at);
    if (n != static_cast<ssize_t>(sizeof(h)) || h.magic != GHOST_IMAGE_MAGIC ||
        !(h.features & GHOST_IMAGE_FEAT_PARENT))
        return UniqueFd();
    std::error_code ec;
    std::string path = fs::read_symlink(fmt::format("/proc/self/fd/{}", fd), ec).string();
    if (ec)
        path = "the image";
    auto l = load_fd(fd, path);
    if (!l)
        return l.error();
    return flatten_link(std::move(*l), owner);
}

Result<UniqueFd> flatten_if_incremental(std::span<const std::byte> bytes, const std::string& dir,
                                        const Owner* owner) {
    ghost_image_header h{};
    if (bytes.size() < sizeof(h))
        return UniqueFd();
    std::memcpy(&h, bytes.data(), sizeof(h));
    if (h.magic != GHOST_IMAGE_MAGIC || !(h.features & GHOST_IMAGE_FEAT_PARENT))
        return UniqueFd();
    auto l = load_bytes(bytes, dir.empty() ? std::string("the image")
                                           : (fs::path(dir) / "(standard input)").string());
    if (!l)
        return l.error();
    return flatten_link(std::move(*l), owner);
}

} // namespace ghost::chain
