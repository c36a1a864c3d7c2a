// SPDX-License-Identifier: LGPL-2.1-or-later
// Process attributes in the user engine (Documentation/user-engine.md).
#include "user/attrs.hpp"

#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "ghost_policy.h"
#include "sys.hpp"
#include "user/proc.hpp"

namespace ghost::user {

namespace {

constexpr int kCmdGetRegistrations = 1 << 9; // MEMBARRIER_CMD_GET_REGISTRATIONS, Linux 6.3

// Each GHOST_MEMBARRIER_* bit, the command that registers it and the one
// that fails with EPERM unless it is registered (none for the global one).
struct Membarrier {
    std::uint32_t bit;
    int reg, use;
};
constexpr std::array<Membarrier, 4> kMembarrier{{
    {GHOST_MEMBARRIER_GLOBAL_EXPEDITED, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0},
    {GHOST_MEMBARRIER_PRIVATE_EXPEDITED, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
     MEMBARRIER_CMD_PRIVATE_EXPEDITED},
    {GHOST_MEMBARRIER_PRIVATE_EXPEDITED_SYNC_CORE,
     MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE,
     MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE},
    {GHOST_MEMBARRIER_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ,
     MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ},
}};

int parse_int(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    int v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v);
    return v;
}

// The namespace file's identity, or {0, 0} when the kernel has none.
std::pair<dev_t, ino_t> ns_id(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return {0, 0};
    return {st.st_dev, st.st_ino};
}

// A reason from one of the printf formats ghost.ko uses too (uapi).
[[gnu::format(printf, 2, 3)]] Error reason_of(int err, const char* format, ...) {
    char r[GHOST_REASON_LEN];
    va_list ap;
    va_start(ap, format);
    std::vsnprintf(r, sizeof(r), format, ap);
    va_end(ap);
    return Error::from_errno(err, r);
}

Error refused(int err, const char* reason) {
    return Error::from_errno(-err, reason);
}

Result<int> oom_score_adj(pid_t pid) {
    auto t =
        read_text(pid ? fmt::format("/proc/{}/oom_score_adj", pid) : "/proc/self/oom_score_adj");
    if (!t)
        return t.error();
    return parse_int(*t);
}

// Writes /proc/self/oom_score_adj: the kernel's own rule decides.
int set_own_oom(int v) {
    const UniqueFd fd(::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC));
    if (!fd)
        return errno;
    const std::string s = std::to_string(v);
    return ::write(fd.get(), s.data(), s.size()) == static_cast<ssize_t>(s.size()) ? 0 : errno;
}

} // namespace

// ---- export ---------------------------------------------------------------------

Result<void> check_attrs(pid_t pid) {
    auto status = read_status(pid);
    if (!status)
        return status.error();
    return check_attrs(pid, *status);
}

Result<void> check_attrs(pid_t pid, std::string_view status) {
    ghost_attrs_facts f{};
    f.pid = pid;
    f.seccomp = parse_int(status_field(status, "Seccomp"));
    const auto time = ns_id(fmt::format("/proc/{}/ns/time", pid));
    const auto children = ns_id(fmt::format("/proc/{}/ns/time_for_children", pid));
    const auto own = ns_id("/proc/self/ns/time");
    f.other_time_ns = time.second && own.second && time != own;
    f.time_ns_for_children = time.second && children.second && time != children;
    const auto user = ns_id(fmt::format("/proc/{}/ns/user", pid));
    const auto own_user = ns_id("/proc/self/ns/user");
    f.other_user_ns = user.second && own_user.second && user != own_user;
    // As ghost.ko sees it: "/" also for the root of another mount namespace.
    const auto root = read_link(fmt::format("/proc/{}/root", pid));
    f.chrooted = root && *root != "/";
    char reason[GHOST_REASON_LEN] = {};
    if (const int err = ghost_policy_attrs(&f, reason, sizeof(reason)); err < 0)
        return refused(err, reason);
    return {};
}

void queue_attrs(std::vector<CallEntry>& calls, std::uint64_t scratch) {
    const auto q = [&](long nr, std::uint64_t a1 = 0, std::uint64_t a2 = 0) {
        calls.push_back({static_cast<std::uint64_t>(nr), {a1, a2}, 0});
    };
    q(SYS_prctl, PR_GET_THP_DISABLE);
    q(SYS_prctl, PR_GET_CHILD_SUBREAPER, scratch);
    q(SYS_prctl, PR_GET_TIMERSLACK);
    q(SYS_prctl, PR_GET_DUMPABLE);
    q(SYS_membarrier, kCmdGetRegistrations);
    q(SYS_membarrier, MEMBARRIER_CMD_QUERY);
    // Each private command, whose EPERM says it is not registered: read only
    // where the kernel cannot say which are (below). Where it is, it is a
    // barrier among the threads of a held process, which changes nothing.
    for (const auto& m : kMembarrier)
        if (m.use)
            q(SYS_membarrier, static_cast<std::uint64_t>(m.use));
}

void attrs_answered(std::span<const CallEntry> answers, std::int32_t subreaper, ghost_attrs& a) {
    std::size_t i = 0;
    const auto next = [&] {
        return i < answers.size() ? static_cast<long>(answers[i++].result) : -ENOSYS;
    };
    if (next() == 1)
        a.flags |= GHOST_ATTRS_THP_DISABLE;
    if (next() == 0 && subreaper)
        a.flags |= GHOST_ATTRS_CHILD_SUBREAPER;
    if (const long slack = next(); !is_err(slack))
        a.timerslack_ns = static_cast<std::uint64_t>(slack);
    // 0, or 2 (SUID_DUMP_ROOT) after a setuid exec: either way not its
    // owner's to trace.
    if (const long dumpable = next(); !is_err(dumpable) && dumpable != 1)
        a.flags |= GHOST_ATTRS_NOT_DUMPABLE;

    // Linux 6.3+ says which commands it registered for. Before, a private
    // command fails with EPERM unless registered, and nothing tells the
    // global one: it is recorded as registered when the kernel offers it
    // (an extra registration only makes others' barriers reach it too).
    const long regs = next();
    const long offered = next();
    if (!is_err(regs)) {
        for (const auto& m : kMembarrier)
            if (regs & m.reg)
                a.membarrier |= m.bit;
        return;
    }
    if (is_err(offered))
        return; // no membarrier(2): nothing registered
    for (const auto& m : kMembarrier) {
        const long used = m.use ? next() : 0;
        if (!(offered & m.reg))
            continue;
        if (!m.use || used == 0)
            a.membarrier |= m.bit;
    }
}

Result<void> read_attrs(pid_t pid, std::string_view status, ghost_attrs& a) {
    if (parse_int(status_field(status, "NoNewPrivs")))
        a.flags |= GHOST_ATTRS_NO_NEW_PRIVS;
    auto oom = oom_score_adj(pid);
    if (!oom)
        return oom.error();
    a.oom_score_adj = *oom;
    auto st = read_stat(pid);
    if (!st)
        return st.error();
    if (st->size() <= 19)
        return Error::from_errno(EIO, fmt::format("/proc/{}/stat is too short", pid));
    const auto field = [&](int n) { return parse_int((*st)[static_cast<std::size_t>(n)]); };
    if (field(6) == pid) // session
        a.flags |= GHOST_ATTRS_SESSION_LEADER;
    if (field(5) == pid) // pgrp
        a.flags |= GHOST_ATTRS_GROUP_LEADER;
    a.nice = field(19);
    return {};
}

// ---- import ---------------------------------------------------------------------

Result<void> prepare_attrs(const ghost_attrs* a, AttrsPlan& plan) {
    plan = AttrsPlan{};
    if (!a)
        return {};
    plan.present = true;
    plan.want = *a;
    const pid_t self = ::getpid();

    if (a->membarrier) {
        const long offered = ::syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        std::uint32_t have = 0;
        for (const auto& m : kMembarrier)
            if (offered > 0 && (offered & m.reg))
                have |= m.bit;
        if (a->membarrier & ~have)
            return reason_of(EOPNOTSUPP, GHOST_MEMBARRIER_REASON, a->membarrier);
    }
    // setsid() fails for a process group leader; a caller already leading
    // its session or group keeps leading it.
    if (a->flags & GHOST_ATTRS_SESSION_LEADER) {
        plan.setsid = ::getsid(0) != self;
        if (plan.setsid && ::getpgid(0) == self)
            return reason_of(EPERM, GHOST_SETSID_REASON, self);
    } else if (a->flags & GHOST_ATTRS_GROUP_LEADER) {
        plan.setpgid = ::getpgid(0) != self;
    }

    // A lower nice value and oom_score_adj are tried here, where a refusal
    // can still be reported; raising either back is always allowed.
    errno = 0;
    const int nice0 = ::getpriority(PRIO_PROCESS, 0);
    if (errno == 0 && a->nice < nice0) {
        if (::setpriority(PRIO_PROCESS, 0, a->nice) != 0)
            return reason_of(EACCES, GHOST_NICE_REASON, a->nice, nice0);
        plan.nice_set = true;
        plan.nice0 = nice0;
    }
    auto oom0 = oom_score_adj(0);
    if (!oom0) {
        undo_attrs(plan);
        return oom0.error();
    }
    if (a->oom_score_adj != *oom0) {
        if (const int err = set_own_oom(a->oom_score_adj); err) {
            undo_attrs(plan);
            if (err == EACCES || err == EPERM)
                return reason_of(EACCES, GHOST_OOM_REASON, a->oom_score_adj);
            return Error::from_errno(err, fmt::format("setting oom_score_adj to {}: {}",
                                                      a->oom_score_adj, errno_text(err)));
        }
        plan.oom_set = true;
        plan.oom0 = *oom0;
    }
    return {};
}

void undo_attrs(const AttrsPlan& plan) {
    if (plan.oom_set)
        (void)set_own_oom(plan.oom0);
    if (plan.nice_set)
        (void)::setpriority(PRIO_PROCESS, 0, plan.nice0);
}

Result<void> commit_attrs(CallBatch& batch, const AttrsPlan& plan) {
    if (!plan.present)
        return {};
    const ghost_attrs& a = plan.want;
    Result<void> r;
    const auto run = [&](const char* what, long nr, std::uint64_t a1 = 0, std::uint64_t a2 = 0,
                         std::uint64_t a3 = 0) {
        if (r)
            r = batch.add(what, nr, a1, a2, a3);
    };
    if (a.flags & GHOST_ATTRS_NO_NEW_PRIVS)
        run("prctl(PR_SET_NO_NEW_PRIVS)", SYS_prctl, PR_SET_NO_NEW_PRIVS, 1);
    run("prctl(PR_SET_THP_DISABLE)", SYS_prctl, PR_SET_THP_DISABLE,
        (a.flags & GHOST_ATTRS_THP_DISABLE) ? 1 : 0);
    run("prctl(PR_SET_CHILD_SUBREAPER)", SYS_prctl, PR_SET_CHILD_SUBREAPER,
        (a.flags & GHOST_ATTRS_CHILD_SUBREAPER) ? 1 : 0);
    run("prctl(PR_SET_TIMERSLACK)", SYS_prctl, PR_SET_TIMERSLACK, a.timerslack_ns);
    // Raising the nice value (a lower one was set by the caller already).
    run("setpriority", SYS_setpriority, PRIO_PROCESS, 0 /* self */,
        static_cast<std::uint64_t>(static_cast<std::int64_t>(a.nice)));
    for (const auto& m : kMembarrier)
        if (a.membarrier & m.bit)
            run("membarrier registration", SYS_membarrier, static_cast<std::uint64_t>(m.reg));
    if (plan.setsid)
        run("setsid", SYS_setsid);
    if (plan.setpgid)
        run("setpgid(0, 0)", SYS_setpgid, 0, 0);
    return r;
}

} // namespace ghost::user
