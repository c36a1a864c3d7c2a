// SPDX-License-Identifier: LGPL-2.1-or-later
// The lazy restart's pager (lazy.hpp).
#include "user/lazy.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <iterator>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "sys.hpp"
#include "user/lazy_guard.hpp"
#include "user/proc.hpp"

namespace ghost::user::lazy {

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kFaultChunk = 64 * 1024; // put in around a touched page
constexpr std::uint64_t kPushChunk = 1 << 20;    // put in per background step
constexpr std::uint64_t kEvents = UFFD_FEATURE_EVENT_FORK | UFFD_FEATURE_EVENT_REMAP |
                                  UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP;

using Range = std::pair<std::uint64_t, std::uint64_t>;

// What is still to go into one address space: [addr, end) from src.
class Pending {
  public:
    struct Run {
        std::uint64_t end;
        const std::byte* src;
    };

    bool empty() const { return runs_.empty(); }
    void add(std::uint64_t addr, std::uint64_t end, const std::byte* src) {
        if (addr < end)
            runs_[addr] = {end, src};
    }
    // Forgets [lo, hi): put in, dropped, or unmapped by the process.
    void erase(std::uint64_t lo, std::uint64_t hi) {
        auto it = runs_.lower_bound(lo);
        if (it != runs_.begin() && std::prev(it)->second.end > lo)
            --it;
        while (it != runs_.end() && it->first < hi) {
            const std::uint64_t a = it->first;
            const Run r = it->second;
            it = runs_.erase(it);
            if (a < lo)
                runs_[a] = {lo, r.src};
            if (r.end > hi)
                runs_[hi] = {r.end, r.src + (hi - a)};
        }
    }
    // The run holding addr, or nullptr.
    const std::pair<const std::uint64_t, Run>* find(std::uint64_t addr) const {
        auto it = runs_.upper_bound(addr);
        if (it == runs_.begin())
            return nullptr;
        --it;
        return addr < it->second.end ? &*it : nullptr;
    }
    const std::pair<const std::uint64_t, Run>& first() const { return *runs_.begin(); }
    // [lo, hi) narrowed around addr (pending for nothing) to where nothing
    // is pending.
    Range clear_around(std::uint64_t addr, std::uint64_t lo, std::uint64_t hi) const {
        const auto next = runs_.upper_bound(addr);
        if (next != runs_.end())
            hi = std::min(hi, next->first);
        if (next != runs_.begin())
            lo = std::max(lo, std::prev(next)->second.end);
        return {lo, hi};
    }
    // mremap moved [from, from + len) to to: so did what was still to go.
    void move(std::uint64_t from, std::uint64_t to, std::uint64_t len) {
        std::map<std::uint64_t, Run> moved;
        for (auto it = runs_.begin(); it != runs_.end(); ++it) {
            const std::uint64_t lo = std::max(it->first, from);
            const std::uint64_t hi = std::min(it->second.end, from + len);
            if (lo < hi)
                moved[lo - from + to] = {hi - from + to, it->second.src + (lo - it->first)};
        }
        erase(from, from + len);
        for (const auto& [a, r] : moved) {
            erase(a, r.end);
            runs_[a] = r;
        }
    }

  private:
    std::map<std::uint64_t, Run> runs_;
};

struct Space {
    std::uint32_t id = 0; // the guard's name for it
    UniqueFd uffd;
    Pending pending;
    // Faults read while the process was changing its mappings (the copy
    // said EAGAIN): their threads wait until these are served.
    std::vector<std::uint64_t> retry;
    // Whose it is (the restored process's; 0 for a fork's, whose pid no
    // event names), and the mappings a fork of it does not copy as the
    // pager last knew them.
    pid_t pid = 0;
    std::vector<Range> not_copied;
};

// The mappings of pid that a fork does not copy (MADV_WIPEONFORK: empty in
// the child; MADV_DONTFORK: absent), from its smaps.
Result<std::vector<Range>> not_copied(pid_t pid) {
    auto maps = read_maps(pid, true);
    if (!maps)
        return maps.error();
    std::vector<Range> r;
    for (const auto& m : *maps)
        if (m.has_flag("wf") || m.has_flag("dc"))
            r.emplace_back(m.start, m.end);
    return r;
}

// A fork of s: it has what s has, so it lacks what s still lacks, except
// where the fork copies nothing (wiped or left out), which it has empty.
// What a fork copies is decided by the parent's flags as the fork was made:
// the parent waits in fork() until the pager reads the event, so its smaps
// read now tell them but for a flag it changed in the microseconds since.
// A fork's own forks go by the flags it had when it was made.
std::unique_ptr<Space> fork_of(Space& s, int ufd) {
    static std::uint32_t next_id = 1;
    auto child = std::make_unique<Space>();
    child->id = next_id++;
    child->uffd = UniqueFd(ufd);
    child->pending = s.pending;
    if (s.pid > 0)
        if (auto nc = not_copied(s.pid))
            s.not_copied = std::move(*nc);
    for (const auto& [lo, hi] : s.not_copied)
        child->pending.erase(lo, hi);
    child->not_copied = s.not_copied;
    return child;
}

void wake(Space& s, std::uint64_t lo, std::uint64_t len) {
    uffdio_range r{lo, len};
    ::ioctl(s.uffd.get(), UFFDIO_WAKE, &r);
}

enum class Put { Done, Again, Gone };

// Puts [lo, hi) of s in from src; what went in (or was there already) is
// no longer pending. Again: the process is changing its mappings (an event
// is waiting to be read). Gone: its memory is.
Result<Put> put(Space& s, std::uint64_t lo, std::uint64_t hi, const std::byte* src) {
    const std::uint64_t start = lo;
    Put how = Put::Done;
    while (lo < hi) {
        uffdio_copy c{};
        c.dst = lo;
        c.src = reinterpret_cast<std::uint64_t>(src + (lo - start));
        c.len = hi - lo;
        if (::ioctl(s.uffd.get(), UFFDIO_COPY, &c) == 0)
            break;
        const int err = errno;
        if (c.copy > 0) {
            lo += static_cast<std::uint64_t>(c.copy);
            continue;
        }
        if (err == EEXIST) { // in already (a fork's copy, or touched and woken)
            wake(s, lo, kPage);
            lo += kPage;
            continue;
        }
        if (err == EAGAIN) {
            how = Put::Again;
            hi = lo;
            break;
        }
        if (err == ESRCH)
            return Put::Gone;
        if ((err == ENOENT || err == EINVAL) && hi - lo > kPage) {
            // The range crosses from one mapping into another (the process
            // split it: mprotect, mlock, madvise of a part), or a part is
            // gone: the kernel takes a copy within one mapping only. One
            // page, then the rest again.
            auto one = put(s, lo, lo + kPage, src + (lo - start));
            if (!one)
                return one;
            if (*one != Put::Done) {
                how = *one;
                hi = lo;
                break;
            }
            lo += kPage;
            continue;
        }
        if (err == ENOENT || err == EINVAL) { // this page is no longer ours: unmapped
            wake(s, lo, hi - lo);
            break;
        }
        return Error::from_errno(err, fmt::format("UFFDIO_COPY at {:#x}: {}", lo, errno_text(err)));
    }
    s.pending.erase(start, how == Put::Again ? lo : hi);
    return how;
}

// A fault at a page nothing is pending for (never in the image, dropped
// since, or wiped in a fork): zeros, as for any anonymous memory. In a
// fork's mapping that the fork did not copy (not_copied: wiped), the
// aligned 64 KiB around it go at once, as a run of data does: a child
// reading such a mapping would otherwise wait on the pager once per page
// (seconds for 32 MiB in a slow VM). Elsewhere one page only, as the
// kernel maps one: the neighbours of a dropped page stay not resident.
// Again when the process is changing its mappings.
Put zero(Space& s, std::uint64_t page) {
    std::uint64_t lo = page, hi = page + kPage;
    for (const auto& [a, b] : s.not_copied)
        if (a <= page && page < b) {
            const std::uint64_t chunk = page & ~(kFaultChunk - 1);
            std::tie(lo, hi) =
                s.pending.clear_around(page, std::max(a, chunk), std::min(b, chunk + kFaultChunk));
            break;
        }
    uffdio_zeropage z{};
    z.range = {lo, hi - lo};
    if (::ioctl(s.uffd.get(), UFFDIO_ZEROPAGE, &z) == 0)
        return Put::Done;
    if (errno == EAGAIN && z.zeropage == -EAGAIN)
        return Put::Again;
    if (hi - lo > kPage) {
        // A page there already, or the chunk crosses into another mapping
        // (the kernel fills within one): the faulting page alone.
        z = {};
        z.range = {page, kPage};
        if (::ioctl(s.uffd.get(), UFFDIO_ZEROPAGE, &z) == 0)
            return Put::Done;
        if (errno == EAGAIN && z.zeropage == -EAGAIN)
            return Put::Again;
    }
    wake(s, page, kPage); // there already, or no longer mapped: let it retry
    return Put::Done;
}

// A thread faulted at page: what is pending around it goes in, or zeros.
Result<Put> fault(Space& s, std::uint64_t page) {
    const auto* run = s.pending.find(page);
    if (!run)
        return zero(s, page);
    const std::uint64_t lo = std::max(run->first, page & ~(kFaultChunk - 1));
    const std::uint64_t hi = std::min(run->second.end, lo + kFaultChunk);
    auto p = put(s, lo, hi, run->second.src + (lo - run->first));
    if (p && *p == Put::Again && !s.pending.find(page))
        return Put::Done; // put in before the change
    return p;
}

// Serves the faults that met a change of the mappings; false when the
// process's memory is gone.
Result<bool> retry(Space& s) {
    // The thread that changed the mappings goes on once its event is read,
    // and copies fail until it has; one that changes them without pause
    // leaves a few microseconds between two changes. Tries for up to 2 ms
    // to land in such a gap (the faulting thread waits meanwhile).
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    while (!s.retry.empty() && std::chrono::steady_clock::now() < until) {
        std::vector<std::uint64_t> again;
        for (const auto page : std::exchange(s.retry, {})) {
            auto p = fault(s, page);
            if (!p)
                return p.error();
            if (*p == Put::Gone)
                return false;
            if (*p == Put::Again)
                again.push_back(page);
        }
        s.retry = std::move(again);
    }
    return true;
}

// Reads and handles one batch of s's messages (one: a thread that drops
// pages without pause must not keep the pager from the faults it has put
// off); new address spaces (forks) are added to spaces. Returns how many
// there were, or -1 when s's memory is gone.
//
// The events of a batch come after its faults, but have all taken effect
// when read() returns (the thread that caused each was let go as it was
// read): so they are handled first, in order, and the faults after them.
// A fault served first could copy into pages the process dropped since
// (MADV_DONTNEED: the image's data where it now has zeros), or leave a
// fork made since without pages its parent then lacked.
Result<int> serve(std::vector<std::unique_ptr<Space>>& spaces, Space& s, Guard& guard) {
    std::array<uffd_msg, 32> msgs;
    ssize_t n;
    while ((n = ::read(s.uffd.get(), msgs.data(), sizeof(msgs))) < 0 && errno == EINTR) {
    }
    if (n < 0 && errno == EAGAIN)
        return 0;
    if (n <= 0) {
        // Not "gone": a fork's event that could not be read (no descriptor
        // left for the child's userfaultfd) would leave both spaces
        // without a pager.
        const int err = n < 0 ? errno : EIO;
        return Error::from_errno(err, fmt::format("reading the userfaultfd: {}", errno_text(err)));
    }
    const std::size_t count = static_cast<std::size_t>(n) / sizeof(uffd_msg);
    for (std::size_t i = 0; i < count; i++) {
        const uffd_msg& m = msgs[i];
        switch (m.event) {
        case UFFD_EVENT_FORK: {
            auto child = fork_of(s, static_cast<int>(m.arg.fork.ufd));
            if (auto g = guard.add(child->id, child->uffd.get()); !g)
                return g.error();
            spaces.push_back(std::move(child));
            break;
        }
        case UFFD_EVENT_REMAP:
            s.pending.move(m.arg.remap.from, m.arg.remap.to, m.arg.remap.len);
            break;
        case UFFD_EVENT_REMOVE:
        case UFFD_EVENT_UNMAP:
            s.pending.erase(m.arg.remove.start, m.arg.remove.end);
            break;
        default:
            break;
        }
    }
    for (std::size_t i = 0; i < count; i++) {
        const uffd_msg& m = msgs[i];
        if (m.event != UFFD_EVENT_PAGEFAULT)
            continue;
        const std::uint64_t page = m.arg.pagefault.address & ~(kPage - 1);
        auto p = fault(s, page);
        if (!p)
            return p.error();
        if (*p == Put::Gone)
            return -1;
        if (*p == Put::Again)
            s.retry.push_back(page);
    }
    return static_cast<int>(count);
}

// The pager's life: until every space has all its pages or is gone.
// Until the restorer closes its end of restorer (it exits once the process
// runs as the image), only faults are served: the background push would
// take the CPU the rest of the rebuild needs.
Result<void> page(std::vector<std::unique_ptr<Space>>& spaces, UniqueFd restorer, Guard& guard) {
    // GHOST_LAZY_PACE_US: a pause between background steps, for tests that
    // need the process to run while much of its memory is still pending.
    const char* pace_env = std::getenv("GHOST_LAZY_PACE_US");
    const long pace_us =
        std::clamp(pace_env ? std::strtol(pace_env, nullptr, 10) : 0L, 0L, 10L * 1000 * 1000);
    // Faults come first, but a push step still comes at least this often:
    // only a copy finds a fork that exited or called exec (ESRCH), and a
    // process forking in a loop sends a message every time the pager
    // looks, so without it every fork's userfaultfd would be kept.
    const auto push_every = std::chrono::microseconds(std::max(pace_us, 10000L));
    auto last_push = std::chrono::steady_clock::now();
    // Lets go of the spaces pred picks: the guard's copy of a userfaultfd
    // closes first, then the pager's; the last close unregisters the
    // mappings, and later faults there are ordinary.
    const auto let_go = [&](auto pred) {
        std::erase_if(spaces, [&](const auto& s) {
            const bool go = pred(*s);
            if (go)
                guard.drop(s->id);
            return go;
        });
    };
    for (;;) {
        // A space with nothing pending is let go.
        let_go([](const Space& s) { return s.pending.empty(); });
        if (spaces.empty())
            return {};
        std::vector<pollfd> fds;
        for (const auto& s : spaces)
            fds.push_back({s->uffd.get(), POLLIN, 0});
        if (restorer)
            fds.push_back({restorer.get(), POLLIN, 0});
        const bool retries = std::any_of(spaces.begin(), spaces.end(),
                                         [](const auto& s) { return !s->retry.empty(); });
        const timespec wait{pace_us / 1000000, (pace_us % 1000000) * 1000};
        const timespec soon{0, 1000000}; // faults wait for the change to be over
        const int r = ::ppoll(fds.data(), fds.size(),
                              retries    ? &soon
                              : restorer ? nullptr
                                         : &wait,
                              nullptr);
        if (r < 0 && errno != EINTR)
            return Error::from_errno(errno, fmt::format("poll: {}", errno_text(errno)));
        if (restorer && fds.back().revents) {
            restorer.reset(); // it is done (or gone): push from now on
            continue;
        }
        const std::size_t count = spaces.size(); // serve() may add forks
        std::vector<Space*> gone;
        int handled = 0;
        for (std::size_t i = 0; r > 0 && i < count; i++)
            if (fds[i].revents) {
                auto n = serve(spaces, *spaces[i], guard);
                if (!n)
                    return n.error();
                if (*n < 0)
                    gone.push_back(spaces[i].get());
                else
                    handled += *n;
            }
        for (auto& sp : spaces) {
            if (sp->retry.empty())
                continue;
            auto alive = retry(*sp);
            if (!alive)
                return alive.error();
            if (!*alive)
                gone.push_back(sp.get());
        }
        let_go(
            [&](const Space& s) { return std::find(gone.begin(), gone.end(), &s) != gone.end(); });
        if (restorer)
            continue; // no push while the rebuild goes on
        const auto now = std::chrono::steady_clock::now();
        if ((handled > 0 || !gone.empty()) && now - last_push < push_every)
            continue; // faults first
        last_push = now;
        // Nothing waiting, or a push step due: one step, per space.
        for (auto& s : spaces) {
            if (s->pending.empty())
                continue;
            const auto& [lo, run] = s->pending.first();
            const std::uint64_t hi = std::min(run.end, lo + kPushChunk);
            auto p = put(*s, lo, hi, run.src);
            if (!p)
                return p.error();
            if (*p == Put::Gone)
                s->pending = Pending();
        }
    }
}

} // namespace

Result<void> take_lease(int fd) {
    // The lease makes its taker the file's owner, whom a break would
    // signal (SIGIO, which ends a process that does not expect it: here the
    // process being restored). Nobody is: a writer still waits for the
    // lease to go, up to fs.lease-break-time.
    if (::fcntl(fd, F_SETLEASE, F_RDLCK) == 0) {
        if (::fcntl(fd, F_SETOWN, 0) != 0) {
            const int err = errno;
            ::fcntl(fd, F_SETLEASE, F_UNLCK);
            return Error::from_errno(err,
                                     fmt::format("F_SETOWN on the image: {}", errno_text(err)));
        }
        return {};
    }
    const int err = errno;
    return Error::from_errno(
        err, fmt::format("a lazy restart reads the image in place, and needs a read lease on it "
                         "so that nothing writes it meanwhile (F_SETLEASE: {}){}",
                         errno_text(err),
                         err == EAGAIN   ? ": the image is open for writing somewhere"
                         : err == EACCES ? ": only the image file's owner (or CAP_LEASE) may"
                                         : ""));
}

Result<UniqueFd> open_uffd() {
    UniqueFd fd(static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK)));
    if (!fd)
        return Error::from_errno(
            errno, fmt::format("a lazy restart needs a userfaultfd that serves faults taken in "
                               "system calls (root or CAP_SYS_PTRACE, or "
                               "vm.unprivileged_userfaultfd = 1): userfaultfd: {}",
                               errno_text(errno)));
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = kEvents;
    if (::ioctl(fd.get(), UFFDIO_API, &api) != 0)
        return Error::from_errno(
            errno, fmt::format("a lazy restart needs userfaultfd's fork, mremap and unmap events "
                               "(the fork event needs CAP_SYS_PTRACE): UFFDIO_API: {}",
                               errno_text(errno)));
    return fd;
}

Result<void> register_range(int uffd, std::uint64_t start, std::uint64_t end) {
    uffdio_register r{};
    r.range = {start, end - start};
    r.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (::ioctl(uffd, UFFDIO_REGISTER, &r) != 0)
        return Error::from_errno(
            errno, fmt::format("UFFDIO_REGISTER {:#x}-{:#x}: {}", start, end, errno_text(errno)));
    return {};
}

void serve_pages(UniqueFd uffd, pid_t target, UniqueFd restorer, std::vector<Piece> pieces) {
    const auto fail = [&](const Error& e) {
        // The process would wait forever for a page: it cannot go on.
        kill_tree_saying(target,
                         "lazy restart failed, the restored process is killed: " + e.what());
        ::_exit(1);
    };
    // A descriptor for each fork's userfaultfd, in the pager and its
    // guard: as many as the hard limit allows.
    rlimit nofile{};
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &nofile);
    }
    auto guard = Guard::start(uffd.get(), target, restorer.get());
    if (!guard)
        fail(guard.error());
    std::vector<std::unique_ptr<Space>> spaces;
    spaces.push_back(std::make_unique<Space>());
    spaces.back()->uffd = std::move(uffd);
    spaces.back()->pid = target;
    for (const auto& p : pieces)
        spaces.back()->pending.add(p.addr, p.addr + p.data.size(), p.data.data());
    pieces.clear();
    if (auto r = page(spaces, std::move(restorer), *guard); !r)
        fail(r.error());
    ::_exit(0);
}

} // namespace ghost::user::lazy
