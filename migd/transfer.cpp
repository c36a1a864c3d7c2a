// SPDX-License-Identifier: GPL-2.0
// The one data path of migration, duplication and the checkpoint server: the
// engine exports into a pipe, DATA frames carry it over the channel, and the
// receiving side tees it into a restore stub (or a file) while validating it.
// No side holds more than one frame and a pipe's worth of the image. Where
// the stream is the socket itself (images in the clear, a plain channel),
// the kernel moves the frames (zerocopy.hpp) and the stub alone reads the
// page data.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ghost/process.hpp"
#include "guarded.hpp"
#include "ops.hpp"
#include "ticker.hpp"

namespace migd {

using ghost::Error;
using ghost::Result;
using ghost::UniqueFd;

json error_reply(const std::string& message) {
    return {{"ok", false}, {"error", message}};
}

json error_reply(const Error& e) {
    return error_reply(e.what());
}

Result<ProcInfo> owned_process(pid_t pid, const Client& who) {
    auto p = proc_info(pid);
    if (!p || p->state == 'Z')
        return Error::from_errno(ESRCH, fmt::format("no process {}", pid));
    if (who.uid != 0 && p->uid != who.uid)
        return Error::from_errno(EPERM, fmt::format("process {} ({}) belongs to uid {}: a user "
                                                    "may move, duplicate or checkpoint only "
                                                    "their own processes",
                                                    pid, p->comm, p->uid));
    // Only what the user could trace: migd's own ptrace would otherwise act
    // for them on a process the kernel keeps from them.
    if (who.uid != 0 && (!p->plain_ids || p->cap_permitted != 0 || p->proc_owner != who.uid))
        return Error::from_errno(
            EPERM, fmt::format("process {} ({}) runs with ids or capabilities other than uid "
                               "{}'s own (a set-user-id, set-group-id or file-capability "
                               "program, or one that is not dumpable): only root may move, "
                               "duplicate or checkpoint it",
                               pid, p->comm, who.uid));
    return *p;
}

Result<void> check_movable_fds(pid_t pid) {
    const std::string dir = fmt::format("/proc/{}/fd", pid);
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        struct stat st;
        if (::stat(e.path().c_str(), &st) != 0)
            continue;
        const unsigned maj = major(st.st_rdev);
        const bool tty =
            S_ISCHR(st.st_mode) && (maj == 4 || maj == 5 || (maj >= 136 && maj <= 143));
        if (!S_ISFIFO(st.st_mode) && !tty)
            continue;
        std::error_code ec2;
        const auto target = std::filesystem::read_symlink(e.path(), ec2);
        return Error::from_errno(EOPNOTSUPP,
                                 fmt::format("process {} has fd {} on {}: a {} exists only on "
                                             "this host, so the process cannot move (start it "
                                             "with its standard streams redirected to files)",
                                             pid, e.path().filename().string(),
                                             ec2 ? std::string("?") : target.string(),
                                             tty ? "terminal" : "pipe"));
    }
    if (ec)
        return Error::from_errno(ec.value(), fmt::format("cannot read {}: {}", dir, ec.message()));
    return {};
}

Result<void> kill_process(pid_t pid, std::uint64_t starttime) {
    const UniqueFd pidfd = pidfd_of(pid, starttime);
    if (!pidfd)
        return {}; // gone already (or the pid is another process now)
    // A migrated original was killed at SCHED_IDLE, so that its teardown
    // left the CPU to the commit (ghost::CheckpointOptions::wait_for_exit):
    // now that it is waited for, it runs as any other.
    const sched_param normal{};
    (void)::sched_setscheduler(pid, SCHED_OTHER, &normal);
    if (::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0) != 0 && errno != ESRCH)
        return Error::from_errno(
            errno, fmt::format("cannot kill process {}: {}", pid, std::strerror(errno)));
    pollfd p{pidfd.get(), POLLIN, 0};
    int r;
    while ((r = ::poll(&p, 1, 10000)) < 0 && errno == EINTR) {
    }
    if (r == 0)
        return Error::from_errno(ETIMEDOUT,
                                 fmt::format("process {} did not die within 10 s of SIGKILL", pid));
    return {};
}

Result<ghost::Owner> incoming_owner(const Config& cfg, uid_t uid) {
    if (uid == 0 && !cfg.allow_root)
        return Error::from_errno(EPERM, fmt::format("{} does not take root-owned processes "
                                                    "([limits] allow_root = false)",
                                                    cfg.host));
    passwd pw{};
    passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || !found)
        return Error::from_errno(EPERM, fmt::format("uid {} does not exist on {}: the process "
                                                    "would run as the same uid there",
                                                    uid, cfg.host));
    ghost::Owner o;
    o.uid = uid;
    o.gid = pw.pw_gid;
    // Its groups here: what the image's gid and groups must lie among.
    int n = 64;
    std::vector<gid_t> groups(static_cast<std::size_t>(n));
    while (::getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
        if (n <= static_cast<int>(groups.size()) || n > 65536)
            return Error::from_errno(
                EIO, fmt::format("cannot read the groups of uid {} on {}", uid, cfg.host));
        groups.resize(static_cast<std::size_t>(n));
    }
    groups.resize(static_cast<std::size_t>(n));
    o.groups = std::move(groups);
    return o;
}

void offer_clear(const Config& cfg, Channel& ch, json& req, bool receiving) {
    if (!cfg.clear_images || !ch.clear_capable())
        return;
    if (receiving)
        ch.receive_clear();
    req["clear"] = true;
}

bool accept_clear(const Config& cfg, Channel& ch, const json& req, json& reply, bool receiving) {
    if (!cfg.clear_images || !ch.clear_capable() || req.value("clear", false) != true)
        return false;
    if (receiving)
        ch.receive_clear();
    reply["clear"] = true;
    ch.set_clear(true);
    return true;
}

bool follow_clear(Channel& ch, const json& req, const json& reply) {
    // Only what was offered: a reply cannot turn on what this host refuses.
    const bool on = req.value("clear", false) == true && reply.value("clear", false) == true;
    ch.set_clear(on);
    return ch.clear();
}

namespace {

// The pipe between an engine and a channel: 1 MiB (fewer wakeups; best
// effort), close-on-exec.
Result<std::pair<UniqueFd, UniqueFd>> relay_pipe() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0)
        return Error::from_errno(errno, fmt::format("pipe: {}", std::strerror(errno)));
    ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    return std::pair{UniqueFd(p[0]), UniqueFd(p[1])};
}

} // namespace

Result<ExportResult> export_to(Daemon& d, Channel& ch, const ProcStat& proc, ghost::Fate fate,
                               const std::function<Result<void>()>& confirm, const Emit& emit,
                               ghost::Precopy* precopy) {
    auto engine = d.engine();
    if (!engine)
        return engine.error();
    auto pipe = relay_pipe();
    if (!pipe)
        return pipe.error();
    UniqueFd rd = std::move(pipe->first);
    auto wr = std::make_shared<UniqueFd>(std::move(pipe->second));

    // The exporter tells the relay (this thread) that the image is complete
    // by setting `complete` and closing the pipe; the relay sends END and
    // hands back whether that worked, then confirm() runs as the commit.
    std::atomic<bool> complete{false};
    std::promise<Result<void>> relayed;
    auto relayed_f = relayed.get_future();
    ExportResult out;
    Result<ghost::ExportStats> stats = Error{};

    const pid_t pid = proc.pid;
    ghost::CheckpointOptions o;
    o.fate = fate;
    o.precopy = precopy;
    o.starttime = proc.starttime;
    // The original is stopped since its capture and gets SIGKILL at the
    // commit point: it never runs again, so the copy may go on while the
    // original is torn down (local_move() waits for it before answering).
    o.wait_for_exit = false;
    o.commit = [&]() -> Result<void> {
        complete = true;
        wr->reset();
        if (auto r = relayed_f.get(); !r)
            return r;
        // Nothing may be thrown through libghost: a peer's answer of the
        // wrong type fails the commit (the process runs on).
        try {
            if (auto c = confirm(); !c)
                return c;
        } catch (const std::exception& e) {
            return Error::from_errno(EPROTO, fmt::format("the destination's answer to the "
                                                         "commit is malformed: {}",
                                                         e.what()));
        }
        out.confirmed = true;
        return {};
    };
    // Read before the exporter may change them (progress below).
    const bool later = precopy && precopy->rounds() > 0;
    const std::uint64_t before =
        later ? precopy->last_page_bytes() + ghost::kImageOverheadBytes : 0;
    std::thread exporter([&] {
        guarded("an export", [&] { stats = ghost::checkpoint(**engine, pid, wr->get(), o); });
        wr->reset();
    });

    std::atomic<std::uint64_t> sent{0};
    Result<void> s;
    {
        // Progress every 100 ms while the image flows; the ticker stops the
        // moment the stream ends (a small image must not wait out a tick).
        // The estimate reads smaps_rollup, which walks every page under the
        // process's mapping lock: read beside the exporter's first moments
        // it made the scratch page's mmap wait (12-17 ms at 1 GiB, in every
        // pre-copy image and so in the downtime). Only an image still
        // flowing at the first tick has one. A pre-copy's later images carry
        // what was written since the one before, whose size is their
        // estimate: the last image runs the process watched before its
        // capture (80-100 ms at 4 GiB), and a walk begun at the first tick
        // made the capture's registrations, which take the lock for
        // writing, wait for it (held 66 ms instead of 9).
        bool ticked = false;
        std::uint64_t total = 0;
        Ticker ticker(emit ? std::chrono::milliseconds(100) : std::chrono::milliseconds(0), [&] {
            if (!std::exchange(ticked, true))
                return; // the ticker's first call, at once: no report yet
            if (total == 0)
                total = later ? before : ghost::estimate_image_bytes(pid);
            emit({{"progress", {{"done", sent.load()}, {"total", total}}}});
        });
        s = send_stream(ch, rd.get(), &sent);
    }
    if (!s) {
        rd.reset(); // the exporter gets EPIPE and lets the process go
        relayed.set_value(s.error());
        exporter.join();
        return s.error();
    }
    if (complete) {
        relayed.set_value(send_end(ch));
        exporter.join();
    } else {
        exporter.join();
        relayed.set_value(Error{});
        (void)send_abort(ch, stats ? std::string("export ended early") : stats.error().what());
    }
    if (!stats)
        return stats.error();
    if (emit)
        emit({{"progress", {{"done", sent.load()}, {"total", sent.load()}}}});
    out.stats = *stats;
    return out;
}

std::function<void(pid_t)> journal_stub(Daemon& d, json& entry) {
    return [&d, &entry](pid_t stub) {
        entry["stub_pid"] = stub;
        if (auto p = proc_stat(stub))
            entry["stub_starttime"] = p->starttime;
        (void)d.journal_.put(entry);
    };
}

Result<Imported> import_from(Daemon& d, Channel& ch, const ghost::Owner& owner, bool stopped,
                             const std::function<void(pid_t)>& spawned, bool sequence) {
    auto engine = d.engine();
    if (!engine)
        return engine.error();
    auto pipe = relay_pipe();
    if (!pipe)
        return pipe.error();
    UniqueFd rd = std::move(pipe->first), wr = std::move(pipe->second);
    // A stub that stops taking bytes without exiting must not hold this
    // thread: writes into its pipe wait at most the channel's timeout.
    if (::fcntl(wr.get(), F_SETFL, O_NONBLOCK) != 0)
        return Error::from_errno(errno, fmt::format("fcntl: {}", std::strerror(errno)));

    // The stub restores from the pipe while this thread feeds it and checks
    // the image (all of it, or all but the page data the stub checks): a
    // restore that succeeds on a stream that then fails the check is
    // killed before it ever runs (it is stopped).
    Result<pid_t> restored = Error{};
    // A sequence: how many images the stub has taken in, and whether the
    // restore is over (it then takes no more).
    std::mutex mu;
    std::condition_variable cv;
    unsigned taken = 0;
    bool over = false;
    std::atomic<pid_t> stub{-1};
    std::thread restorer([&] {
        ghost::RestartOptions o;
        o.stopped = stopped;
        o.owner = owner;
        o.stub = d.config().restore_stub; // [engine] restore_stub ("": libghost's)
        o.spawned = [&](pid_t p) {
            stub = p;
            if (spawned)
                spawned(p);
        };
        o.sequence = sequence;
        o.image_done = [&](unsigned n) {
            std::lock_guard l(mu);
            taken = n;
            cv.notify_all();
        };
        guarded("a restore", [&] { restored = ghost::restart(**engine, rd.get(), o); });
        rd.reset();
        std::lock_guard l(mu);
        over = true;
        cv.notify_all();
    });
    const std::uint64_t limit = d.config().max_image_bytes;
    // How long a stub may take nothing (the source's writes wait as long),
    // and how long it may take to finish once it has it all (the source
    // waits as long for the answer).
    const auto stub_limit =
        ch.timeout().count() > 0 ? ch.timeout() : std::chrono::milliseconds(10000);
    const auto finish_limit = import_answer_within(d.config().io_timeout_ms);
    bool stub_gone = false, stalled = false;
    std::uint64_t bytes = 0;
    // One image: read and checked as it is teed to the stub.
    const auto one = [&]() -> std::pair<Result<ghost::image::Image>, Result<void>> {
        // A stub that stops reading refused the image, and its reason
        // comes from restart().
        FrameSource src(ch, wr.get());
        ghost::image::ReadOptions ro;
        ro.max_bytes = limit;
        // Page data straight from the socket into the stub's pipe where
        // the stream plane is the socket: the stub checks it (every byte,
        // the END checksum) before the restore succeeds; this side checks
        // the rest (who the image runs as, its descriptors, its size).
        ro.skip_pages = true;
        auto img = ghost::image::read(src, ro);
        Result<void> rest = img ? src.drain() : Result<void>(img.error());
        bytes += src.bytes();
        stub_gone = stub_gone || src.pipe_gone();
        stalled = stalled || src.stalled();
        return {std::move(img), std::move(rest)};
    };
    Result<ghost::image::Image> img = Error{};
    Result<void> rest;
    for (unsigned n = 1;; n++) {
        bool last = true;
        if (sequence) {
            auto head = recv_json(ch);
            if (!head) {
                rest = head.error();
                break;
            }
            // Read without throwing: the restorer thread is running.
            const auto op = head->find("op");
            const auto is_last = head->find("last");
            if (op == head->end() || *op != "image" ||
                (is_last != head->end() && !is_last->is_boolean())) {
                rest = Error::from_errno(
                    EPROTO, fmt::format("{} sent no pre-copy image header", ch.peer()));
                break;
            }
            last = is_last == head->end() || is_last->get<bool>();
        }
        std::tie(img, rest) = one();
        if (!rest || last)
            break;
        {
            // Acknowledged once the stub took it in: the next image (the
            // last one above all) then never waits behind this one's work.
            std::unique_lock l(mu);
            if (!cv.wait_for(l, stub_limit, [&] { return taken >= n || over; }))
                stalled = true; // killed below
        }
        if (stalled) {
            rest = Error::from_errno(
                ETIME, fmt::format("the restore stub took nothing for {} ms", stub_limit.count()));
            break;
        }
        if (stub_gone || over) {
            rest = Error::from_errno(EPIPE, "the restore stub stopped reading");
            break;
        }
        // Each image but the last is acknowledged, so the source knows it
        // arrived whole before it sends the next.
        if (auto s = send_json(ch, {{"ok", true}, {"image", n}, {"bytes", bytes}}); !s) {
            rest = s.error();
            break;
        }
    }
    wr.reset();
    {
        // A stub that took nothing for stub_limit, or that is not done
        // within finish_limit once it has the whole stream, is stuck: it is
        // killed (our child), and the restore fails.
        std::unique_lock l(mu);
        if (stalled || !cv.wait_for(l, finish_limit, [&] { return over; })) {
            const pid_t p = stub.load();
            const auto ms = (stalled ? stub_limit : finish_limit).count();
            const char* what = stalled ? "took nothing" : "was not done";
            spdlog::warn("the restore stub (pid {}) of an image from {} {} for {} ms: killed", p,
                         ch.peer(), what, ms);
            if (p > 0)
                ::kill(p, SIGKILL);
            if (rest)
                rest = Error::from_errno(ETIME,
                                         fmt::format("the restore stub {} for {} ms", what, ms));
        }
    }
    restorer.join();
    auto fail = [&](const Error& e) -> Result<Imported> {
        if (restored) {
            ::kill(*restored, SIGKILL); // our child: its pid cannot be reused before we reap it
            while (::waitpid(*restored, nullptr, 0) < 0 && errno == EINTR) {
            }
        }
        return e;
    };
    if (!rest)
        return fail(rest.error());
    if (!restored)
        return restored.error();
    for (const auto& f : img->files)
        if (f.rec.kind == GHOST_FILE_INHERIT)
            return fail(
                Error::from_errno(EOPNOTSUPP, fmt::format("the image's fd {} ({}) was inherited on "
                                                          "its host and does not exist here",
                                                          f.rec.fd, f.path)));
    Imported im;
    im.pid = *restored;
    // The copy is known by pid and start time from here on (journal,
    // commit, kill): without its start time it could be neither let go nor
    // told from another process, so it is refused now, while it is ours.
    auto info = proc_stat(im.pid);
    if (!info || info->starttime == 0)
        return fail(Error::from_errno(EIO, fmt::format("cannot read the start time of the "
                                                       "restored copy (pid {})",
                                                       im.pid)));
    im.starttime = info->starttime;
    im.bytes = bytes;
    im.image = std::move(*img);
    return im;
}

} // namespace migd
