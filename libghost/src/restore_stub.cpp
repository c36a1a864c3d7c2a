// SPDX-License-Identifier: LGPL-2.1-or-later
// ghost-restore-stub: the program restart() and duplicate() spawn, which
// becomes the image (Documentation/libghost.md, "Restart"). A new process
// made by posix_spawn() runs nothing of its parent's: here, single-threaded,
// it may allocate, read /proc and take any lock, which a child forked from a
// multithreaded caller may not.
//
//   ghost-restore-stub --engine kernel|user [--device PATH] --fd N
//                      --status-fd N [--stopped] [--sequence] [--lazy] [--caps P,E,I]
//                      [--owner UID:GID:GROUPS]
//
// --sequence: the descriptor holds a pre-copy's images, oldest first, to
// its end (ghost/precopy.hpp); the newest is restored.
//
// --lazy: the user engine restores the image file lazily
// (RestoreOptions::lazy).
//
// --caps: the caller's permitted, effective and inheritable capability
// sets (hex); the stub drops what it has beyond them, so that it never has
// more than its caller (execve() gives a root stub every capability again).
//
// --owner UID:GID:G1,G2...: the image must run as this user and as
// nothing more (RestoreOptions::owner), checked before a file it names is
// opened; the stub first takes the owner's gid and groups, against which
// the kernel engine checks the image's.
//
// It writes one byte ('+') on the status descriptor as soon as it runs; a
// failure follows as "errno reason" and the stub exits 127. On success the
// image replaces it, the descriptor (close-on-exec) closes, and the parent
// reads the end of the pipe after the '+'. Not meant to be run by hand.
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ghost/engine.hpp"
#include "ghost/process.hpp"
#include "sys.hpp"

namespace {

[[noreturn]] void fail(int status_fd, const ghost::Error& e) {
    const std::string msg = ghost::failure_report(e);
    std::string_view left = msg;
    while (!left.empty()) {
        const ssize_t n = ::write(status_fd, left.data(), left.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        left.remove_prefix(static_cast<std::size_t>(n));
    }
    ::_exit(127);
}

// Limits this process's capabilities to the caller's "P,E,I".
ghost::Result<void> limit_caps(const std::string& spec) {
    unsigned long long want[3];
    if (std::sscanf(spec.c_str(), "%llx,%llx,%llx", &want[0], &want[1], &want[2]) != 3)
        return ghost::Error::from_errno(EINVAL, "the restore stub was given bad --caps " + spec);
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[2]{};
    if (::syscall(SYS_capget, &h, d) != 0)
        return ghost::Error::from_errno(errno, "capget in the restore stub failed");
    for (int i = 0; i < 2; i++) {
        auto part = [i](unsigned long long v) { return static_cast<std::uint32_t>(v >> (32 * i)); };
        d[i].permitted &= part(want[0]);
        d[i].effective = d[i].permitted & part(want[1]);
        d[i].inheritable &= part(want[2]);
    }
    if (::syscall(SYS_capset, &h, d) != 0)
        return ghost::Error::from_errno(errno, "the restore stub cannot take its caller's "
                                               "capabilities (capset failed)");
    return {};
}

// "UID:GID:G1,G2..." (no groups: "UID:GID:").
std::optional<ghost::Owner> parse_owner(const std::string& spec) {
    ghost::Owner o;
    unsigned long long v[2];
    int used = 0;
    if (std::sscanf(spec.c_str(), "%llu:%llu:%n", &v[0], &v[1], &used) != 2 || used == 0 ||
        v[0] >= 0xffffffffULL || v[1] >= 0xffffffffULL)
        return std::nullopt;
    o.uid = static_cast<uid_t>(v[0]);
    o.gid = static_cast<gid_t>(v[1]);
    const char* p = spec.c_str() + used;
    while (*p) {
        char* end = nullptr;
        errno = 0;
        const unsigned long long g = std::strtoull(p, &end, 10);
        if (errno || end == p || g >= 0xffffffffULL || (*end && *end != ','))
            return std::nullopt;
        o.groups.push_back(static_cast<gid_t>(g));
        p = *end ? end + 1 : end;
    }
    return o;
}

// Takes the owner's gid and supplementary groups (root may), unless this
// process's already lie among them: what the kernel engine checks an
// image's gids against. Changing its gid leaves a process not dumpable,
// which the user engine's tracer needs it to be: put back.
ghost::Result<void> take_owners_groups(const ghost::Owner& o) {
    auto among = ghost::runs_among_groups_of(o);
    if (!among)
        return among.error();
    if (*among)
        return {};
    const int dumpable = ::prctl(PR_GET_DUMPABLE);
    if (::setgroups(o.groups.size(), o.groups.data()) != 0 || ::setresgid(o.gid, o.gid, o.gid) != 0)
        return ghost::Error::from_errno(errno, "the restore stub cannot take the groups of uid " +
                                                   std::to_string(o.uid) + ": " +
                                                   std::strerror(errno));
    if (dumpable >= 0)
        (void)::prctl(PR_SET_DUMPABLE, dumpable);
    return {};
}

int parse_fd(const char* s) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(s, &end, 10);
    if (errno || !*s || *end || v < 0 || v > 1 << 30)
        return -1;
    return static_cast<int>(v);
}

} // namespace

int main(int argc, char** argv) {
    int status_fd = -1, image_fd = -1;
    bool stopped = false, sequence = false, lazy = false;
    std::string_view engine_name = "auto";
    std::string device(ghost::Engine::default_device);
    std::string bad, caps, owner;
    for (int i = 1; i < argc; i++) {
        const std::string_view a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--stopped") {
            stopped = true;
        } else if (a == "--sequence") {
            sequence = true;
        } else if (a == "--lazy") {
            lazy = true;
        } else if (a == "--status-fd" && has_value) {
            status_fd = parse_fd(argv[++i]);
        } else if (a == "--fd" && has_value) {
            image_fd = parse_fd(argv[++i]);
        } else if (a == "--engine" && has_value) {
            engine_name = argv[++i];
        } else if (a == "--owner" && has_value) {
            owner = argv[++i];
        } else if (a == "--caps" && has_value) {
            caps = argv[++i];
        } else if (a == "--device" && has_value) {
            device = argv[++i];
        } else if (bad.empty()) {
            bad = std::string(a);
        }
    }
    if (status_fd < 0 || ::fcntl(status_fd, F_SETFD, FD_CLOEXEC) != 0) {
        static const char usage[] = "ghost-restore-stub: spawned by libghost's restart(); "
                                    "needs --status-fd N (see libghost.md)\n";
        (void)!::write(2, usage, sizeof(usage) - 1);
        return 2;
    }
    if (::write(status_fd, "+", 1) != 1)
        return 127;
    if (!bad.empty())
        fail(status_fd, ghost::Error::from_errno(
                            EINVAL, "the restore stub was given an unknown argument: " + bad));
    if (image_fd < 0 || ::fcntl(image_fd, F_SETFD, FD_CLOEXEC) != 0)
        fail(status_fd,
             ghost::Error::from_errno(EBADF, "the restore stub was given no image descriptor"));
    if (!caps.empty())
        if (auto r = limit_caps(caps); !r)
            fail(status_fd, r.error());
    auto kind = ghost::parse_engine_kind(engine_name);
    if (!kind)
        fail(status_fd, kind.error());
    auto engine = ghost::Engine::open(*kind, device);
    if (!engine)
        fail(status_fd, engine.error());
    ghost::RestoreOptions o;
    o.stopped = stopped;
    o.sequence = sequence;
    o.lazy = lazy;
    if (!owner.empty()) {
        o.owner = parse_owner(owner);
        if (!o.owner)
            fail(status_fd, ghost::Error::from_errno(
                                EINVAL, "the restore stub was given a bad --owner " + owner));
        if (auto t = take_owners_groups(*o.owner); !t)
            fail(status_fd, t.error());
    }
    // This process exists to become the image: a failure past the kernel's
    // point of no return kills it, which restart() reports.
    o.direct = true;
    // After '+', a '.' for every image of a sequence taken in; a failure's
    // report starts with its errno, a digit.
    o.image_done = [status_fd] { (void)!::write(status_fd, ".", 1); };
    fail(status_fd, ghost::restart_self(**engine, image_fd, o));
}
