// SPDX-License-Identifier: GPL-2.0
// checkpoint, restart, dup: moving whole processes in and out of images.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "ghost/fd.hpp"
#include "ghost/process.hpp"
#include "progress.hpp"

namespace ghostctl {

namespace {

std::string errno_text(int err) {
    return std::error_code(err, std::system_category()).message();
}

// The output file is written under a temporary name beside it and renamed
// into place only once complete, so a failed checkpoint leaves no partial
// image and never replaces a good one.
class PendingFile {
  public:
    static ghost::Result<PendingFile> create(const std::string& path) {
        const auto parent = std::filesystem::path(path).parent_path();
        std::string tmpl =
            (parent.empty() ? std::filesystem::path(".") : parent) /
            fmt::format(".{}.XXXXXX", std::filesystem::path(path).filename().string());
        ghost::UniqueFd fd(::mkostemp(tmpl.data(), O_CLOEXEC)); // mode 0600: images hold secrets
        if (!fd)
            return ghost::Error::from_errno(
                errno, fmt::format("cannot create {} in {}: {}", path,
                                   parent.empty() ? "." : parent.string(), errno_text(errno)));
        return PendingFile(std::move(fd), tmpl, path);
    }
    PendingFile(PendingFile&&) = default;
    ~PendingFile() {
        if (!committed_ && !tmp_.empty())
            ::unlink(tmp_.c_str());
    }
    int fd() const { return fd_.get(); }

    ghost::Result<void> commit() {
        if (::fsync(fd_.get()) != 0)
            return ghost::Error::from_errno(
                errno, fmt::format("cannot write {}: {}", path_, errno_text(errno)));
        if (::rename(tmp_.c_str(), path_.c_str()) != 0)
            return ghost::Error::from_errno(
                errno, fmt::format("cannot rename {} to {}: {}", tmp_, path_, errno_text(errno)));
        committed_ = true;
        return {};
    }

  private:
    PendingFile(ghost::UniqueFd fd, std::string tmp, std::string path)
        : fd_(std::move(fd)), tmp_(std::move(tmp)), path_(std::move(path)) {}
    ghost::UniqueFd fd_;
    std::string tmp_, path_;
    bool committed_ = false;
};

// "N" or "N:M": the image's fd N from ghostctl's fd M (N when M is absent).
ghost::Result<std::pair<int, int>> parse_inherit_fd(const std::string& spec) {
    auto number = [](std::string_view s, int& out) {
        const auto n = parse_int(s);
        out = n.value_or(-1);
        return n && *n >= 0;
    };
    const std::string_view sv(spec);
    const auto colon = sv.find(':');
    int n = -1, m = -1;
    const bool ok = colon == std::string_view::npos
                        ? number(sv, n) && number(sv, m)
                        : number(sv.substr(0, colon), n) && number(sv.substr(colon + 1), m);
    if (!ok)
        return ghost::Error::from_errno(
            EINVAL,
            fmt::format("--inherit-fd takes N or N:M (descriptor numbers), not '{}'", spec));
    return std::pair{n, m};
}

// Before a Kill fate is carried out: which descriptors a restart must be
// given (pipes, FIFOs, terminals), read back from the committed image.
void name_inherited(const std::string& path) {
    ghost::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd)
        return;
    auto src = ghost::image_source(fd.get());
    if (!src)
        return;
    // Only the FILE records are wanted: the page data is skipped, not read.
    ghost::image::ReadOptions ro;
    ro.skip_pages = true;
    auto img = ghost::image::read(**src, ro);
    if (!img)
        return;
    std::string list;
    for (const auto& f : img->files)
        if (f.rec.kind == GHOST_FILE_INHERIT)
            list += fmt::format("{}fd {} ({})", list.empty() ? "" : ", ", f.rec.fd, f.path);
    if (!list.empty())
        fmt::print(stderr,
                   "ghostctl: a restart needs these descriptors open, as ghostctl's own of "
                   "the same numbers or given with --inherit-fd N:M: {}\n",
                   list);
}

int exit_status_of(int status) {
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return exit_failure;
}

} // namespace

int cmd_checkpoint(const Globals& g, const CheckpointArgs& a) {
    if (!a.server.empty())
        return cmd_checkpoint_server(g, a);
    if (a.pids.size() != 1 || a.output.empty()) {
        fail("checkpoint to a file takes one PID and -o FILE (several PIDs go to a "
             "checkpoint server: --server HOST)");
        return exit_usage;
    }
    const pid_t pid = a.pids[0];
    auto engine = open_engine(g);
    if (!engine)
        return exit_failure;
    ::signal(SIGPIPE, SIG_IGN); // a closed output is an error to report, not a death

    ghost::CheckpointOptions o;
    o.fate = a.leave_running   ? ghost::Fate::Run
             : a.leave_stopped ? ghost::Fate::Stop
                               : ghost::Fate::Kill;
    o.compress = a.compress;
    o.level = a.level;
    o.parent = a.parent;
    ProgressBar bar(fmt::format("checkpoint {}", pid));
    o.progress = bar.callback();

    const bool to_stdout = a.output == "-";
    if (to_stdout && a.json) {
        fail("--json prints on standard output, where -o - sends the image: give -o FILE");
        return exit_usage;
    }
    std::optional<PendingFile> file;
    if (!to_stdout) {
        auto f = PendingFile::create(a.output);
        if (!f)
            return fail(f.error());
        file.emplace(std::move(*f));
        o.commit = [&]() -> ghost::Result<void> {
            if (auto c = file->commit(); !c)
                return c;
            name_inherited(a.output);
            return {};
        };
    } else if (::isatty(STDOUT_FILENO)) {
        return fail("refusing to write an image to a terminal (use -o FILE or a pipe)");
    }
    auto stats = ghost::checkpoint(*engine, pid, to_stdout ? STDOUT_FILENO : file->fd(), o);
    bar.finish();
    if (!stats)
        return fail(stats.error());
    const char* fate = o.fate == ghost::Fate::Kill   ? "killed"
                       : o.fate == ghost::Fate::Stop ? "stopped"
                                                     : "running";
    if (a.json)
        fmt::print("{}\n",
                   nlohmann::json{{"pid", pid},
                                  {"image", a.output},
                                  {"bytes", stats->bytes},
                                  {"frozen_ms", static_cast<double>(stats->frozen_ns) / 1e6},
                                  {"copy_on_write", stats->copy_on_write},
                                  {"process", fate}}
                       .dump(2));
    else if (!to_stdout && ::isatty(STDERR_FILENO))
        fmt::print(stderr, "ghostctl: process {} checkpointed to {} ({}, frozen {:.1f} ms){}\n",
                   pid, a.output, human_bytes(stats->bytes),
                   static_cast<double>(stats->frozen_ns) / 1e6,
                   o.fate == ghost::Fate::Kill   ? ", process killed"
                   : o.fate == ghost::Fate::Stop ? ", process left stopped"
                                                 : "");
    return exit_ok;
}

int cmd_restart(const Globals& g, const RestartArgs& a) {
    if (!a.server.empty()) {
        if (a.lazy)
            return usage_fail("--lazy restarts a local image file, not one of a checkpoint "
                              "server");
        return cmd_restart_server(g, a);
    }
    if (a.lazy && a.input == "-")
        return usage_fail("--lazy reads the image in place: give a file, not '-'");
    ghost::RestartOptions o;
    o.lazy = a.lazy;
    for (const auto& spec : a.inherit_fds) {
        auto p = parse_inherit_fd(spec);
        if (!p)
            return fail(p.error());
        o.inherit_fds.push_back(*p);
    }
    Globals eg = g;
    if (a.lazy && eg.engine == "auto")
        eg.engine = "user"; // the engine that restarts lazily
    auto engine = open_engine(eg);
    if (!engine)
        return exit_failure;
    ghost::UniqueFd owned;
    int in = STDIN_FILENO;
    if (a.input != "-") {
        owned.reset(::open(a.input.c_str(), O_RDONLY | O_CLOEXEC));
        if (!owned)
            return fail(fmt::format("cannot open {}: {}", a.input, errno_text(errno)));
        // Off the low numbers: the image may want inherited descriptors there.
        const int hi = ::fcntl(owned.get(), F_DUPFD_CLOEXEC, 512);
        if (hi >= 0)
            owned.reset(hi);
        in = owned.get();
    }
    ProgressBar bar("restart");
    o.progress = bar.callback();
    auto pid = ghost::restart(*engine, in, o);
    bar.finish();
    if (!pid)
        return fail(pid.error());
    owned.reset();
    if (a.detach) {
        fmt::print("{}\n", *pid);
        return exit_ok;
    }
    int status;
    while (::waitpid(*pid, &status, 0) < 0) {
        if (errno != EINTR)
            return fail(fmt::format("waiting for process {}: {}", *pid, errno_text(errno)));
    }
    return exit_status_of(status);
}

int cmd_dup(const Globals& g, pid_t pid) {
    auto engine = open_engine(g);
    if (!engine)
        return exit_failure;
    auto copy = ghost::duplicate(*engine, pid);
    if (!copy)
        return fail(copy.error());
    fmt::print("{}\n", *copy);
    return exit_ok;
}

} // namespace ghostctl
