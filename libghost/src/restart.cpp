// SPDX-License-Identifier: LGPL-2.1-or-later
// restart() and duplicate(): a new child process that becomes an image. The
// child is the restore stub (restore_stub.cpp), started with posix_spawn():
// between its vfork and its exec nothing runs but the descriptor moves of
// the file actions, so the caller may have any number of threads holding
// any locks. Everything that allocates, formats or reads /proc happens here,
// in the caller, before the spawn, or in the stub, after its exec.
#include "ghost/process.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ghost/image.hpp"
#include "ghost/kernel_engine.hpp"
#include "sys.hpp"
#include "user/proc.hpp"

extern char** environ;

namespace ghost {

namespace {

namespace fs = std::filesystem;

// Bytes process pid has read so far (kernel reads on its behalf included).
std::uint64_t rchar_of(pid_t pid) {
    std::ifstream io(fmt::format("/proc/{}/io", pid));
    std::string key;
    std::uint64_t v = 0;
    while (io >> key >> v)
        if (key == "rchar:")
            return v;
    return 0;
}

void reap(pid_t child) {
    int status;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
}

// The status pipe also reads end of file when the importer dies: a kernel
// import that fails past its point of no return (page data read after it,
// GHOST_IMPORT_DIRECT, not matching the image's checksum) kills it before
// any descriptor of it changed. A dying task is marked exiting before its
// descriptors close, so at end of file it either runs as the image or
// has begun to exit; a start that ends in SIGKILL is that failure.
Result<void> not_killed_in_import(pid_t child, bool user_engine) {
    siginfo_t si{};
    int flags = WEXITED | WNOWAIT | WNOHANG;
    if (user::exiting(child))
        flags &= ~WNOHANG; // it ends now: see how
    while (::waitid(P_PID, static_cast<id_t>(child), &si, flags) != 0)
        if (errno != EINTR)
            return {};
    if (si.si_pid != child || si.si_code != CLD_KILLED || si.si_status != SIGKILL)
        return {};
    reap(child);
    if (user_engine)
        return Error::from_errno(EBADMSG,
                                 fmt::format("the restored process {} was killed while it was "
                                             "being rebuilt, past the point of no return: the "
                                             "user engine's restorer says why on its standard "
                                             "error (\"ghost: user engine: restoring pid {} "
                                             "failed after the point of no return\")",
                                             child, child));
    return Error::from_errno(EBADMSG,
                             fmt::format("the restored process {} was killed while it was being "
                                         "rebuilt, past the point of no return: the image's page "
                                         "data does not match its checksum (the image is damaged, "
                                         "or it changed during the restart; the kernel log says "
                                         "which), or memory ran out",
                                         child));
}

// The stub's report: '+' as it starts, then nothing (success: the image
// replaced it and the close-on-exec descriptor closed) or "errno reason".
Result<void> await_restored(pid_t child, int status_fd, std::uint64_t total,
                            const ProgressFn& progress, const std::string& stub,
                            const std::function<void(unsigned)>& image_done, bool user_engine) {
    std::string report;
    unsigned images = 0;
    const std::uint64_t base = progress ? rchar_of(child) : 0;
    for (;;) {
        pollfd p{status_fd, POLLIN, 0};
        const int r = ::poll(&p, 1, progress ? 100 : -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            const std::uint64_t now = rchar_of(child);
            progress({now > base ? now - base : 0, total});
            continue;
        }
        char buf[512];
        const ssize_t n = ::read(status_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            // A sequence's images taken in: dots right after the '+'.
            if (buf[i] == '.' && report == "+") {
                if (image_done)
                    image_done(++images);
                continue;
            }
            report += buf[i];
        }
    }
    if (report.empty()) {
        int status = 0;
        while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
        }
        return Error::from_errno(
            ENOEXEC,
            fmt::format("the restore stub {} did not start ({}): "
                        "is it this libghost's?",
                        stub,
                        WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                          : fmt::format("signal {}", WTERMSIG(status))));
    }
    if (report == "+") {
        if (auto alive = not_killed_in_import(child, user_engine); !alive)
            return alive.error();
        if (progress)
            progress({total, total});
        return {};
    }
    reap(child);
    return parse_failure_report(report.substr(1));
}

// Returns once child is stopped (it stays reportable to waitpid: WNOWAIT),
// or fails if it died first or did not stop within 10 s (it is killed).
Result<void> await_stopped(pid_t child) {
    using namespace std::chrono_literals;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    for (;;) {
        siginfo_t si{};
        if (::waitid(P_PID, static_cast<id_t>(child), &si,
                     WSTOPPED | WEXITED | WNOWAIT | WNOHANG) != 0) {
            if (errno == EINTR)
                continue;
            return Error::from_errno(errno, fmt::format("waiting for the restored process {} "
                                                        "to stop: {}",
                                                        child, errno_text(errno)));
        }
        if (si.si_pid == child && (si.si_code == CLD_STOPPED || si.si_code == CLD_TRAPPED))
            return {};
        if (si.si_pid == child) {
            reap(child);
            return Error::from_errno(ECHILD, fmt::format("the restored process {} ended before "
                                                         "it stopped (status {})",
                                                         child, si.si_status));
        }
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(child, SIGKILL);
            reap(child);
            return Error::from_errno(ETIMEDOUT, fmt::format("the restored process {} did not "
                                                            "stop within 10 s (it is killed)",
                                                            child));
        }
        ::usleep(1000);
    }
}

struct Pipe {
    UniqueFd rd, wr;
    static Result<Pipe> make() {
        int p[2];
        if (::pipe2(p, O_CLOEXEC) != 0)
            return Error::from_errno(errno, fmt::format("pipe: {}", errno_text(errno)));
        return Pipe{move_fd_high(UniqueFd(p[0])), move_fd_high(UniqueFd(p[1]))};
    }
};

Result<UniqueFd> dup_high(int fd, std::string_view what) {
    UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, high_fd_base));
    if (!copy)
        return Error::from_errno(
            errno, fmt::format("cannot use fd {} ({}): {}", fd, what, errno_text(errno)));
    return copy;
}

// The calling thread's capability sets as "permitted,effective,inheritable"
// (hex): the stub limits itself to them, since execve() gives a root stub
// all capabilities again, whatever its caller had dropped.
std::string caller_caps() {
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[2]{};
    if (::syscall(SYS_capget, &h, d) != 0)
        return {};
    auto both = [](std::uint32_t lo, std::uint32_t hi) {
        return (static_cast<std::uint64_t>(hi) << 32) | lo;
    };
    return fmt::format("{:x},{:x},{:x}", both(d[0].permitted, d[1].permitted),
                       both(d[0].effective, d[1].effective),
                       both(d[0].inheritable, d[1].inheritable));
}

// What the stub is given: the image (its own number, above the image's),
// where to report, and the descriptors the image inherits.
struct StubLaunch {
    std::string stub;
    const Engine* engine = nullptr;
    int image_fd = -1;
    bool stopped = false;
    std::vector<std::pair<int, UniqueFd>> inherited; // {image fd, ours}
    bool sequence = false;
    bool lazy = false;
    std::optional<Owner> owner = std::nullopt;
};

// posix_spawn()s the stub; returns its pid and the read end of its status
// pipe. Every string and action is made before the spawn.
Result<std::pair<pid_t, UniqueFd>> spawn_stub(StubLaunch& l) {
    auto sp = Pipe::make();
    if (!sp)
        return sp.error();
    auto image = dup_high(l.image_fd, "the image");
    if (!image)
        return image.error();

    std::vector<std::string> args = {l.stub,
                                     "--engine",
                                     std::string(l.engine->name()),
                                     "--fd",
                                     std::to_string(image->get()),
                                     "--status-fd",
                                     std::to_string(sp->wr.get())};
    if (const auto* k = dynamic_cast<const KernelEngine*>(l.engine)) {
        args.push_back("--device");
        args.push_back(k->device());
    }
    if (l.stopped)
        args.push_back("--stopped");
    if (l.sequence)
        args.push_back("--sequence");
    if (l.lazy)
        args.push_back("--lazy");
    if (l.owner) {
        // UID:GID[:G1,G2...]
        std::string spec = fmt::format("{}:{}:", l.owner->uid, l.owner->gid);
        for (std::size_t i = 0; i < l.owner->groups.size(); i++)
            spec += fmt::format("{}{}", i ? "," : "", l.owner->groups[i]);
        args.push_back("--owner");
        args.push_back(std::move(spec));
    }
    if (auto caps = caller_caps(); !caps.empty()) {
        args.push_back("--caps");
        args.push_back(std::move(caps));
    }
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    if (int e = posix_spawn_file_actions_init(&fa); e)
        return Error::from_errno(e,
                                 fmt::format("posix_spawn_file_actions_init: {}", errno_text(e)));
    struct Actions {
        posix_spawn_file_actions_t* fa;
        ~Actions() { posix_spawn_file_actions_destroy(fa); }
    } fa_guard{&fa};
    if (int e = posix_spawnattr_init(&at); e)
        return Error::from_errno(e, fmt::format("posix_spawnattr_init: {}", errno_text(e)));
    struct Attrs {
        posix_spawnattr_t* at;
        ~Attrs() { posix_spawnattr_destroy(at); }
    } at_guard{&at};

    int err = 0;
    // The inherited descriptors at the image's numbers (ours are all at
    // high_fd_base or above, so none overwrites another); the image and
    // status descriptors dup2'ed onto themselves, which clears their
    // close-on-exec flag in the child only.
    for (const auto& [num, fd] : l.inherited)
        if (!err)
            err = posix_spawn_file_actions_adddup2(&fa, fd.get(), num);
    if (!err)
        err = posix_spawn_file_actions_adddup2(&fa, image->get(), image->get());
    if (!err)
        err = posix_spawn_file_actions_adddup2(&fa, sp->wr.get(), sp->wr.get());
    // The stub starts with default signal actions and nothing blocked,
    // whatever the calling thread has; the image sets its own.
    sigset_t all, none;
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    sigemptyset(&none);
    if (!err)
        err = posix_spawnattr_setsigdefault(&at, &all);
    if (!err)
        err = posix_spawnattr_setsigmask(&at, &none);
    if (!err)
        err = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    if (err)
        return Error::from_errno(
            err, fmt::format("preparing the restore stub's start: {}", errno_text(err)));

    pid_t child = -1;
    err = ::posix_spawn(&child, l.stub.c_str(), &fa, &at, argv.data(), environ);
    if (err)
        return Error::from_errno(
            err, fmt::format("cannot run the restore stub {}: {}", l.stub, errno_text(err)));
    return std::pair{child, std::move(sp->rd)};
}

// The caller's descriptors of o.inherit_fds, copied above the numbers an
// image uses (so that moving one into place never overwrites another).
Result<std::vector<std::pair<int, UniqueFd>>> inherit_sources(const RestartOptions& o) {
    std::vector<std::pair<int, UniqueFd>> out;
    for (const auto& [image_fd, from] : o.inherit_fds) {
        if (image_fd < 0 || from < 0)
            return Error::from_errno(EINVAL, fmt::format("--inherit-fd {}:{}: descriptor numbers "
                                                         "are not negative",
                                                         image_fd, from));
        UniqueFd copy(::fcntl(from, F_DUPFD_CLOEXEC, high_fd_base));
        if (!copy)
            return Error::from_errno(errno, fmt::format("cannot give fd {} to the image's fd {}: "
                                                        "{}",
                                                        from, image_fd, errno_text(errno)));
        out.emplace_back(image_fd, std::move(copy));
    }
    return out;
}

Result<pid_t> run_stub(StubLaunch& l, std::uint64_t total, const ProgressFn& progress,
                       const std::function<void(pid_t)>& spawned = {},
                       const std::function<void(unsigned)>& image_done = {}) {
    auto started = spawn_stub(l);
    if (!started)
        return started.error();
    l.inherited.clear(); // the child has its own now
    const pid_t child = started->first;
    if (spawned)
        spawned(child);
    const bool user = l.engine && l.engine->name() == "user";
    if (auto r =
            await_restored(child, started->second.get(), total, progress, l.stub, image_done, user);
        !r)
        return r.error();
    if (l.stopped)
        if (auto r = await_stopped(child); !r)
            return r.error();
    return child;
}

// An executable file, and for a privileged caller (root runs it, and it
// restores images that came from elsewhere) one only root can have put
// there: owned by root, writable by nobody else, in a directory likewise.
// A build tree's stub found by an installed root program would otherwise
// run whatever its owner built.
bool executable(const std::string& p) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(p.c_str(), X_OK) != 0)
        return false;
    if (::geteuid() != 0)
        return true;
    const auto root_only = [](const struct stat& s) {
        return s.st_uid == 0 && !(s.st_mode & (S_IWGRP | S_IWOTH));
    };
    struct stat dir;
    const std::string parent = fs::path(p).parent_path().string();
    return root_only(st) && ::stat(parent.empty() ? "." : parent.c_str(), &dir) == 0 &&
           (root_only(dir) || (dir.st_uid == 0 && (dir.st_mode & S_ISVTX)));
}

// The directory of the libghost this code runs in (of the program, where
// libghost is linked statically).
std::string library_dir() {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&restore_stub_path), &info) == 0 || !info.dli_fname)
        return {};
    std::error_code ec;
    auto p = fs::canonical(info.dli_fname, ec);
    return ec ? std::string() : p.parent_path().string();
}

} // namespace

Result<std::string> restore_stub_path(std::string_view override) {
    std::vector<std::string> tried;
    auto pick = [&](const std::string& p) {
        tried.push_back(p);
        return executable(p);
    };
    const std::string_view rule =
        ::geteuid() == 0 ? " (run by root, it must be root's and writable by nobody else, in a "
                           "directory likewise)"
                         : "";
    if (!override.empty()) {
        if (pick(std::string(override)))
            return std::string(override);
        return Error::from_errno(ENOENT, fmt::format("the restore stub {} is not an executable "
                                                     "file{}",
                                                     override, rule));
    }
    if (const char* env = std::getenv("GHOST_RESTORE_STUB"); env && *env) {
        if (pick(env))
            return std::string(env);
        return Error::from_errno(ENOENT, fmt::format("GHOST_RESTORE_STUB={} is not an executable "
                                                     "file{}",
                                                     env, rule));
    }
    std::vector<std::string> candidates;
    const std::string lib = library_dir();
    std::error_code ec;
    // In the build tree: this code in libghost.so there, or linked into a
    // program there (ghostctl links libghost statically).
    const auto is_dir = [&](const char* d) {
        std::error_code e;
        return !lib.empty() && fs::equivalent(lib, d, e) && !e;
    };
    const bool build_tree = is_dir(GHOST_BUILD_LIBDIR) || is_dir(GHOST_BUILD_BINDIR);
    if (build_tree)
        candidates.push_back(GHOST_BUILD_STUB);
    else if (!lib.empty())
        candidates.push_back((fs::path(lib) / GHOST_STUB_FROM_LIBDIR).lexically_normal());
    candidates.push_back(GHOST_INSTALLED_STUB);
    if (!build_tree)
        candidates.push_back(GHOST_BUILD_STUB);
    auto exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec)
        candidates.push_back(exe.parent_path() / "ghost-restore-stub");
    for (const auto& c : candidates)
        if (pick(c))
            return c;
    std::string list;
    for (const auto& t : tried)
        list += (list.empty() ? "" : ", ") + t;
    return Error::from_errno(ENOENT, fmt::format("the restore stub ghost-restore-stub was not "
                                                 "found (tried {}; set GHOST_RESTORE_STUB)",
                                                 list));
}

Result<pid_t> restart(Engine& engine, int in, const RestartOptions& o) {
    auto stub = restore_stub_path(o.stub);
    if (!stub)
        return stub.error();
    auto given = inherit_sources(o);
    if (!given)
        return given.error();
    std::uint64_t total = 0;
    struct stat st;
    if (::fstat(in, &st) == 0 && S_ISREG(st.st_mode)) {
        const off_t at = ::lseek(in, 0, SEEK_CUR);
        total = static_cast<std::uint64_t>(st.st_size - (at > 0 ? at : 0));
    }
    StubLaunch l{std::move(*stub),  &engine,    in,     o.stopped,
                 std::move(*given), o.sequence, o.lazy, o.owner};
    return run_stub(l, total, o.progress, o.spawned, o.image_done);
}

Result<pid_t> duplicate(Engine& engine, pid_t pid, const DuplicateOptions& o) {
    auto stub = restore_stub_path(o.stub);
    if (!stub)
        return stub.error();
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!pidfd)
        return Error::from_errno(errno, errno == ESRCH ? fmt::format("no process {}", pid)
                                                       : fmt::format("cannot open process {}: {}",
                                                                     pid, errno_text(errno)));
    pidfd = move_fd_high(std::move(pidfd));
    // The image goes into a memory file, which the stub reads as a file.
    UniqueFd mem(::memfd_create("ghost-duplicate", MFD_CLOEXEC));
    if (!mem)
        return Error::from_errno(errno, fmt::format("memfd_create: {}", errno_text(errno)));
    mem = move_fd_high(std::move(mem));
    std::uint64_t bytes = 0;
    {
        auto g = engine.create(Backend::file(mem.get()));
        if (!g)
            return g.error();
        auto s = (*g)->export_process(pid, Fate::Run);
        if (!s)
            return s.error();
        bytes = s->bytes;
    }
    if (bytes == 0)
        return Error::from_errno(EIO, fmt::format("the export of process {} is empty", pid));

    // The copy shares the original's pipes and terminals: take them from it
    // (same permission as the export) to hand them to the copy.
    StubLaunch l{std::move(*stub), &engine, mem.get(), o.stopped, {}};
    {
        void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, mem.get(), 0);
        if (p == MAP_FAILED)
            return Error::from_errno(errno,
                                     fmt::format("mapping the image: {}", errno_text(errno)));
        const ImageView view(p, bytes);
        // Only its FILE records: the stub reads and checks the whole image.
        image::ReadOptions ro;
        ro.skip_pages = true;
        auto img = image::read(view.bytes(), ro);
        if (!img)
            return img.error();
        for (const auto& f : img->files) {
            if (f.rec.kind != GHOST_FILE_INHERIT)
                continue;
            UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.get(), f.rec.fd, 0)));
            if (!fd)
                return Error::from_errno(errno,
                                         fmt::format("cannot take fd {} ({}) of process {} for "
                                                     "the copy: {}",
                                                     f.rec.fd, f.path, pid, errno_text(errno)));
            l.inherited.emplace_back(f.rec.fd, move_fd_high(std::move(fd)));
        }
    }
    if (::lseek(mem.get(), 0, SEEK_SET) != 0)
        return Error::from_errno(errno, fmt::format("rewinding the image: {}", errno_text(errno)));
    return run_stub(l, 0, {});
}

} // namespace ghost
