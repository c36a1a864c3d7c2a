// SPDX-License-Identifier: LGPL-2.1-or-later
// How the lazy restart's pager starts (lazy.hpp): who holds the
// userfaultfd, and when.
//
// The userfaultfd is made by the process being restored while it still runs
// as the restorer (root), because only a privileged creator's serves faults
// taken inside system calls. Such a descriptor in the hands of the image's
// user would stall the kernel at will, a known aid to exploiting races. So
// it never is in a process the user may trace or take descriptors from, nor
// in one they may stop (which would hold such faults as long as they
// liked): the pager is forked first, takes the image's credentials but for
// its real and saved ids (assume_pager_creds()), makes itself non-dumpable,
// and only then is the descriptor made and passed to it over their socket. The process being restored (the image's user's, dumpable)
// and its tracer keep only their end of that socket, through which the
// tracer later names the mappings to fill.
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include <fmt/format.h>

#include "ghost/io.hpp"
#include "scm_rights.hpp"
#include "sys.hpp"
#include "user/creds.hpp"
#include "user/lazy.hpp"

namespace ghost::user::lazy {

namespace {

constexpr std::uint32_t kMaxReport = 4096;

// Exactly buf.size() bytes; false at the end of the stream or on an error.
bool read_exact(int fd, std::span<std::byte> buf) {
    std::size_t got = 0;
    while (got < buf.size()) {
        const ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        got += static_cast<std::size_t>(n);
    }
    return true;
}

template <typename T> bool read_value(int fd, T& v) {
    return read_exact(fd, std::as_writable_bytes(std::span(&v, 1)));
}

template <typename T> Result<void> write_value(int fd, const T& v) {
    return write_all(fd, std::as_bytes(std::span(&v, 1)));
}

// A report (sys.hpp: "errno reason", or empty for success) as a length and
// its bytes.
Result<void> send_report(int fd, const std::string& report) {
    const auto len = static_cast<std::uint32_t>(std::min<std::size_t>(report.size(), kMaxReport));
    if (auto w = write_value(fd, len); !w)
        return w;
    return write_all(fd, std::as_bytes(std::span(report.data(), len)));
}

// The report's error, or nothing; the pager's end gone is an error too.
Result<void> recv_report(int fd, std::string_view waiting_for) {
    std::uint32_t len = 0;
    if (!read_value(fd, len) || len > kMaxReport)
        return Error::from_errno(
            EIO, fmt::format("the lazy restart's pager ended before {}", waiting_for));
    std::string report(len, '\0');
    if (!read_exact(fd, std::as_writable_bytes(std::span(report.data(), report.size()))))
        return Error::from_errno(
            EIO, fmt::format("the lazy restart's pager ended before {}", waiting_for));
    if (report.empty())
        return {};
    return parse_failure_report(report);
}

Result<void> send_fd(int sock, int fd) {
    const char one = 'u';
    if (const int err = send_with_fd(sock, std::as_bytes(std::span(&one, 1)), fd); err != 0)
        return Error::from_errno(err, fmt::format("handing the userfaultfd to the lazy "
                                                  "restart's pager: {}",
                                                  errno_text(err)));
    return {};
}

UniqueFd recv_fd(int sock) {
    char one = 0;
    UniqueFd fd;
    if (recv_with_fd(sock, std::as_writable_bytes(std::span(&one, 1)), &fd) != 1)
        return {};
    return fd;
}

// Which of the image's mappings to fill, as their indexes, from the tracer;
// nothing at the end of the stream (the restore was given up before).
std::optional<std::vector<std::uint32_t>> recv_mappings(int link, std::size_t vmas) {
    std::uint32_t count = 0;
    if (!read_value(link, count) || count > vmas)
        return std::nullopt;
    std::vector<std::uint32_t> idx(count);
    if (!read_exact(link, std::as_writable_bytes(std::span(idx))))
        return std::nullopt;
    for (const auto i : idx)
        if (i >= vmas)
            return std::nullopt;
    return idx;
}

// The pager's life until it serves: become the image's user, out of its
// reach (assume_pager_creds()); take the userfaultfd; register what the
// tracer names.
[[noreturn]] void pager_main(UniqueFd link, const image::Image& img, pid_t target,
                             std::span<const Piece> all) {
    ::prctl(PR_SET_NAME, "ghost-pager", 0, 0, 0);
    // Not dumpable before the switch (assume_creds.h makes a dumpable
    // caller dumpable again after it) and after it (suid_dumpable may be
    // 1): only CAP_SYS_PTRACE may trace it or take its descriptors.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    auto as_user = assume_pager_creds(img);
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    // The signals of a terminal or a polite stop do not end it: the pages
    // it had not put in would read as zeros. SIGKILL still does; its guard
    // (lazy_guard.hpp) then kills the process.
    for (const int sig : {SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2})
        ::signal(sig, SIG_IGN);
    if (!as_user) {
        (void)send_report(link.get(), failure_report(as_user.error()));
        ::_exit(1);
    }
    if (!send_report(link.get(), ""))
        ::_exit(1);
    UniqueFd uffd = recv_fd(link.get());
    auto idx = uffd ? recv_mappings(link.get(), img.vmas.size()) : std::nullopt;
    if (!idx)
        ::_exit(0); // given up before the rebuild reached the memory
    std::vector<Piece> pieces;
    for (const auto i : *idx) {
        const auto& r = img.vmas[i].rec;
        if (auto reg = register_range(uffd.get(), r.start, r.end); !reg) {
            (void)send_report(link.get(), failure_report(reg.error()));
            ::_exit(1);
        }
        const auto first =
            std::lower_bound(all.begin(), all.end(), r.start, [](const Piece& p, std::uint64_t a) {
                return p.addr + p.data.size() <= a;
            });
        for (auto it = first; it != all.end() && it->addr < r.end; ++it)
            pieces.push_back(*it);
    }
    if (!send_report(link.get(), ""))
        ::_exit(1);
    serve_pages(std::move(uffd), target, std::move(link), std::move(pieces));
}

} // namespace

Result<UniqueFd> start_pager(const image::Image& img, pid_t target, std::span<const Piece> pieces) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return Error::from_errno(errno, fmt::format("socketpair: {}", errno_text(errno)));
    UniqueFd mine(sv[0]), theirs(sv[1]);
    // A grandchild, orphaned at once: the restored process must have no
    // child it does not know of.
    const pid_t mid = ::fork();
    if (mid < 0)
        return Error::from_errno(errno, fmt::format("fork (the pager): {}", errno_text(errno)));
    if (mid == 0) {
        if (::fork() != 0)
            ::_exit(0);
        // Nothing of the caller's stays open here: whoever waits for its
        // descriptors to close (restart()'s status pipe) must not wait for
        // the pager.
        close_below(~0U, {theirs.get()});
        (void)mine.release();
        pager_main(std::move(theirs), img, target, pieces);
    }
    theirs.reset();
    int st;
    while (::waitpid(mid, &st, 0) < 0 && errno == EINTR) {
    }
    if (auto r = recv_report(mine.get(), "taking the image's credentials"); !r)
        return Error::from_errno(r.error().code.value(),
                                 "the lazy restart's pager: " + r.error().what());
    auto uffd = open_uffd();
    if (!uffd)
        return uffd.error();
    if (auto s = send_fd(mine.get(), uffd->get()); !s) // MSG_NOSIGNAL
        return s.error();
    return mine; // our copy of the userfaultfd closes here
}

Result<void> hand_over(int link, std::span<const std::uint32_t> vmas) {
    const NoSigpipe quiet; // a pager gone is an error, not a signal
    const auto count = static_cast<std::uint32_t>(vmas.size());
    if (auto w = write_value(link, count); !w)
        return Error::from_errno(w.error().code.value(), "naming the mappings to the lazy "
                                                         "restart's pager: " +
                                                             w.error().what());
    if (auto w = write_all(link, std::as_bytes(vmas)); !w)
        return Error::from_errno(w.error().code.value(), "naming the mappings to the lazy "
                                                         "restart's pager: " +
                                                             w.error().what());
    return recv_report(link, "registering the mappings");
}

} // namespace ghost::user::lazy
