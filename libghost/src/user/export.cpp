// SPDX-License-Identifier: LGPL-2.1-or-later
// The user engine's export: holds a process with ptrace, asks it for what
// only it can say (signal actions, alternate stack, tid address, interval
// timers, break) with system calls run inside it, reads the rest from /proc
// and its memory with process_vm_readv, and writes the image ghost.ko would
// write (Documentation/user-engine.md). What is refused, and how it is
// worded, is decided by common/ghost_policy.h, which ghost.ko compiles too:
// this file only gathers the facts.
#include "user/user.hpp"

#include <fcntl.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ghost/image.hpp"
#include "ghost_policy.h"
#include "sys.hpp"
#include "user/ask.hpp"
#include "user/attrs.hpp"
#include "user/creds.hpp"
#include "user/dirty.hpp"
#include "user/files.hpp"
#include "user/locks.hpp"
#include "user/mappings.hpp"
#include "user/precopy.hpp"
#include "user/proc.hpp"
#include "user/stuck.hpp"
#include "user/tracee.hpp"
#include "user/vma_attrs.hpp"

namespace ghost::user {

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::size_t kCopyChunk = 256 << 10; // page data per read: stays in L2
constexpr int kSsDisable = 2;
constexpr std::size_t kXcr0Off = 464; // in ptrace's XSAVE area
constexpr std::uint32_t kSsAutodisarm = 1u << 31;

// A ghost_policy_*() refusal (-errno, reason) as an Error.
using Reason = char[GHOST_REASON_LEN];
Error refused(int err, const Reason& reason) {
    return Error::from_errno(-err, reason);
}

// What is refused before the process is touched (ghost_policy_target()),
// status the text of its /proc/PID/status.
Result<void> check_target(pid_t pid, const Result<std::string>& status) {
    // Snapshots a dead exporter left are reaped by the export: not counted.
    const auto children = children_of(pid);
    const auto left = leftover_snapshots(children);
    auto stat = read_stat(pid);
    if (pid != ::getpid() && (!stat || !status))
        return Error::from_errno(ESRCH, fmt::format("no process with pid {}", pid));
    const auto state = status ? status_field(*status, "State") : std::string();
    ghost_target_facts t{};
    t.pid = pid;
    t.kthread_or_exiting =
        stat && stat->size() > 9 && (parse_u64((*stat)[9]) & (kPfKthread | kPfExiting));
    t.self = pid == ::getpid();
    t.threads = status ? static_cast<int>(parse_u64(status_field(*status, "Threads"))) : 1;
    t.children = children.size() > left.size();
    if (status && !t.self) {
        const auto shared =
            sharing_of(pid, static_cast<pid_t>(parse_u64(status_field(*status, "PPid"))));
        t.shares_mm = shared.mm;
        t.shares_files = shared.files;
    }
    t.traced = status && parse_u64(status_field(*status, "TracerPid")) != 0;
    t.stopped = !state.empty() && (state[0] == 'T' || state[0] == 't');
    Reason reason{};
    if (const int err = ghost_policy_target(&t, reason, sizeof(reason)); err < 0)
        return refused(err, reason);
    return {};
}

// ghost_policy_task() on what /proc tells of pid (status its
// /proc/PID/status text) and whether an interval timer is armed.
Result<void> check_task(pid_t pid, const std::string& status, bool itimer_armed) {
    ghost_task_facts facts{};
    facts.pid = pid;
    facts.itimer_armed = itimer_armed;
    auto timers = read_text(fmt::format("/proc/{}/timers", pid));
    facts.posix_timers = timers && !timers->empty();
    facts.sysvsem_undo = holds_sysvsem(pid);
    facts.io_uring = uses_io_uring(pid);
    facts.pending = pending_signals(status);
    if (Reason reason{}; const int err = ghost_policy_task(&facts, reason, sizeof(reason)))
        return refused(err, reason);
    return {};
}

// The same once the process is held, for what it may have made since: a
// thread or a child made before the seize, or while it ran on watched,
// would be left out of the image (ghost.ko checks again once parked too).
// Traced and stopped it is now, by us.
Result<void> check_held(pid_t pid, const std::string& status) {
    ghost_target_facts t{};
    t.pid = pid;
    t.threads = static_cast<int>(parse_u64(status_field(status, "Threads")));
    t.children = !children_of(pid).empty();
    Reason reason{};
    if (const int err = ghost_policy_target(&t, reason, sizeof(reason)); err < 0)
        return refused(err, reason);
    return {};
}

// ---- the rest of the task -------------------------------------------------------

Result<void> fill_task(Tracee& t, const Asked& a, image::Image& img) {
    const pid_t pid = t.pid();
    auto comm = read_text(fmt::format("/proc/{}/comm", pid));
    if (!comm)
        return comm.error();
    if (!comm->empty() && comm->back() == '\n')
        comm->pop_back();
    std::memcpy(img.task.comm, comm->data(), std::min<std::size_t>(comm->size(), 15));
    auto pers = read_text(fmt::format("/proc/{}/personality", pid));
    if (!pers)
        return pers.error();
    img.task.personality = static_cast<std::uint32_t>(parse_u64(*pers, 16));
    if (const auto rseq = t.rseq_config()) {
        img.task.rseq = rseq->addr;
        img.task.rseq_len = rseq->size;
        img.task.rseq_sig = rseq->sig;
    }
    img.task.clear_child_tid = a.tid_address;
    std::uint64_t head = 0;
    std::size_t len = 0;
    if (::syscall(SYS_get_robust_list, pid, &head, &len) != 0)
        return Error::from_errno(
            errno, fmt::format("get_robust_list of pid {}: {}", pid, errno_text(errno)));
    img.task.robust_list = head;
    img.task.robust_list_len = len;
    return {};
}

Result<void> fill_signals(const Asked& a, std::uint64_t blocked, std::string_view status,
                          image::Image& img) {
    const std::uint64_t pending = pending_signals(status);
    auto& sg = img.signals;
    sg.blocked = blocked;
    sg.pending = pending & ~((1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1)));
    sg.altstack_sp = reinterpret_cast<std::uint64_t>(a.altstack.ss_sp);
    sg.altstack_size = a.altstack.ss_size;
    // As the kernel keeps it: SS_DISABLE, or 0 and SS_AUTODISARM; never
    // SS_ONSTACK, which sigaltstack() derives from the stack pointer.
    const auto f = static_cast<std::uint32_t>(a.altstack.ss_flags);
    sg.altstack_flags = (f & kSsDisable) ? kSsDisable : (f & kSsAutodisarm);
    for (int i = 0; i < GHOST_NSIG; i++)
        sg.action[i] = a.act[static_cast<std::size_t>(i)];
    return {};
}

Result<void> fill_mm(pid_t pid, const Asked& a, image::Image& img) {
    auto st = read_stat(pid);
    if (!st)
        return st.error();
    if (st->size() <= 51)
        return Error::from_errno(EIO, fmt::format("/proc/{}/stat is too short", pid));
    auto f = [&](int n) { return parse_u64((*st)[static_cast<std::size_t>(n)]); };
    auto& m = img.mm;
    m.start_code = f(26);
    m.end_code = f(27);
    m.start_stack = f(28);
    m.start_data = f(45);
    m.end_data = f(46);
    m.start_brk = f(47);
    m.arg_start = f(48);
    m.arg_end = f(49);
    m.env_start = f(50);
    m.env_end = f(51);
    m.brk = a.brk;
    auto auxv = read_text(fmt::format("/proc/{}/auxv", pid));
    if (!auxv)
        return auxv.error();
    const std::size_t words = std::min<std::size_t>(auxv->size() / 8, GHOST_AUXV_WORDS);
    std::uint32_t i = 0;
    for (; i + 1 < words; i += 2) {
        std::memcpy(&m.auxv[i], auxv->data() + i * 8, 16);
        if (m.auxv[i] == 0) // AT_NULL
            break;
    }
    m.auxv_words = i + 2;
    return {};
}

Result<void> write_pages(const PageSource& from, image::Writer& w, const image::Vma& v,
                         std::span<std::byte> buf) {
    const bool readable = v.rec.prot & PROT_READ;
    for (const auto& r : v.runs) {
        w.pages_begin(r.addr, r.nr_pages);
        std::uint64_t addr = r.addr, left = r.nr_pages * kPage;
        while (left) {
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, kCopyChunk));
            const std::span<std::byte> chunk(buf.data(), n);
            if (auto rd = from.read(addr, chunk, readable); !rd)
                return rd;
            w.page_data(chunk);
            if (auto s = w.status(); !s)
                return s;
            addr += n;
            left -= n;
        }
    }
    return {};
}

// Whether a fork's child sees every mapping as the parent does: not with
// MADV_DONTFORK (absent in the child) or MADV_WIPEONFORK (zero in it).
bool fork_sees_all(const std::vector<image::Vma>& vmas) {
    return std::none_of(vmas.begin(), vmas.end(), [](const image::Vma& v) {
        return v.rec.flags & (GHOST_VMA_DONTFORK | GHOST_VMA_WIPEONFORK);
    });
}

} // namespace

Result<void> check_untouched(pid_t pid) {
    const auto status = read_status(pid);
    if (auto c = check_target(pid, status); !c)
        return c;
    if (!status)
        return status.error();
    if (auto c = check_not_stuck(pid); !c)
        return c;
    if (auto c = check_attrs(pid, *status); !c)
        return c;
    // As far as can be known before it is held (its interval timers are
    // asked inside it): in ghost.ko's order, the task, then descriptors.
    if (auto c = check_task(pid, *status, false); !c)
        return c;
    return check_files(pid);
}

namespace {

// One try of export_process(). With defer_flags, a process that runs on
// has its mappings' flags read from its snapshot once it runs again; where
// the snapshot turns out not to show them as they are, or that try fails
// before any byte of the image is written, again is set and the caller
// tries once more without.
Result<ExportStats> export_once(pid_t pid, Fate fate, int out, std::string_view parent_path,
                                PrecopyState* precopy, bool defer_flags, bool& again) {
    if (auto c = check_untouched(pid); !c)
        return c.error();
    // Held for it only if it has one; where it cannot be, check_held()
    // refuses it as a parent, as before.
    (void)reap_leftover_snapshots(pid);
    std::optional<Parent> parent;
    if (!parent_path.empty()) {
        auto p = Parent::open(pid, std::string(parent_path));
        if (!p)
            return p.error();
        parent.emplace(std::move(*p));
    }
    // Decided before the process is held: the first call times both sums.
    const bool xxh64 = image::prefer_xxh64();
    // A pre-copy's write tracking is armed before the process is held for
    // the first image: protecting every page costs 15 ms a GiB.
    if (precopy) {
        auto st = start_time(pid);
        if (!st)
            return st.error();
        if (auto a = precopy_arm(*precopy, pid, *st); !a)
            return a.error();
    }
    auto held = Tracee::seize(pid);
    if (!held)
        return held.error();
    Tracee& t = *held;
    // The last image of a pre-copy is the downtime, and smaps's walk of
    // every page (10-15 ms a GiB) its longest step: the flags are read while
    // the process still runs, its system calls watched, and read again once
    // it is held if it made any call that could change a mapping.
    std::optional<EarlySmaps> early;
    const auto watch0 = std::chrono::steady_clock::now();
    const bool watch = precopy && fate != Fate::Run && !t.group_stopped();
    if (watch) {
        auto e = smaps_while_watched(t, precopy->watched_until);
        if (!e)
            return e.error();
        early = std::move(*e);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint64_t watched_ns =
        watch ? static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(t0 - watch0).count())
              : 0;
    auto regs0 = t.regs();
    if (!regs0)
        return regs0.error();
    if (auto a = t.abort_rseq_section(*regs0); !a)
        return a.error();
    auto xsave = t.xstate();
    if (!xsave)
        return xsave.error();
    auto mask0 = t.signal_mask();
    if (!mask0)
        return mask0.error();

    // From here the process is put back as it was on any failure.
    bool clobbered = false;
    auto put_back = [&] {
        if (clobbered)
            (void)t.set_regs(restarted(*regs0, true));
        (void)t.set_signal_mask(*mask0);
        (void)t.detach();
    };
    auto fail = [&](const Error& e) -> Result<ExportStats> {
        put_back();
        return e;
    };

    // Held now: a seccomp filter would kill it for our system calls. The
    // rest of its status (pending signals, credentials...) is read here too,
    // once: nothing the questions below run in it changes those lines.
    auto status = read_status(pid);
    if (!status)
        return fail(status.error());
    if (auto c = check_attrs(pid, *status); !c)
        return fail(c.error());
    if (auto c = check_held(pid, *status); !c)
        return fail(c.error());
    // No handler may run in it while it answers our questions.
    if (auto s = t.set_signal_mask(~0ULL); !s)
        return fail(s.error());
    auto insn = t.find_syscall_insn(*regs0);
    if (!insn)
        return fail(insn.error());
    t.use_syscall_insn(*insn);
    clobbered = true;
    auto asked = ask(t);
    if (!asked)
        return fail(asked.error());
    if (precopy) {
        // The pages written since the previous image are read (and
        // protected again) here, at the capture point.
        auto st = start_time(pid);
        if (!st)
            return fail(st.error());
        auto p = precopy_capture(*precopy, pid, *st);
        if (!p)
            return fail(p.error());
        if (*p)
            parent.emplace(std::move(**p));
    }

    // ghost.ko's refusals, in its order (ghost_policy_task(), then the
    // mappings, the descriptors and the working directory).
    // smaps walks every page for its counters. A process that runs on, with
    // no locked memory (which a fork does not pass on), has its mappings'
    // flags read from the snapshot's smaps after it is let go; for any
    // other, a thread reads it from here, beside the rest (not sooner:
    // ask()'s scratch page and the pre-copy's registrations would wait for
    // the walk, which holds the mapping lock).
    const std::string vmlck = status_field(*status, "VmLck");
    const bool unlocked = !vmlck.empty() && parse_u64(vmlck) == 0;
    // A pre-copy round that is not the last needs no snapshot: every page
    // it reads was protected again by the scan above, so whatever the
    // process writes while it is read is in the next image. It reads the
    // process itself once it runs again (no fork: its page tables cost
    // 20-25 ms a GiB of the time it is held), and its flags too.
    const bool live = precopy && fate == Fate::Run;
    const bool defer = defer_flags && fate == Fate::Run && (live || unlocked);
    // The early read stands where no mapping is locked (its lock-on-fault
    // test counts resident pages, which change as the process runs).
    const bool use_early = early && unlocked;
    if (precopy)
        precopy->flags_early = use_early;
    auto smaps = defer       ? EarlySmaps::deferred(pid)
                 : use_early ? std::move(*early)
                             : EarlySmaps::start(pid);
    // Until the image is begun, any failure of a deferred try is answered
    // by a try the old way: a refusal that needs the flags (hugetlb, a
    // device mapping) then comes in ghost.ko's order, before those of the
    // descriptors.
    again = defer;
    if (auto c = check_task(pid, *status, asked->itimer_armed); !c)
        return fail(c.error());

    image::Image img;
    if (auto r = fill_signals(*asked, *mask0, *status, img); !r)
        return fail(r.error());
    if (auto r = fill_mm(pid, *asked, img); !r)
        return fail(r.error());
    auto maps = capture_maps(pid, img.mm, parent ? &*parent : nullptr, smaps);
    if (!maps)
        return fail(maps.error());
    std::vector<std::string> fdinfo;
    auto files = capture_files(pid, fdinfo);
    if (!files)
        return fail(files.error());
    auto locks = capture_locks(pid, *files, fdinfo);
    if (!locks)
        return fail(locks.error());
    auto cwd = read_link(fmt::format("/proc/{}/cwd", pid));
    const bool rooted = cwd && !cwd->empty() && (*cwd)[0] == '/';
    const bool deleted = rooted && cwd->ends_with(" (deleted)");
    if (Reason reason{};
        const int err = ghost_policy_cwd(pid, rooted && !deleted, deleted, reason, sizeof(reason)))
        return fail(refused(err, reason));
    if (auto r = fill_task(t, *asked, img); !r)
        return fail(r.error());
    if (auto r = fill_creds(pid, *status, asked->securebits, img); !r)
        return fail(r.error());
    img.attrs = asked->attrs;
    if (auto r = read_attrs(pid, *status, *img.attrs); !r)
        return fail(r.error());

    auto& h = img.header;
    h.magic = GHOST_IMAGE_MAGIC;
    h.version = GHOST_IMAGE_VERSION;
    h.header_size = sizeof(h);
    h.arch = GHOST_ARCH_X86_64;
    h.page_size = kPage;
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    h.time_ns = static_cast<std::uint64_t>(now.tv_sec) * 1000000000ULL +
                static_cast<std::uint64_t>(now.tv_nsec);
    h.pid = pid;
    // As ghost.ko: file ids change what a DUP record means, credentials who
    // the process runs as, and mapping and process attributes must be
    // restored, so a reader must know them; the vDSO record only adds a
    // check. A reader that skipped LOCK records would restore it without its
    // locks. The END checksum is whichever of XXH64 and crc32c is faster
    // here (image::prefer_xxh64(), asked before the seize).
    h.features = GHOST_IMAGE_FEAT_FILE_ID | GHOST_IMAGE_FEAT_VMA_ATTRS | GHOST_IMAGE_FEAT_CREDS |
                 GHOST_IMAGE_FEAT_ATTRS | (xxh64 ? GHOST_IMAGE_FEAT_XXH64 : 0) |
                 (locks->empty() ? 0 : GHOST_IMAGE_FEAT_LOCKS);
    h.required_features = h.features;
    static_assert(sizeof(ghost_regs) == sizeof(Regs));
    const Regs saved = restarted(*regs0, false);
    std::memcpy(&img.regs, &saved, sizeof(saved));
    img.xsave = std::move(*xsave);
    img.xstate.size = static_cast<std::uint32_t>(img.xsave.size());
    // Bytes 464..471 of ptrace's XSAVE area hold XCR0: what this kernel lets
    // tasks use (USER_XSTATE_XCR0_WORD).
    if (img.xsave.size() >= 512 + 64)
        std::memcpy(&img.xstate.xfeatures, img.xsave.data() + kXcr0Off, 8);
    img.umask = static_cast<std::uint32_t>(parse_u64(status_field(*status, "Umask"), 8));
    img.cwd = *cwd;
    // From /proc, not prlimit(2): that needs CAP_SYS_RESOURCE for another
    // user's process, which root in a container often lacks.
    auto limits = read_limits(pid);
    if (!limits)
        return fail(limits.error());
    for (std::size_t i = 0; i < GHOST_NRLIMITS && i < limits->size(); i++) {
        img.rlimits.rlim[i].cur = (*limits)[i].cur;
        img.rlimits.rlim[i].max = (*limits)[i].max;
    }
    img.vmas = std::move(*maps);
    img.files = std::move(*files);
    img.locks = std::move(*locks);
    for (const auto& v : img.vmas)
        if (v.rec.flags & GHOST_VMA_VDSO)
            img.mm.vdso = v.rec.start;
    auto vdso = t.vdso_id();
    if (!vdso)
        return fail(vdso.error());
    if (vdso->size && img.mm.vdso) {
        h.features |= GHOST_IMAGE_FEAT_VDSO_ID;
        img.mm.vdso_size = vdso->size;
        img.mm.vdso_crc32c = vdso->crc32c;
    }
    img.mm.nr_vmas = static_cast<std::uint32_t>(img.vmas.size());
    if (parent) {
        // Held: the pid cannot have been reused since the parent was checked.
        if (auto st = start_time(pid); !st || *st != parent->start_time())
            return fail(Error::from_errno(ESRCH, fmt::format("process {} changed while its "
                                                             "parent image was read",
                                                             pid)));
        img.parent = parent->record();
        img.parent_path = parent->path();
        h.features |= GHOST_IMAGE_FEAT_PARENT;
        h.required_features |= GHOST_IMAGE_FEAT_PARENT;
    }

    const auto frozen_for = [&] {
        return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::steady_clock::now() - t0)
                                              .count());
    };
    // A process that runs on (--leave-running) is held only to capture: it
    // forks inside, goes on at once, and its pages are copied from the
    // snapshot child, whose memory stays as it was at the fork
    // (copy-on-write). Where the child would not see every mapping as it is,
    // or the fork fails (RLIMIT_NPROC...), it is held for the whole copy.
    // A pre-copy round that is not the last (live) forks nothing and is read
    // as it runs. A process that runs on may be a parent: its dirty-page
    // tracking starts again from this capture, while it is held.
    std::optional<Tracking> tracking;
    if (fate == Fate::Run && !precopy)
        tracking = Tracking::reset(pid);
    std::optional<Tracee> snap;
    SnapshotGuard end_snap(pid, snap);
    std::uint64_t frozen_ns = 0;
    if (fate == Fate::Run && !live && fork_sees_all(img.vmas)) {
        if (auto s = t.fork_snapshot())
            snap.emplace(std::move(*s));
    }
    if (defer && !snap && !live) {
        // No snapshot to read the flags from: again, reading them here.
        put_back();
        return Error::from_errno(EAGAIN, "no snapshot for the mappings' flags");
    }
    if (snap || live) {
        if (auto s = t.set_regs(restarted(*regs0, true)); !s)
            return fail(s.error());
        clobbered = false;
        if (auto s = t.set_signal_mask(*mask0); !s)
            return fail(s.error());
        frozen_ns = frozen_for();
        if (auto d = t.detach(); !d)
            return d.error();
        // Only so that a snapshot we leave behind if we die can be reaped
        // by the next export: it fails only with the snapshot itself.
        if (snap)
            (void)snap->name_snapshot();
        if (live && precopy->before_flags)
            precopy->before_flags();
    }
    if (defer) {
        // The process runs again; the snapshot (or, live, the process as
        // long as its mappings are those of the capture) tells the flags.
        auto refined =
            refine_from_snapshot(smaps, live ? pid : snap->pid(), live, img.mm, img.vmas);
        if (!refined)
            return refined.error();
        if (!*refined)
            return Error::from_errno(EAGAIN, live ? "the process changed its mappings while "
                                                    "their flags were read"
                                                  : "the snapshot does not show the mappings "
                                                    "as they are");
    }

    if (!snap && !live) {
        // Held for the whole copy, but as it was: no system call of ours
        // runs in it after this, and an exporter that dies during the
        // copy (migd killed, its journal resuming the process) must not
        // leave it with our registers and every signal blocked.
        if (auto s = t.set_regs(restarted(*regs0, true)); !s)
            return fail(s.error());
        clobbered = false;
        if (auto s = t.set_signal_mask(*mask0); !s)
            return fail(s.error());
    }
    again = false; // from here bytes go out: no second try
    if (live && precopy->before_pages)
        precopy->before_pages();
    // One copy buffer for the whole export, never zeroed: only what
    // process_vm_readv filled is written.
    const auto copy = std::make_unique_for_overwrite<std::byte[]>(kCopyChunk);
    Ranges lost; // live: pages the process unmapped before they were read
    const PageSource from{snap ? *snap : t, live ? &lost : nullptr};
    image::Writer w(out);
    if (auto r = image::write(w, img,
                              [&](image::Writer& to, const image::Vma& v) {
                                  const std::span buf(copy.get(), kCopyChunk);
                                  return parent ? write_pages_incremental(from, to, v, buf, *parent)
                                                : write_pages(from, to, v, buf);
                              });
        !r)
        return fail(r.error());
    const chain::ImageId written{w.offset(), w.end_record().crc32c, h.time_ns, pid,
                                 w.end_record().xxh64};
    if (tracking)
        tracking->remember(written);
    if (precopy)
        precopy_done(*precopy, img, written, std::move(lost));

    ExportStats stats{w.offset(), frozen_ns};
    stats.watched_ns = watched_ns;
    stats.copy_on_write = snap.has_value() || live;
    if (snap || live)
        return stats;
    const int sig = fate == Fate::Kill ? SIGKILL : fate == Fate::Stop ? SIGSTOP : 0;
    stats.frozen_ns = frozen_for();
    if (auto d = t.detach(sig); !d)
        return d.error();
    return stats;
}

} // namespace

Result<ExportStats> export_process(pid_t pid, Fate fate, int out, std::string_view parent_path,
                                   PrecopyState* precopy) {
    bool again = false;
    auto r = export_once(pid, fate, out, parent_path, precopy, true, again);
    if (!again)
        return r;
    return export_once(pid, fate, out, parent_path, precopy, false, again);
}

} // namespace ghost::user
