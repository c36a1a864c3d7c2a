// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ghost/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "buffered_source.hpp"
#include "ghost/chain.hpp"
#include "ghost/image.hpp"
#include "sys.hpp"
#include "user/dirty.hpp"
#include "user/shadow.hpp"
#include "user/tracee.hpp"
#include "user/user.hpp"
#include "zstd_stream.hpp"

namespace ghost {

namespace {

using namespace std::chrono_literals;

constexpr std::array<std::byte, 4> zstd_magic{std::byte{0x28}, std::byte{0xb5}, std::byte{0x2f},
                                              std::byte{0xfd}};

Result<UniqueFd> open_pidfd(pid_t pid) {
    UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!fd) {
        const int err = errno;
        if (err == ESRCH)
            return Error::from_errno(err, fmt::format("no process {}", pid));
        return Error::from_errno(err,
                                 fmt::format("cannot open process {}: {}", pid, errno_text(err)));
    }
    return move_fd_high(std::move(fd));
}

int pidfd_signal(int pidfd, int sig) {
    return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

// Calls fn about every 100 ms on its own thread until destroyed.
class Ticker {
  public:
    explicit Ticker(std::function<void()> fn) {
        if (!fn)
            return;
        thread_ = std::jthread([this, fn = std::move(fn)](std::stop_token st) {
            std::unique_lock lk(mu_);
            for (;;) {
                cv_.wait_for(lk, st, 100ms, [] { return false; });
                if (st.stop_requested())
                    return;
                fn();
            }
        });
    }
    ~Ticker() {
        if (thread_.joinable()) {
            thread_.request_stop();
            thread_.join();
        }
    }

  private:
    std::mutex mu_;
    std::condition_variable_any cv_;
    std::jthread thread_;
};

std::uint64_t file_size_since(int fd, off_t start) {
    struct stat st;
    if (::fstat(fd, &st) != 0 || st.st_size < start)
        return 0;
    return static_cast<std::uint64_t>(st.st_size - start);
}

// SIGKILL, then wait (the pidfd polls readable) until the process is gone:
// a checkpoint that says "killed" must mean it.
Result<void> kill_and_wait(int pidfd, pid_t pid) {
    if (pidfd_signal(pidfd, SIGKILL) != 0 && errno != ESRCH)
        return Error::from_errno(errno, fmt::format("the image is complete but process {} could "
                                                    "not be killed: {}",
                                                    pid, errno_text(errno)));
    pollfd p{pidfd, POLLIN, 0};
    int r;
    while ((r = ::poll(&p, 1, 10000)) < 0 && errno == EINTR) {
    }
    if (r == 0) {
        pidfd_signal(pidfd, SIGCONT);
        return Error::from_errno(ETIMEDOUT, fmt::format("the image is complete but process {} "
                                                        "did not die within 10 s of SIGKILL "
                                                        "(it is left running)",
                                                        pid));
    }
    return {};
}

enum class Input { Stream, CompressedFile, RawFile };

// What in is: a pipe or socket, or a regular file holding a compressed or
// a raw image, told by its first bytes, read without moving its offset.
Result<Input> input_kind(int in) {
    struct stat st;
    const off_t at = ::lseek(in, 0, SEEK_CUR);
    if (at < 0 || ::fstat(in, &st) != 0 || !S_ISREG(st.st_mode))
        return Input::Stream;
    std::array<std::byte, 4> head{};
    const ssize_t n = ::pread(in, head.data(), head.size(), at);
    if (n < 0)
        return Error::from_errno(errno, fmt::format("reading the image: {}", errno_text(errno)));
    return is_zstd(std::span(head.data(), static_cast<std::size_t>(n))) ? Input::CompressedFile
                                                                        : Input::RawFile;
}

// Restores the whole image in a file (one a chain was flattened into, a
// memory file; or the caller's own).
Error restore_whole(Engine& engine, int fd, const RestoreOptions& o) {
    auto g = engine.create(Backend::file(fd));
    if (!g)
        return g.error();
    return (*g)->restore_self(o);
}

} // namespace

bool is_zstd(std::span<const std::byte> head) {
    return head.size() >= zstd_magic.size() &&
           std::equal(zstd_magic.begin(), zstd_magic.end(), head.begin());
}

Result<int> reap_leftover_snapshots(pid_t pid) {
    return user::reap_leftover_snapshots(pid);
}

std::uint64_t estimate_image_bytes(pid_t pid) {
    std::ifstream f(fmt::format("/proc/{}/smaps_rollup", pid));
    std::string key;
    std::uint64_t kb = 0;
    while (f >> key) {
        if (key == "Anonymous:" && f >> kb)
            return kb * 1024 + kImageOverheadBytes;
        f.ignore(4096, '\n');
    }
    return 0;
}

Result<ExportStats> checkpoint(Engine& engine, pid_t pid, int out, const CheckpointOptions& o) {
    if (o.fate == Fate::Kill && pid == 1)
        return Error::from_errno(EPERM, "process 1 is init: it cannot be killed after its "
                                        "checkpoint (leave it running or stopped)");
    if (!o.parent.empty() && engine.name() != "user")
        return Error::from_errno(EOPNOTSUPP,
                                 fmt::format("the {} engine cannot write incremental images (a "
                                             "parent): only the user engine tracks the pages a "
                                             "process writes; use the user engine",
                                             engine.name()));
    if (o.precopy && !o.parent.empty())
        return Error::from_errno(EINVAL, "a pre-copy image's parent is the pre-copy's previous "
                                         "image: it takes no parent path");
    auto pidfd = open_pidfd(pid);
    if (!pidfd)
        return pidfd.error();
    // Read after the pidfd is open: a match means it names that process.
    if (o.starttime != 0)
        if (auto st = user::start_time(pid); !st || *st != o.starttime)
            return Error::from_errno(ESRCH, fmt::format("process {} exited (pid {} is another "
                                                        "process's now, or none's)",
                                                        pid, pid));
    const auto do_export = [&](Ghost& g, Fate f) {
        if (o.precopy)
            return g.export_precopy(pid, f, *o.precopy);
        return o.parent.empty() ? g.export_process(pid, f) : g.export_incremental(pid, f, o.parent);
    };
    // A Kill is carried out here, after the image is safe: the kernel only
    // holds the process stopped.
    const Fate fate = o.fate == Fate::Kill ? Fate::Stop : o.fate;
    const std::uint64_t total = o.progress ? estimate_image_bytes(pid) : 0;
    Result<ExportStats> stats = Error{};

    if (!o.compress) {
        auto g = engine.create(Backend::file(out));
        if (!g)
            return g.error();
        const off_t start = ::lseek(out, 0, SEEK_CUR);
        {
            Ticker t(o.progress && start >= 0 ? std::function<void()>([&] {
                o.progress({file_size_since(out, start), total});
            })
                                              : std::function<void()>());
            stats = do_export(**g, fate);
        }
    } else {
        int p[2];
        if (::pipe2(p, O_CLOEXEC) != 0)
            return Error::from_errno(errno, fmt::format("pipe: {}", errno_text(errno)));
        UniqueFd rd(p[0]), wr(p[1]);
        ::fcntl(wr.get(), F_SETPIPE_SZ, 1 << 20); // fewer wakeups; best effort
        std::atomic<std::uint64_t> done{0};
        Result<void> zres;
        {
            std::jthread compressor([&] {
                zres = compress_fd(rd.get(), out, o.level, [&](std::uint64_t n) { done += n; });
                rd.reset(); // an exporter still writing gets EPIPE, not a hang
            });
            Ticker t(o.progress ? std::function<void()>([&] {
                o.progress({done.load(), total});
            })
                                : std::function<void()>());
            auto g = engine.create(Backend::file(wr.get()));
            if (g)
                stats = do_export(**g, fate);
            else
                stats = g.error();
            g = Error{}; // drops the ghost's reference to the pipe
            wr.reset();  // and ours: the compressor sees the end
        }
        // A failed checkpoint lets the process go on, whatever its fate
        // would have been (a Stop too: it was not stopped before).
        if (stats && !zres) {
            if (fate == Fate::Stop)
                pidfd_signal(pidfd->get(), SIGCONT);
            return zres.error();
        }
    }
    if (!stats)
        return stats.error();
    if (o.progress)
        o.progress({stats->bytes, stats->bytes});
    if (o.commit) {
        if (auto c = o.commit(); !c) {
            if (fate == Fate::Stop)
                pidfd_signal(pidfd->get(), SIGCONT);
            return c.error();
        }
    }
    if (o.fate == Fate::Kill && !o.wait_for_exit) {
        // Held stopped since the capture: the pid is still this process.
        const sched_param idle{};
        (void)::sched_setscheduler(pid, SCHED_IDLE, &idle);
        if (pidfd_signal(pidfd->get(), SIGKILL) != 0 && errno != ESRCH)
            return Error::from_errno(errno, fmt::format("the image is complete but process {} "
                                                        "could not be killed: {}",
                                                        pid, errno_text(errno)));
        return stats;
    }
    if (o.fate == Fate::Kill) {
        if (auto k = kill_and_wait(pidfd->get(), pid); !k)
            return k.error();
    }
    return stats;
}

namespace {

// The user engine restores from a stream as it arrives: the anonymous
// memory of a whole image is read straight into buffers laid out as its
// mappings (user/shadow.hpp), which the rebuild moves into place, so those
// pages are copied once, out of the stream. A pre-copy's later images
// update the buffers. sequence: the stream holds a pre-copy's images to its
// end; else one image, whose parents (if it is incremental) are found by
// the paths it records.
Error restore_streamed(Engine& engine, image::Source& in, const RestoreOptions& o, bool sequence) {
    user::Shadow shadow;
    const auto place = [&](const image::Image& so_far, const image::Vma& v,
                           const image::PageRun& part) { return shadow.place(so_far, v, part); };
    auto links = chain::read_sequence(
        in, sequence ? "the pre-copy stream" : "the image stream",
        [&](const chain::Link& l) {
            if (!sequence && l.img.parent)
                return Result<void>{}; // flattened below
            if (auto r = shadow.apply(l.img, l.view.bytes()); !r)
                return r;
            // The page tables of the image's mapping go now (what is read
            // again later faults back in): unmapping a large one in the
            // rebuild would add to the downtime.
            ::madvise(const_cast<std::byte*>(l.view.bytes().data()), l.view.bytes().size(),
                      MADV_DONTNEED);
            if (o.image_done)
                o.image_done();
            return Result<void>{};
        },
        place);
    if (!links)
        return links.error();
    // Before a parent is looked for or a file of the image opened.
    if (o.owner && !links->empty())
        if (auto r = image::check_owner(links->back().img, *o.owner); !r)
            return r.error();
    if (!sequence && links->size() != 1)
        return Error::from_errno(EBADMSG, fmt::format("the image stream holds {} images, not "
                                                      "one (a pre-copy's images are restored "
                                                      "as a sequence)",
                                                      links->size()));
    if (!sequence && links->front().img.parent) {
        // An incremental image from a stream: nothing was placed, so its
        // view has every byte; its parents are found by the paths it
        // records, and the chain is restored flattened.
        auto c = chain::Chain::follow(std::move(links->front()));
        if (!c)
            return c.error();
        auto flat = c->flattened();
        if (!flat)
            return flat.error();
        return restore_whole(engine, flat->get(), o);
    }
    auto c = chain::Chain::of(std::move(*links));
    if (!c)
        return c.error();
    return user::restore_chain(*c, o.stopped, &shadow);
}

} // namespace

Error restart_self(Engine& engine, int in, const RestoreOptions& o) {
    const bool user = engine.name() == "user";
    if (o.sequence) {
        // A pre-copy's images: another engine than the user engine restores
        // the sequence flattened into one whole image.
        if (user) {
            image::FdSource fd_src(in);
            BufferedSource src(fd_src);
            return restore_streamed(engine, src, o, true);
        }
        auto links = chain::read_sequence(in, "the pre-copy stream", [&](const chain::Link&) {
            if (o.image_done)
                o.image_done();
            return Result<void>{};
        });
        if (!links)
            return links.error();
        auto c = chain::Chain::of(std::move(*links));
        if (!c)
            return c.error();
        auto mem = c->flattened();
        if (!mem)
            return mem.error();
        RestoreOptions whole = o;
        whole.sequence = false;
        return restore_whole(engine, mem->get(), whole);
    }
    if (o.lazy) {
        // Read in place: a whole, uncompressed image in a regular file.
        auto kind = input_kind(in);
        if (!kind)
            return kind.error();
        if (*kind == Input::Stream)
            return Error::from_errno(EINVAL, "a lazy restart reads its image in place, from a "
                                             "regular file (not a pipe or socket)");
        if (*kind == Input::CompressedFile)
            return Error::from_errno(EINVAL, "a lazy restart reads its image in place: "
                                             "decompress it first (zstd -d)");
        return restore_whole(engine, in, o);
    }
    // An incremental image in a file: its chain, flattened, is restored.
    auto whole = chain::flatten_if_incremental(in, o.owner ? &*o.owner : nullptr);
    if (!whole)
        return whole.error();
    if (*whole)
        return restore_whole(engine, whole->get(), o);
    // A raw image in a regular file is read by the kernel straight from it.
    // (The user engine reads it as a stream, below: its pages go once into
    // place.)
    if (!user) {
        auto kind = input_kind(in);
        if (!kind)
            return kind.error();
        if (*kind == Input::RawFile)
            return restore_whole(engine, in, o);
    }
    // Pipes, sockets and compressed images (and the user engine's files):
    // the user engine restores them as they arrive, the kernel engine
    // through a memory ghost.
    auto src = image_source(in);
    if (!src)
        return src.error();
    if (user)
        return restore_streamed(engine, **src, o, false);
    auto g = engine.create_memory();
    if (!g)
        return g.error();
    std::vector<std::byte> buf(1 << 20);
    for (;;) {
        auto n = (*src)->read(buf);
        if (!n)
            return n.error();
        if (*n == 0)
            break;
        if (auto w = (*g)->write(std::span(buf.data(), *n)); !w)
            return w.error();
    }
    // An incremental image from a stream: its parents are found by the
    // paths it records.
    {
        auto view = (*g)->view();
        if (!view)
            return view.error();
        auto flat = chain::flatten_if_incremental(view->bytes(), {}, o.owner ? &*o.owner : nullptr);
        if (!flat)
            return flat.error();
        if (*flat)
            return restore_whole(engine, flat->get(), o);
    }
    return (*g)->restore_self(o);
}

} // namespace ghost
