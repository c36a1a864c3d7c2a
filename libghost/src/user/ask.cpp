// SPDX-License-Identifier: LGPL-2.1-or-later
// The questions an export asks the held process (ask.hpp).
#include "user/ask.hpp"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "sys.hpp"
#include "user/attrs.hpp"
#include "user/call_batch.hpp"

namespace ghost::user {

namespace {

constexpr std::uint64_t kPage = 4096;

// The scratch pages: results in the first, code and the question table in
// the second.
constexpr std::uint64_t kActOff = 0, kAltOff = 2048, kTidOff = 2080, kItimerOff = 2096,
                        kAttrsOff = 2304, kCodeOff = 4096, kTrapOff = 4096 + 128,
                        kEachOff = 4096 + 192, kTableOff = 4096 + 256;
constexpr std::size_t kTableRoom = (2 * kPage - kTableOff) / sizeof(CallEntry);

// Reads every signal's action into consecutive ghost_sigaction slots in one
// run (Tracee::run_to_trap) instead of one ptrace round trip per signal:
//   loop: mov eax, SYS_rt_sigaction; mov edi, ebx; xor esi, esi;
//         mov rdx, r12; mov r10d, 8; syscall; test rax, rax; jnz done;
//         add r12, 32; inc ebx; cmp ebx, r13d; jne loop
//   done: int3
// with ebx the first signal, r12 its slot, r13d the signal after the last;
// it stops at the first failure (rax, and ebx the signal).
constexpr std::uint8_t kSigactionLoop[] = {
    0xb8, 0x0d, 0x00, 0x00, 0x00, 0x89, 0xdf, 0x31, 0xf6, 0x4c, 0x89, 0xe2, 0x41,
    0xba, 0x08, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x48, 0x85, 0xc0, 0x75, 0x0b, 0x49,
    0x83, 0xc4, 0x20, 0xff, 0xc3, 0x44, 0x39, 0xeb, 0x75, 0xdc, 0xcc};
static_assert(sizeof(ghost_sigaction) == 32 && SYS_rt_sigaction == 13);
static_assert(sizeof(kSigactionLoop) <= 128); // kTrapOff follows it
static_assert(GHOST_NSIG * sizeof(ghost_sigaction) <= kAltOff);

Error syscall_failed(pid_t pid, const char* what, long r) {
    return Error::from_errno(static_cast<int>(-r), fmt::format("{} in pid {} failed: {}", what, pid,
                                                               errno_text(static_cast<int>(-r))));
}

// The signal actions: one run of kSigactionLoop, or one call each.
Result<void> ask_actions(Tracee& t, std::uint64_t s, bool code) {
    int first = 1; // the first signal whose action is still to read
    if (code && t.write(s + kCodeOff, std::as_bytes(std::span(kSigactionLoop)))) {
        auto regs0 = t.regs();
        if (!regs0)
            return regs0.error();
        Regs r = *regs0;
        r.rip = s + kCodeOff;
        r.rbx = 1;
        r.r12 = s + kActOff;
        r.r13 = GHOST_NSIG + 1;
        auto done = t.run_to_trap(r);
        if (!done)
            return done.error();
        if (done->rax != 0)
            return syscall_failed(t.pid(), "rt_sigaction", static_cast<long>(done->rax));
        first = GHOST_NSIG + 1;
    }
    for (int sig = first; sig <= GHOST_NSIG; sig++) {
        auto r =
            t.call(SYS_rt_sigaction, sig, 0, s + kActOff + (sig - 1) * sizeof(ghost_sigaction), 8);
        if (!r)
            return r.error();
        if (*r != 0)
            return syscall_failed(t.pid(), "rt_sigaction", *r);
    }
    return {};
}

// Runs every question: in one table where the page may hold code, else one
// call each.
Result<void> run_questions(Tracee& t, std::uint64_t s, bool code, std::span<CallEntry> calls) {
    if (code && calls.size() <= kTableRoom) {
        auto regs0 = t.regs();
        if (!regs0)
            return regs0.error();
        return run_each(t, *regs0, s + kEachOff, s + kTableOff, calls);
    }
    for (auto& c : calls) {
        auto r = t.call(static_cast<long>(c.nr), c.arg[0], c.arg[1], c.arg[2], c.arg[3], c.arg[4],
                        c.arg[5]);
        if (!r)
            return r.error();
        c.result = static_cast<std::uint64_t>(*r);
    }
    return {};
}

// The table's first entries, in this order; queue_attrs() appends its own.
enum Question : std::size_t {
    kAltstack,
    kTidAddress,
    kItimer0,
    kSecurebits = kItimer0 + 3,
    kBrk,
    kAttrs
};

std::vector<CallEntry> questions(std::uint64_t s) {
    std::vector<CallEntry> calls(kAttrs);
    const auto set = [&](Question q, long nr, std::uint64_t a1 = 0, std::uint64_t a2 = 0) {
        calls[q] = {static_cast<std::uint64_t>(nr), {a1, a2}, 0};
    };
    set(kAltstack, SYS_sigaltstack, 0, s + kAltOff);
    // Needs CONFIG_CHECKPOINT_RESTORE; without it the address stays 0.
    set(kTidAddress, SYS_prctl, PR_GET_TID_ADDRESS, s + kTidOff);
    for (int which = 0; which < 3; which++)
        set(static_cast<Question>(kItimer0 + which), SYS_getitimer,
            static_cast<std::uint64_t>(which), s + kItimerOff + which * sizeof(itimerval));
    set(kSecurebits, SYS_prctl, PR_GET_SECUREBITS);
    set(kBrk, SYS_brk, 0);
    queue_attrs(calls, s + kAttrsOff);
    return calls;
}

} // namespace

Result<Asked> ask(Tracee& t) {
    const pid_t pid = t.pid();
    // Shared, so that it never merges with a private neighbour: a mapping
    // it grew would show every page soft-dirty (dirty.hpp) ever after.
    // Executable, for the loops that read the answers; where that is
    // refused (W^X policies), each question is one call.
    bool code = true;
    auto scratch = t.call(SYS_mmap, 0, 2 * kPage, PROT_READ | PROT_WRITE | PROT_EXEC,
                          MAP_SHARED | MAP_ANONYMOUS, static_cast<std::uint64_t>(-1), 0);
    if (scratch && is_err(*scratch)) {
        code = false;
        scratch = t.call(SYS_mmap, 0, 2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                         static_cast<std::uint64_t>(-1), 0);
    }
    if (!scratch)
        return scratch.error();
    if (is_err(*scratch))
        return syscall_failed(pid, "mmap of a scratch page", *scratch);
    const auto s = static_cast<std::uint64_t>(*scratch);
    // Calls from the scratch page run to an int3 behind their syscall (one
    // ptrace stop each, not two) until it is unmapped.
    struct InsnBack {
        Tracee& t;
        std::uint64_t insn = t.syscall_insn();
        ~InsnBack() { t.use_syscall_insn(insn); }
    } insn_back{t};
    static constexpr std::byte kTrap[] = {std::byte{0x0f}, std::byte{0x05}, std::byte{0xcc}};
    if (code && t.write(s + kTrapOff, kTrap))
        t.use_syscall_trap(s + kTrapOff);
    else
        code = false;

    Asked a;
    auto calls = questions(s);
    Result<void> res = ask_actions(t, s, code);
    if (res)
        res = run_questions(t, s, code, calls);
    std::vector<std::byte> page(kPage);
    if (res)
        res = t.read(s, page);
    t.use_syscall_insn(insn_back.insn); // not from the page it unmaps
    auto unmapped = t.call(SYS_munmap, s, 2 * kPage);
    if (!res)
        return res.error();
    if (!unmapped)
        return unmapped.error();

    const auto answer = [&](std::size_t q) { return static_cast<long>(calls[q].result); };
    if (answer(kAltstack) != 0)
        return syscall_failed(pid, "sigaltstack", answer(kAltstack));
    if (is_err(answer(kSecurebits)))
        return syscall_failed(pid, "prctl(PR_GET_SECUREBITS)", answer(kSecurebits));
    a.securebits = static_cast<std::uint32_t>(answer(kSecurebits));
    a.brk = static_cast<std::uint64_t>(answer(kBrk));
    std::int32_t subreaper = 0;
    std::memcpy(&subreaper, page.data() + kAttrsOff, sizeof(subreaper));
    attrs_answered(std::span(calls).subspan(kAttrs), subreaper, a.attrs);

    std::memcpy(a.act.data(), page.data() + kActOff, sizeof(a.act));
    std::memcpy(&a.altstack, page.data() + kAltOff, sizeof(a.altstack));
    // Without CONFIG_CHECKPOINT_RESTORE the call failed and the slot is 0.
    std::memcpy(&a.tid_address, page.data() + kTidOff, sizeof(a.tid_address));
    for (int which = 0; which < 3; which++) {
        itimerval it;
        std::memcpy(&it, page.data() + kItimerOff + which * sizeof(itimerval), sizeof(it));
        if (it.it_value.tv_sec || it.it_value.tv_usec)
            a.itimer_armed = true;
    }
    return a;
}

} // namespace ghost::user
