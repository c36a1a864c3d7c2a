// SPDX-License-Identifier: LGPL-2.1-or-later
// The user engine's import: the caller becomes the image, rebuilt by a
// tracer it forks (Documentation/user-engine.md).
//
// The caller opens everything the image names (files, mapped files, the
// working directory) while it still is itself, so any refusal comes back as
// an error. Then a tracer process it forks seizes it and rebuilds it as the
// image (rebuild.hpp); up to the tracer's point of no return the caller is
// put back as it was and gets the tracer's reason as an error.
#include "user/user.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
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
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ghost_format.h"
#include "ghost_policy.h"
#include "ghost_vma_attrs.h"
#include "sys.hpp"
#include "user/attrs.hpp"
#include "user/creds.hpp"
#include "user/lazy.hpp"
#include "user/locks.hpp"
#include "user/proc.hpp"
#include "user/rebuild.hpp"
#include "user/shadow.hpp"
#include "user/vma_attrs.hpp"
#include "zstd_stream.hpp"

namespace ghost::user {

namespace {

using rebuild::PageData;
using rebuild::Plan;

using rebuild::kCapSysResource;
using rebuild::kPage;
using rebuild::kTaskSize;

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

// A number from /proc: a sysctl's value, or with a key a line of
// /proc/meminfo; dflt where it cannot be read.
std::uint64_t proc_number(const char* path, std::string_view key, std::uint64_t dflt) {
    auto t = read_text(path);
    if (!t)
        return dflt;
    const std::string v = key.empty() ? *t : status_field(*t, key);
    return v.empty() ? dflt : parse_u64(v);
}

// What the image's memory may take, under the caller's soft limits as
// they are while it is made (the image's are set after), vm.max_map_count
// and vm.overcommit_memory: as ghost.ko asks it, before the point of no
// return.
Result<void> check_vm_size(const image::Image& img) {
    ghost_vm_size_facts size{};
    for (const auto& v : img.vmas) {
        const std::uint64_t kib = (v.rec.end - v.rec.start) >> 10;
        size.total_kib += kib;
        if (ghost_vma_is_data(&v.rec))
            size.data_kib += kib;
        // A mapping with pages is made writable while they are written in
        // (Rebuild::made_prot()), and stays charged after.
        const std::uint32_t made = v.rec.prot | (v.runs.empty() ? 0 : PROT_WRITE);
        if (ghost_vma_is_charged(&v.rec, made) && kib > size.charged_kib) {
            size.charged_kib = kib;
            size.charged_at = v.rec.start;
        }
    }
    rlimit as{}, data{};
    ::getrlimit(RLIMIT_AS, &as);
    ::getrlimit(RLIMIT_DATA, &data);
    size.as_kib = as.rlim_cur >> 10;
    size.data_cur_kib = data.rlim_cur >> 10;
    size.data_max_kib = data.rlim_max >> 10;
    size.nr_maps = img.vmas.size();
    size.max_map_count = proc_number("/proc/sys/vm/max_map_count", {}, GHOST_DEFAULT_MAX_MAP_COUNT);
    size.overcommit =
        static_cast<std::uint32_t>(proc_number("/proc/sys/vm/overcommit_memory", {}, 0));
    size.ram_swap_kib =
        proc_number("/proc/meminfo", "MemTotal", 0) + proc_number("/proc/meminfo", "SwapTotal", 0);
    char reason[GHOST_REASON_LEN] = {};
    if (const int err = ghost_policy_vm_size(&size, reason, sizeof(reason)); err < 0)
        return Error::from_errno(-err, reason);
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

// The pages carried for a private file mapping are still in the file
// (ghost_pages_within_file(), the kernel engine's rule).
Result<void> check_file_length(const image::Vma& v, int fd) {
    if (v.runs.empty())
        return {};
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return Error::from_errno(
            errno, fmt::format("cannot stat {}, mapped at {:#x}", v.path, v.rec.start));
    const auto& last = v.runs.back();
    const std::uint64_t end_page = v.rec.pgoff + (last.addr - v.rec.start) / kPage + last.nr_pages;
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (ghost_pages_within_file(end_page, size, kPage))
        return {};
    char why[GHOST_REASON_LEN];
    std::snprintf(why, sizeof(why), GHOST_FILE_SHORT_REASON,
                  static_cast<unsigned long long>(v.rec.start),
                  static_cast<unsigned long long>(size),
                  static_cast<unsigned long long>(end_page * kPage), v.path.c_str());
    return Error::from_errno(ESTALE, why);
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
            // Without waiting on a FIFO the image may name; only what can
            // be mapped (a FIFO, a directory or a socket would fail the
            // mmap past the point of no return).
            const int fd0 = ::open(v.path.c_str(), mode | O_CLOEXEC | O_NONBLOCK);
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
            struct stat st {};
            if (::fstat(*fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)))
                return Error::from_errno(
                    EINVAL, fmt::format("{}, mapped at {:#x}, is not a file that can be mapped",
                                        v.path, v.rec.start));
            it->second = *fd;
        }
        if (auto r = check_file_length(v, it->second); !r)
            return r;
        p.vma_fd.push_back(it->second);
    }

    for (const auto& f : img.files) {
        const auto& r = f.rec;
        p.file_fd.push_back(-1);
        if (r.kind == GHOST_FILE_INHERIT) {
            // From high_fd_base up the descriptors are the restorer's own
            // (the image, the status pipe): the image may not take one.
            if (r.fd >= high_fd_base)
                return Error::from_errno(
                    EBADF, fmt::format("fd {} ({}) is to be inherited, but descriptors from {} "
                                       "up are the restorer's own",
                                       r.fd, f.path, high_fd_base));
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
        // O_NOCTTY always: reopening a terminal must not make it the
        // caller's controlling terminal (open(2) keeps no such flag).
        // O_NONBLOCK until it is known what was opened: a FIFO's open
        // would wait for its other end (for ever, if the image named one
        // where it had a file). A FIFO opened for writing without a reader
        // is refused (ENXIO), as its writes would have nowhere to go.
        const int flags = (static_cast<int>(r.flags) & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_NOCTTY;
        auto fd = keep_high(p, ::open(f.path.c_str(), flags | O_CLOEXEC | O_NONBLOCK),
                            fmt::format("cannot reopen {} as fd {}", f.path, r.fd));
        if (!fd)
            return fd.error();
        struct stat st {};
        if (::fstat(*fd, &st) != 0 || (st.st_mode & S_IFMT) != r.mode)
            return Error::from_errno(
                EBADMSG,
                fmt::format("{} (fd {}) is no longer the same kind of file", f.path, r.fd));
        if (!(flags & (O_NONBLOCK | O_PATH)) &&
            ::fcntl(*fd, F_SETFL, ::fcntl(*fd, F_GETFL) & ~O_NONBLOCK) != 0)
            return Error::from_errno(errno, fmt::format("cannot make {} (fd {}) blocking again: {}",
                                                        f.path, r.fd, errno_text(errno)));
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

} // namespace

namespace {

Error restore(const image::Image& img, std::vector<PageData> pages, bool stopped,
              Shadow* shadow = nullptr, bool lazy_pages = false) {
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
    if (auto r = check_advice(img); !r)
        return r.error();
    // Its userfaultfd is made while the caller may, before it takes the
    // image's credentials, and only the pager holds it (lazy_start.cpp).
    UniqueFd pager;
    if (lazy_pages) {
        std::vector<lazy::Piece> pieces;
        pieces.reserve(pages.size());
        for (const auto& pg : pages)
            pieces.push_back({pg.addr, pg.data});
        auto l = lazy::start_pager(img, ::getpid(), pieces);
        if (!l)
            return l.error();
        pager = std::move(*l);
    }
    // The image's files are opened as the image's credentials (creds.cpp),
    // in a session of its own when root restores another user's process.
    if (auto r = assume_image_creds(img); !r)
        return r.error();
    // As the image's user, with the limits it will have when its memory is
    // locked (a root restorer's CAP_IPC_LOCK is gone by then).
    if (auto r = check_memlock(img); !r)
        return r.error();
    if (auto r = check_vm_size(img); !r)
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
    if (pager) {
        auto l = keep_high(p, pager.release(), "the link to the lazy restart's pager");
        if (!l)
            return l.error();
        p.pager = *l;
    }
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
        // The caller's descriptors (the image's numbers) go: the restored
        // process's peers must not see them held open by us. The
        // restorer's own, from high_fd_base up, stay until we exit, after
        // the release: whoever waits for them to close (restart()'s status
        // pipe) learns of the restore only once the process runs as the
        // image and is no longer held (it may be checkpointed at once).
        // Not only from fd_base: below it, an image with descriptors from
        // high_fd_base up has the caller's own copies closed or replaced
        // as its descriptors are placed, before its locks and its task.
        close_below(static_cast<unsigned>(high_fd_base), {2, rep_wr.get(), go_rd.get()});
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

Error restore_self(std::span<const std::byte> bytes, const image::Image& img, bool stopped,
                   bool lazy_pages) {
    if (img.parent && lazy_pages)
        return Error::from_errno(EOPNOTSUPP, "a lazy restart reads one whole image in place; "
                                             "this one is incremental (restart it without "
                                             "lazy, which follows its chain of parents)");
    if (img.parent)
        return Error::from_errno(EOPNOTSUPP, "the image is incremental: its chain of parents "
                                             "must be flattened first (ghost::restart does)");
    std::vector<PageData> pages;
    for (const auto& v : img.vmas)
        for (const auto& r : v.runs)
            pages.push_back({r.addr, bytes.subspan(r.data_offset, r.nr_pages * kPage)});
    return restore(img, std::move(pages), stopped, nullptr, lazy_pages);
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
