// SPDX-License-Identifier: LGPL-2.1-or-later
// Incremental export in the user engine (dirty.hpp): soft-dirty tracking or
// page comparison, and the record of each process's last leave-running
// checkpoint, which is the only image a child may name as its parent.
#include "user/dirty.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "ghost/io.hpp"
#include "sys.hpp"
#include "user/proc.hpp"

namespace ghost::user {

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kPmSoftDirty = 1ULL << 55;
constexpr std::uint64_t kPmExclusive = 1ULL << 56; // PM_MMAP_EXCLUSIVE

// Where the records live; empty when there is no place for them.
std::string state_dir() {
    if (const char* d = std::getenv("GHOST_STATE_DIR"); d && *d)
        return d;
    if (::geteuid() == 0)
        return "/run/ghost/checkpoints";
    if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x)
        return fmt::format("{}/ghost/checkpoints", x);
    return {};
}

std::string record_path(const std::string& dir, pid_t pid, std::uint64_t start) {
    return fmt::format("{}/{}-{}", dir, pid, start);
}

struct Record {
    chain::ImageId id;
    bool cleared = false;
};

std::optional<Record> read_record(const std::string& path) {
    auto text = read_text(path);
    if (!text)
        return std::nullopt;
    Record r;
    unsigned long long t = 0, b = 0;
    unsigned long long x = 0; // the xxh64, absent from records of before it
    unsigned c = 0;
    int pid = 0, cleared = 0;
    if (std::sscanf(text->c_str(), "%d %llu %llu %x %d %llx", &pid, &t, &b, &c, &cleared, &x) < 5)
        return std::nullopt;
    r.id = {b, c, t, pid, x};
    r.cleared = cleared != 0;
    return r;
}

// Records of processes that are gone (their pid now has another start
// time, or none).
void prune(const std::string& dir) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        const auto dash = name.find('-');
        if (dash == std::string::npos)
            continue;
        const auto pid = static_cast<pid_t>(parse_u64(name.substr(0, dash)));
        auto st = start_time(pid);
        if (pid <= 0 || !st || *st != parse_u64(name.substr(dash + 1)))
            ::unlink(e.path().c_str());
    }
}

} // namespace

bool soft_dirty_supported() {
    static const bool supported = [] {
        void* p =
            ::mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return false;
        static_cast<volatile char*>(p)[0] = 1;
        std::uint64_t e = 0;
        UniqueFd pm(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
        const bool ok = pm && ::pread(pm.get(), &e, sizeof(e),
                                      static_cast<off_t>(reinterpret_cast<std::uintptr_t>(p) /
                                                         kPage * sizeof(e))) == sizeof(e);
        ::munmap(p, kPage);
        return ok && (e & kPmSoftDirty);
    }();
    return supported;
}

Result<std::uint64_t> start_time(pid_t pid) {
    auto st = read_stat(pid);
    if (!st)
        return st.error();
    if (st->size() <= 22)
        return Error::from_errno(EIO, fmt::format("/proc/{}/stat is too short", pid));
    return parse_u64((*st)[22]);
}

Result<Parent> Parent::open(pid_t pid, const std::string& path) {
    auto st = user::start_time(pid);
    if (!st)
        return Error::from_errno(ESRCH, fmt::format("no process with pid {}", pid));
    auto link = chain::load(path);
    if (!link)
        return Error{link.error().code,
                     fmt::format("cannot use the parent image: {}", link.error().what())};
    const auto& img = link->img;
    if (img.header.pid != pid)
        return Error::from_errno(EINVAL, fmt::format("{} cannot be the parent: it is an image of "
                                                     "pid {}, not of process {}",
                                                     path, img.header.pid, pid));
    if (img.parent && img.parent->start_time != *st)
        return Error::from_errno(EINVAL, fmt::format("{} cannot be the parent: it is an image of "
                                                     "an earlier process with pid {}",
                                                     path, pid));
    const std::string dir = state_dir();
    const auto rec = dir.empty() ? std::nullopt : read_record(record_path(dir, pid, *st));
    if (!rec)
        return Error::from_errno(
            EINVAL, fmt::format("{} cannot be the parent: process {} has had no complete "
                                "leave-running checkpoint since it started (none recorded in "
                                "{}), so nothing tells which pages it wrote",
                                path, pid, dir.empty() ? "$GHOST_STATE_DIR" : dir));
    if (rec->id != chain::id_of(img))
        return Error::from_errno(
            EINVAL,
            fmt::format("{} cannot be the parent: it is {}, but process {}'s last "
                        "leave-running checkpoint, which pages written are counted "
                        "from, is {}",
                        path, chain::describe(chain::id_of(img)), pid, chain::describe(rec->id)));
    const char* force = std::getenv("GHOST_DIRTY_TRACKING");
    const bool compare = force && std::string_view(force) == "compare";
    const DirtyMode mode = rec->cleared && soft_dirty_supported() && !compare ? DirtyMode::SoftDirty
                                                                              : DirtyMode::Compare;
    std::string abs = fs::absolute(path).lexically_normal().string();
    auto c = chain::Chain::follow(std::move(*link), mode == DirtyMode::Compare);
    if (!c)
        return c.error();
    return Parent(std::move(*c), std::move(abs), mode, *st);
}

Parent Parent::of_round(const ghost_parent& rec, Ranges pages, Ranges tracked, Ranges written) {
    // The path hint names no file: the images travel as one stream.
    Parent p(std::nullopt, fmt::format("(pre-copy of process {}, image {})", rec.pid, rec.depth),
             DirtyMode::Tracked, rec.start_time);
    p.round_ = rec;
    p.round_.path_len = static_cast<std::uint32_t>(p.path_.size());
    p.pages_ = std::move(pages);
    p.tracked_ = std::move(tracked);
    p.written_ = std::move(written);
    return p;
}

ghost_parent Parent::record() const {
    if (mode_ == DirtyMode::Tracked)
        return round_;
    const auto& img = chain_->top().img;
    ghost_parent p{};
    p.bytes = img.bytes;
    p.crc32c = img.crc32c;
    p.xxh64 = img.xxh64;
    p.depth = img.parent ? img.parent->depth + 1 : 1;
    p.time_ns = img.header.time_ns;
    p.start_time = start_time_;
    p.pid = img.header.pid;
    p.path_len = static_cast<std::uint32_t>(path_.size());
    return p;
}

bool Parent::inherits(std::uint64_t e, std::uint64_t addr) const {
    if (mode_ == DirtyMode::Tracked)
        return tracked_.contains(addr) && !written_.contains(addr) && pages_.contains(addr);
    // Not soft-dirty is not enough: the shared zero page (a page dropped
    // and then only read) and a page KSM merged have no soft-dirty bit
    // whatever they hold. Only a page mapped here alone is inherited; any
    // other is carried again (bytes, never a wrong page).
    return mode_ == DirtyMode::SoftDirty && !(e & kPmSoftDirty) && (e & kPmExclusive) &&
           chain_->has(addr);
}

std::uint64_t Parent::stretch(std::uint64_t addr, std::uint64_t end, bool& inherited) const {
    inherited = inherits(0, addr);
    return std::min(
        {end, tracked_.next_change(addr), written_.next_change(addr), pages_.next_change(addr)});
}

Tracking Tracking::reset(pid_t pid) {
    Tracking t;
    t.pid_ = pid;
    auto st = start_time(pid);
    const std::string dir = state_dir();
    if (!st || dir.empty())
        return t;
    t.start_time_ = *st;
    // The old record goes first: were it kept while the bits are cleared,
    // a child of it would miss the pages written before this capture.
    if (::unlink(record_path(dir, pid, *st).c_str()) != 0 && errno != ENOENT)
        return t;
    if (soft_dirty_supported()) {
        UniqueFd f(::open(fmt::format("/proc/{}/clear_refs", pid).c_str(), O_WRONLY | O_CLOEXEC));
        if (!f || ::write(f.get(), "4", 1) != 1)
            return t;
        t.cleared_ = true;
    }
    t.ok_ = true;
    return t;
}

void Tracking::remember(const chain::ImageId& id) const {
    if (!ok_)
        return;
    const std::string dir = state_dir();
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
        return;
    ::chmod(dir.c_str(), 0700);
    prune(dir);
    const std::string path = record_path(dir, pid_, start_time_);
    const std::string tmp = path + ".new";
    UniqueFd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!f)
        return;
    const std::string text = fmt::format("{} {} {} {:x} {} {:x}\n", id.pid, id.time_ns, id.bytes,
                                         id.crc32c, cleared_ ? 1 : 0, id.xxh64);
    if (!write_all(f.get(), std::as_bytes(std::span(text))) || ::rename(tmp.c_str(), path.c_str()))
        ::unlink(tmp.c_str());
}

Result<void> PageSource::read(std::uint64_t addr, std::span<std::byte> chunk, bool readable) const {
    auto rd = readable ? from.read(addr, chunk) : from.read_mem(addr, chunk);
    if (rd || !lost)
        return rd;
    std::memset(chunk.data(), 0, chunk.size());
    lost->add(addr, addr + chunk.size());
    return {};
}

Result<void> write_pages_incremental(const PageSource& from, image::Writer& w, const image::Vma& v,
                                     std::span<std::byte> buf, const Parent& parent) {
    const bool readable = v.rec.prot & PROT_READ;
    const bool compare = parent.mode() == DirtyMode::Compare;
    std::vector<char> same(buf.size() / kPage);
    for (const auto& r : v.runs) {
        if (r.parent) {
            w.parent_pages(r.addr, r.nr_pages);
            continue;
        }
        if (!compare)
            w.pages_begin(r.addr, r.nr_pages);
        std::uint64_t inherit_from = 0, inherit_n = 0; // pending inherited run
        const auto flush_inherited = [&] {
            if (inherit_n)
                w.parent_pages(inherit_from, inherit_n);
            inherit_n = 0;
        };
        std::uint64_t addr = r.addr, left = r.nr_pages * kPage;
        while (left) {
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
            const std::span<std::byte> chunk(buf.data(), n);
            if (auto rd = from.read(addr, chunk, readable); !rd)
                return rd;
            if (!compare) {
                w.page_data(chunk);
            } else {
                const std::size_t pages = n / kPage;
                for (std::size_t i = 0; i < pages; i++) {
                    const auto old = parent.chain().page(addr + i * kPage);
                    same[i] = !old.empty() &&
                              std::memcmp(old.data(), chunk.data() + i * kPage, kPage) == 0;
                }
                for (std::size_t i = 0; i < pages;) {
                    std::size_t j = i;
                    while (j < pages && same[j] == same[i])
                        j++;
                    if (same[i]) {
                        if (!inherit_n)
                            inherit_from = addr + i * kPage;
                        inherit_n += j - i;
                    } else {
                        flush_inherited();
                        w.pages_begin(addr + i * kPage, j - i);
                        w.page_data(chunk.subspan(i * kPage, (j - i) * kPage));
                    }
                    i = j;
                }
            }
            if (auto s = w.status(); !s)
                return s;
            addr += n;
            left -= n;
        }
        flush_inherited();
    }
    return w.status();
}

} // namespace ghost::user
