// SPDX-License-Identifier: LGPL-2.1-or-later
#include "user/tracee.hpp"

#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "ghost/image.hpp"
#include "ghost_policy.h"
#include "sys.hpp"
#include "user/proc.hpp"

namespace ghost::user {

namespace {

constexpr std::size_t kMaxXstate = 64 * 1024;

long pt(enum __ptrace_request req, pid_t pid, void* addr = nullptr, void* data = nullptr) {
    return ::ptrace(req, pid, addr, data);
}

} // namespace

Regs restarted(const Regs& r, bool restart_block) {
    Regs out = r;
    if (!restart_block)
        ghost_policy_sleep_left(out.rax, out.orig_rax, out.rsi, out.r10, &out.rdi, &out.rdx);
    ghost_policy_restart(&out.rax, &out.orig_rax, &out.rip, restart_block);
    return out;
}

Result<Tracee> Tracee::seize(pid_t pid) {
    if (pt(PTRACE_SEIZE, pid, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD)) != 0) {
        const int err = errno;
        if (err == ESRCH)
            return Error::from_errno(err, fmt::format("no process {}", pid));
        if (err == EPERM)
            return Error::from_errno(
                err, fmt::format("not allowed to trace pid {}: needs the same user or "
                                 "CAP_SYS_PTRACE (and, under Yama, ptrace_scope 0 or an "
                                 "ancestor)",
                                 pid));
        return Error::from_errno(err,
                                 fmt::format("ptrace(SEIZE) of pid {}: {}", pid, errno_text(err)));
    }
    Tracee t(pid);
    t.attached_ = true;
    if (pt(PTRACE_INTERRUPT, pid) != 0)
        return Error::from_errno(
            errno, fmt::format("ptrace(INTERRUPT) of pid {}: {}", pid, errno_text(errno)));
    for (;;) {
        auto st = t.wait_stop();
        if (!st)
            return st.error();
        if ((*st >> 16) == PTRACE_EVENT_STOP) {
            // SIGTRAP for our interrupt; the stop signal in a group-stop.
            t.group_stopped_ = WSTOPSIG(*st) != SIGTRAP;
            return t;
        }
        // A signal on its way in first: let it through (a stop signal is
        // held until we let go), then the interrupt traps.
        const int sig = WSTOPSIG(*st);
        long r;
        if (is_stop_signal(sig)) {
            t.held_stop_ = sig;
            r = pt(PTRACE_CONT, pid);
        } else {
            r = pt(PTRACE_CONT, pid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
        }
        if (r != 0)
            return t.died("it was being stopped");
    }
}

Tracee::Tracee(Tracee&& o) noexcept
    : pid_(o.pid_), attached_(std::exchange(o.attached_, false)), insn_(o.insn_),
      held_stop_(o.held_stop_), group_stopped_(o.group_stopped_), snapshot_(o.snapshot_),
      scratch_(o.scratch_), have_template_(o.have_template_), mem_(std::move(o.mem_)) {}

Tracee::~Tracee() {
    if (attached_ && snapshot_)
        kill_and_wait();
    else if (attached_)
        (void)detach();
}

Error Tracee::died(const char* what) {
    attached_ = false;
    return Error::from_errno(ESRCH, fmt::format("pid {} exited while {}", pid_, what));
}

Result<int> Tracee::wait_stop() {
    for (;;) {
        int st;
        const pid_t r = ::waitpid(pid_, &st, __WALL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return Error::from_errno(
                errno, fmt::format("waiting for pid {}: {}", pid_, errno_text(errno)));
        if (WIFSTOPPED(st))
            return st;
        return died("it was held");
    }
}

Result<Regs> Tracee::regs() {
    Regs r{};
    if (pt(PTRACE_GETREGS, pid_, nullptr, &r) != 0)
        return Error::from_errno(
            errno, fmt::format("reading the registers of pid {}: {}", pid_, errno_text(errno)));
    return r;
}

Result<void> Tracee::set_regs(const Regs& r) {
    if (pt(PTRACE_SETREGS, pid_, nullptr, const_cast<Regs*>(&r)) != 0)
        return Error::from_errno(
            errno, fmt::format("setting the registers of pid {}: {}", pid_, errno_text(errno)));
    return {};
}

Result<std::vector<std::byte>> Tracee::xstate() {
    std::vector<std::byte> buf(kMaxXstate);
    iovec iov{buf.data(), buf.size()};
    if (pt(PTRACE_GETREGSET, pid_, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) != 0)
        return Error::from_errno(
            errno, fmt::format("reading the FPU state of pid {}: {}", pid_, errno_text(errno)));
    buf.resize(iov.iov_len);
    return buf;
}

Result<void> Tracee::set_xstate(std::span<const std::byte> x) {
    iovec iov{const_cast<std::byte*>(x.data()), x.size()};
    if (pt(PTRACE_SETREGSET, pid_, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) != 0)
        return Error::from_errno(
            errno, fmt::format("setting the FPU state of pid {}: {}", pid_, errno_text(errno)));
    return {};
}

Result<std::uint64_t> Tracee::signal_mask() {
    std::uint64_t m = 0;
    if (pt(PTRACE_GETSIGMASK, pid_, reinterpret_cast<void*>(sizeof(m)), &m) != 0)
        return Error::from_errno(
            errno, fmt::format("reading the signal mask of pid {}: {}", pid_, errno_text(errno)));
    return m;
}

Result<void> Tracee::set_signal_mask(std::uint64_t mask) {
    if (pt(PTRACE_SETSIGMASK, pid_, reinterpret_cast<void*>(sizeof(mask)), &mask) != 0)
        return Error::from_errno(
            errno, fmt::format("setting the signal mask of pid {}: {}", pid_, errno_text(errno)));
    return {};
}

std::optional<RseqConfig> Tracee::rseq_config() {
    struct {
        std::uint64_t rseq_abi_pointer;
        std::uint32_t rseq_abi_size, signature, flags, pad;
    } rc{};
    constexpr int kGetRseqConfiguration = 0x420f; // PTRACE_GET_RSEQ_CONFIGURATION
    if (pt(static_cast<__ptrace_request>(kGetRseqConfiguration), pid_,
           reinterpret_cast<void*>(sizeof(rc)), &rc) <= 0 ||
        !rc.rseq_abi_pointer)
        return std::nullopt;
    return RseqConfig{rc.rseq_abi_pointer, rc.rseq_abi_size, rc.signature};
}

Result<bool> Tracee::abort_rseq_section(Regs& r) {
    const auto rc = rseq_config();
    if (!rc)
        return false;
    // struct rseq: cpu_id_start, cpu_id (u32 each), then rseq_cs (u64).
    constexpr std::uint64_t kRseqCsField = 8;
    std::uint64_t cs_at = 0;
    if (auto g = read(rc->addr + kRseqCsField, std::as_writable_bytes(std::span(&cs_at, 1))); !g)
        return g.error();
    if (cs_at == 0)
        return false;
    struct {
        std::uint32_t version, flags;
        std::uint64_t start_ip, post_commit_offset, abort_ip;
    } cs{};
    // What the kernel would refuse (it kills the process then) is left to it.
    if (!read(cs_at, std::as_writable_bytes(std::span(&cs, 1))) || cs.version != 0 ||
        r.rip - cs.start_ip >= cs.post_commit_offset ||
        cs.abort_ip - cs.start_ip < cs.post_commit_offset || cs.abort_ip < 4)
        return false;
    std::uint32_t sig = 0;
    if (!read(cs.abort_ip - 4, std::as_writable_bytes(std::span(&sig, 1))) || sig != rc->sig)
        return false;
    // Both at once, as the kernel's abort: whatever the caller does next,
    // put back or not, the process is where an abort leaves it.
    Regs aborted = r;
    aborted.rip = cs.abort_ip;
    if (auto s = set_regs(aborted); !s)
        return s.error();
    const std::uint64_t zero = 0;
    if (auto w = write(rc->addr + kRseqCsField, std::as_bytes(std::span(&zero, 1))); !w) {
        (void)set_regs(r);
        return w.error();
    }
    r = aborted;
    return true;
}

Result<void> Tracee::kill_on_exit() {
    if (pt(PTRACE_SETOPTIONS, pid_, nullptr,
           reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL)) != 0)
        return Error::from_errno(
            errno, fmt::format("ptrace(SETOPTIONS) of pid {}: {}", pid_, errno_text(errno)));
    return {};
}

Result<std::uint64_t> Tracee::find_syscall_insn(const Regs& now) {
    static constexpr std::byte kSyscall[2] = {std::byte{0x0f}, std::byte{0x05}};
    if (static_cast<long>(now.orig_rax) >= 0 && now.rip >= 2) {
        std::byte b[2];
        if (read_mem(now.rip - 2, b) && std::memcmp(b, kSyscall, 2) == 0)
            return now.rip - 2;
    }
    auto vdso = read_vdso();
    if (!vdso)
        return vdso.error();
    const auto& text = vdso->bytes;
    auto it = std::search(text.begin(), text.end(), std::begin(kSyscall), std::end(kSyscall));
    if (it != text.end())
        return vdso->start + static_cast<std::uint64_t>(it - text.begin());
    return Error::from_errno(EOPNOTSUPP,
                             fmt::format("pid {} is not in a system call and has no vDSO: found "
                                         "no syscall instruction to run system calls with",
                                         pid_));
}

Result<void> Tracee::resume_until(__ptrace_request request, int want, const char* what) {
    int sig = 0;
    for (;;) {
        if (pt(request, pid_, nullptr, reinterpret_cast<void*>(static_cast<long>(sig))) != 0)
            return died(fmt::format("running {} in it", what).c_str());
        sig = 0;
        auto st = wait_stop();
        if (!st)
            return st.error();
        if ((*st >> 16) == PTRACE_EVENT_CLONE) {
            // Our fork_snapshot()'s child, held by us from its birth: known
            // here even if the call then fails (the process killed).
            unsigned long child = 0;
            if (pt(PTRACE_GETEVENTMSG, pid_, nullptr, &child) == 0)
                cloned_ = static_cast<pid_t>(child);
        }
        if ((*st >> 16) != 0)
            continue; // a group-stop or event: go on
        const int s = WSTOPSIG(*st);
        if (s == want)
            return {};
        // A signal arrived. Everything is blocked while we work but stop
        // signals (held for later) and synchronous faults.
        if (is_stop_signal(s)) {
            held_stop_ = s;
            continue;
        }
        if (s == SIGSYS || s == SIGSEGV || s == SIGBUS || s == SIGILL)
            return Error::from_errno(EOPNOTSUPP, fmt::format("{} run in pid {} raised signal {} "
                                                             "(seccomp filter?)",
                                                             what, pid_, s));
        sig = s; // anything else: deliver it as it came
    }
}

Result<long> Tracee::call(long nr, std::uint64_t a1, std::uint64_t a2, std::uint64_t a3,
                          std::uint64_t a4, std::uint64_t a5, std::uint64_t a6) {
    if (!have_template_) {
        auto r = regs();
        if (!r)
            return r.error();
        scratch_ = *r;
        scratch_.eflags &= ~0x100ULL; // no single-stepping
        have_template_ = true;
    }
    Regs r = scratch_;
    r.rax = static_cast<unsigned long long>(nr);
    r.orig_rax = static_cast<unsigned long long>(-1);
    r.rdi = a1;
    r.rsi = a2;
    r.rdx = a3;
    r.r10 = a4;
    r.r8 = a5;
    r.r9 = a6;
    r.rip = insn_;
    if (trap_follows_) {
        auto out = run_to_trap(r, "a system call");
        if (!out)
            return out.error();
        return static_cast<long>(out->rax);
    }
    if (auto s = set_regs(r); !s)
        return s.error();
    for (int stop = 0; stop < 2; stop++) // entry, exit
        if (auto e = resume_until(PTRACE_SYSCALL, kSyscallStop, "a system call"); !e)
            return e.error();
    auto out = regs();
    if (!out)
        return out.error();
    return static_cast<long>(out->rax);
}

Result<Regs> Tracee::run_to_trap(const Regs& start, const char* what) {
    Regs r = start;
    r.eflags &= ~0x100ULL; // no single-stepping
    r.orig_rax = static_cast<unsigned long long>(-1);
    if (auto s = set_regs(r); !s)
        return s.error();
    if (auto e = resume_until(PTRACE_CONT, SIGTRAP, what); !e)
        return e.error();
    return regs();
}

Result<void> Tracee::call_and_release(const Regs& final, std::uint64_t mask, int sig, long nr,
                                      std::uint64_t a1, std::uint64_t a2) {
    // Stopped at the system call's exit, not at a trap after it: the call
    // may unmap the code it runs from (the restorer's scratch page).
    trap_follows_ = false;
    auto r = call(nr, a1, a2);
    if (!r)
        return r.error();
    if (*r < 0)
        return Error::from_errno(static_cast<int>(-*r),
                                 fmt::format("the last system call ({}) in pid {} failed: {}", nr,
                                             pid_, errno_text(static_cast<int>(-*r))));
    if (auto s = set_regs(final); !s)
        return s;
    if (auto s = set_signal_mask(mask); !s)
        return s;
    return detach(sig);
}

Result<void> Tracee::detach(int sig) {
    if (!attached_)
        return {};
    if (snapshot_) {
        kill_and_wait();
        return {};
    }
    if (sig)
        ::syscall(SYS_tgkill, pid_, pid_, sig);
    if (held_stop_ && sig != SIGKILL)
        ::syscall(SYS_tgkill, pid_, pid_, held_stop_);
    attached_ = false;
    if (pt(PTRACE_DETACH, pid_) != 0 && errno != ESRCH)
        return Error::from_errno(
            errno, fmt::format("ptrace(DETACH) of pid {}: {}", pid_, errno_text(errno)));
    return {};
}

Result<Tracee> Tracee::fork_snapshot() {
    const auto opts = [&](long o) {
        return pt(PTRACE_SETOPTIONS, pid_, nullptr, reinterpret_cast<void*>(o));
    };
    // The child inherits these options at its birth, PTRACE_O_EXITKILL
    // with them: were we killed before we could set it on the child alone,
    // it would be let go to run on from our clone as a second copy of the
    // process. The process itself has it only for that one call, in which
    // it holds our registers and could not go on as it was anyway.
    if (opts(PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL) != 0)
        return Error::from_errno(
            errno, fmt::format("ptrace(SETOPTIONS) of pid {}: {}", pid_, errno_text(errno)));
    // clone(flags, stack, parent_tid, child_tid, tls): no CLONE_* flag and
    // exit signal 0 (the low byte): a fork that reports PTRACE_EVENT_CLONE.
    cloned_ = 0;
    auto r = call(SYS_clone, 0, 0, 0, 0, 0);
    const bool reset = opts(PTRACE_O_TRACESYSGOOD) == 0;
    const int reset_errno = errno;
    const pid_t made = cloned_ > 0 ? cloned_ : r && *r > 0 ? static_cast<pid_t>(*r) : 0;
    cloned_ = 0;
    if (made > 0 && !(reset && r && *r == made)) {
        // Whatever went wrong, the child the clone made is ours to end:
        // none is left behind, stopped or running, nor its zombie.
        Tracee orphan(made);
        orphan.attached_ = true;
        orphan.kill_and_wait();
        if (reset)
            (void)call(SYS_wait4, static_cast<std::uint64_t>(made), 0, WNOHANG | __WALL, 0);
    }
    if (!reset)
        return Error::from_errno(reset_errno, fmt::format("ptrace(SETOPTIONS) of pid {}: {}", pid_,
                                                          errno_text(reset_errno)));
    if (!r)
        return r.error();
    if (*r <= 0)
        return Error::from_errno(static_cast<int>(-*r),
                                 fmt::format("fork inside pid {} for a snapshot: {}", pid_,
                                             errno_text(static_cast<int>(-*r))));
    if (*r != made)
        return Error::from_errno(EPROTO, fmt::format("fork inside pid {} for a snapshot: it "
                                                     "made {}, reported {}",
                                                     pid_, *r, made));
    // Auto-attached, it starts in a stop we must see before reading it.
    Tracee child(static_cast<pid_t>(*r));
    child.attached_ = true;
    child.snapshot_ = true;
    // Its memory is ours at the fork: our system call instruction is there.
    child.insn_ = insn_;
    child.trap_follows_ = trap_follows_;
    auto st = child.wait_stop();
    if (!st) {
        child.kill_and_wait();
        return st.error();
    }
    // It would run on if we died (an exporter inside migd, killed): a
    // second running copy, returning from our clone into the original's
    // code. Ours to kill when its tracer goes.
    if (auto k = child.kill_on_exit(); !k) {
        child.kill_and_wait();
        return k.error();
    }
    return child;
}

Result<void> Tracee::name_snapshot() {
    const long page = ::sysconf(_SC_PAGESIZE);
    // Shared, so that it never merges with a private neighbour whose flags
    // the unmap would then leave changed (VM_SOFTDIRTY).
    auto at = call(SYS_mmap, 0, static_cast<std::uint64_t>(page), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, static_cast<std::uint64_t>(-1), 0);
    if (!at)
        return at.error();
    if (*at < 0 && *at > -4096)
        return Error::from_errno(static_cast<int>(-*at),
                                 fmt::format("a page for the name of snapshot {}: {}", pid_,
                                             errno_text(static_cast<int>(-*at))));
    const auto addr = static_cast<std::uint64_t>(*at);
    std::array<std::byte, 16> name{};
    std::memcpy(name.data(), kSnapshotComm.data(), kSnapshotComm.size());
    auto wrote = write(addr, name);
    auto named = wrote ? call(SYS_prctl, PR_SET_NAME, addr) : Result<long>(wrote.error());
    auto gone = call(SYS_munmap, addr, static_cast<std::uint64_t>(page));
    if (!named)
        return named.error();
    if (*named < 0)
        return Error::from_errno(
            static_cast<int>(-*named),
            fmt::format("naming snapshot {}: {}", pid_, errno_text(static_cast<int>(-*named))));
    if (!gone)
        return gone.error();
    return {};
}

void Tracee::kill_and_wait() {
    if (!attached_)
        return;
    attached_ = false;
    ::kill(pid_, SIGKILL);
    for (;;) {
        int st;
        const pid_t r = ::waitpid(pid_, &st, __WALL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || WIFEXITED(st) || WIFSIGNALED(st))
            return;
    }
}

Result<int> Tracee::mem_fd() {
    if (!mem_) {
        mem_ = UniqueFd(::open(fmt::format("/proc/{}/mem", pid_).c_str(), O_RDWR | O_CLOEXEC));
        if (!mem_)
            return Error::from_errno(
                errno, fmt::format("opening /proc/{}/mem: {}", pid_, errno_text(errno)));
    }
    return mem_.get();
}

Result<Tracee::Vdso> Tracee::read_vdso() {
    auto maps = read_maps(pid_);
    if (!maps)
        return maps.error();
    for (const auto& m : *maps) {
        if (m.name != "[vdso]")
            continue;
        Vdso v{m.start, std::vector<std::byte>(m.end - m.start)};
        if (auto r = read_mem(m.start, v.bytes); !r)
            return r.error();
        return v;
    }
    return Vdso{};
}

Result<Tracee::VdsoId> Tracee::vdso_id() {
    auto vdso = read_vdso();
    if (!vdso)
        return vdso.error();
    if (vdso->bytes.empty())
        return VdsoId{};
    return VdsoId{static_cast<std::uint32_t>(vdso->bytes.size()), image::crc32c(0, vdso->bytes)};
}

Result<void> Tracee::read_mem(std::uint64_t addr, std::span<std::byte> out) {
    auto fd = mem_fd();
    if (!fd)
        return fd.error();
    while (!out.empty()) {
        const ssize_t n = ::pread(*fd, out.data(), out.size(), static_cast<off_t>(addr));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return Error::from_errno(n < 0 ? errno : EIO,
                                     fmt::format("reading memory of pid {} at {:#x}: {}", pid_,
                                                 addr, errno_text(n < 0 ? errno : EIO)));
        addr += static_cast<std::uint64_t>(n);
        out = out.subspan(static_cast<std::size_t>(n));
    }
    return {};
}

Result<void> Tracee::read(std::uint64_t addr, std::span<std::byte> out) {
    // A snapshot shares its pages copy-on-write with the process it was
    // forked from. process_vm_readv pins what it reads, and a pin of a shared
    // anonymous page makes the kernel give the reader a private copy first
    // (GUP's "unshare"): every page would be copied twice. /proc/PID/mem
    // takes plain references and copies each page once (2.3x faster for
    // 256 MiB on 6.18, ghost_bench_user's export rows).
    if (snapshot_)
        return read_mem(addr, out);
    while (!out.empty()) {
        iovec local{out.data(), out.size()};
        iovec remote{reinterpret_cast<void*>(addr), out.size()};
        const ssize_t n = ::process_vm_readv(pid_, &local, 1, &remote, 1, 0);
        if (n <= 0)
            return read_mem(addr, out); // unreadable page: ask the debugger way
        addr += static_cast<std::uint64_t>(n);
        out = out.subspan(static_cast<std::size_t>(n));
    }
    return {};
}

Result<void> Tracee::write(std::uint64_t addr, std::span<const std::byte> in) {
    while (!in.empty()) {
        iovec local{const_cast<std::byte*>(in.data()), in.size()};
        iovec remote{reinterpret_cast<void*>(addr), in.size()};
        ssize_t n = ::process_vm_writev(pid_, &local, 1, &remote, 1, 0);
        if (n <= 0) {
            // Not writable (or not there): the debugger way.
            auto fd = mem_fd();
            if (!fd)
                return fd.error();
            n = ::pwrite(*fd, in.data(), in.size(), static_cast<off_t>(addr));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return Error::from_errno(n < 0 ? errno : EIO,
                                         fmt::format("writing memory of pid {} at {:#x}: {}", pid_,
                                                     addr, errno_text(n < 0 ? errno : EIO)));
        }
        addr += static_cast<std::uint64_t>(n);
        in = in.subspan(static_cast<std::size_t>(n));
    }
    return {};
}

Result<void> with_held(pid_t pid, const std::function<Result<void>(Tracee&)>& calls) {
    auto held = Tracee::seize(pid);
    if (!held)
        return held.error();
    Tracee& t = *held;
    // Checked when it was exported, but it ran on since: a filter it set
    // meanwhile could kill it for the call we would run.
    auto status = read_status(pid);
    if (!status)
        return status.error();
    if (const auto mode = status_field(*status, "Seccomp"); !mode.empty() && mode != "0")
        return Error::from_errno(EOPNOTSUPP, fmt::format("pid {} is under seccomp (mode {}) "
                                                         "now: no system call of ours runs in it",
                                                         pid, mode));
    auto regs0 = t.regs();
    if (!regs0)
        return regs0.error();
    if (auto a = t.abort_rseq_section(*regs0); !a)
        return a.error();
    auto mask0 = t.signal_mask();
    if (!mask0)
        return mask0.error();
    // No handler may run in it while it answers.
    Result<void> r = t.set_signal_mask(~0ULL);
    if (r) {
        auto insn = t.find_syscall_insn(*regs0);
        if (insn) {
            t.use_syscall_insn(*insn);
            r = calls(t);
            if (auto s = t.set_regs(restarted(*regs0, true)); !s && r)
                r = s.error();
        } else {
            r = insn.error();
        }
    }
    (void)t.set_signal_mask(*mask0);
    if (auto d = t.detach(); !d && r)
        r = d.error();
    return r;
}

void reap_snapshot(pid_t parent, pid_t child) {
    (void)with_held(parent, [child](Tracee& t) -> Result<void> {
        (void)t.call(SYS_wait4, static_cast<std::uint64_t>(child), 0, WNOHANG | __WALL, 0);
        return {};
    });
}

Result<int> reap_leftover_snapshots(pid_t pid) {
    const auto left = leftover_snapshots(children_of(pid));
    if (left.empty())
        return 0;
    int reaped = 0;
    auto r = with_held(pid, [&](Tracee& t) -> Result<void> {
        for (const pid_t c : left) {
            auto w = t.call(SYS_wait4, static_cast<std::uint64_t>(c), 0, WNOHANG | __WALL, 0);
            if (!w)
                return w.error();
            reaped += *w == c;
        }
        return {};
    });
    if (!r)
        return r.error();
    return reaped;
}

SnapshotGuard::~SnapshotGuard() {
    if (!snap_)
        return;
    const pid_t child = snap_->pid();
    snap_->kill_and_wait();
    snap_.reset();
    reap_snapshot(parent_, child);
}

} // namespace ghost::user
