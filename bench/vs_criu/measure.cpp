// SPDX-License-Identifier: GPL-2.0
// ghost_bench_vs_criu's measurement of one run of one tool: checkpoint, then
// restart until the restored workload answers, then its memory checked off
// the clock; and a --leave-running checkpoint with the time it held the
// process still. Also the ioctl and stub helpers, and CRIU's image size and
// frozen time.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <span>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../criu_stats.hpp"
#include "ghost/c/export_target.h"
#include "ghost/c/restore_self.h"
#include "vs_criu.hpp"

namespace bench::vs_criu {

namespace {

// Parses "frozen 12.345 ms" out of ghost-export's report.
double frozen_from(const std::string& s) {
    const auto at = s.find("frozen ");
    return at == std::string::npos ? -1 : std::atof(s.c_str() + at + 7);
}

// "frozen_ms" of ghostctl checkpoint --json; -1 when absent.
double frozen_from_json(const std::string& out) {
    const auto j = nlohmann::json::parse(out, nullptr, false);
    return j.is_object() && j.contains("frozen_ms") && j["frozen_ms"].is_number()
               ? j["frozen_ms"].get<double>()
               : -1;
}

// CRIU's own account of how long a dump held the process: DIR/stats-dump.
double criu_frozen_ms(const fs::path& dir, Failure& f) {
    const std::string raw = slurp(dir / "stats-dump");
    bench::CriuDumpStats st;
    std::string why;
    if (!bench::parse_criu_stats_dump(std::as_bytes(std::span(raw.data(), raw.size())), st, why)) {
        f.what = fmt::format("{}: {}", (dir / "stats-dump").string(), why);
        return -1;
    }
    return st.frozen_ms;
}

// A ghost object on a file (fd >= 0) or, with fd -1, a memory buffer.
int make_ghost(int fd) {
    ghost::UniqueFd dev(open("/dev/ghost", O_RDWR | O_CLOEXEC));
    ghost_create c{};
    c.size = sizeof(c);
    c.flags = GHOST_CREATE_CLOEXEC;
    ghost::UniqueFd g(dev ? ioctl(dev.get(), GHOST_IOC_CREATE, &c) : -1);
    ghost_plug p{};
    p.size = sizeof(p);
    p.type = fd >= 0 ? GHOST_RES_FILE : GHOST_RES_MEMORY;
    p.fd = fd;
    if (!g || ioctl(g.get(), GHOST_IOC_PLUG, &p) != 0)
        return -1;
    return g.release();
}

bool ioctl_export(int g, pid_t pid, Sample& s, Failure& f) {
    ghost_export e{};
    e.size = sizeof(e);
    e.flags = GHOST_EXPORT_KILL;
    const char* step = "";
    if (ghost_export_target_open(&e, pid, &step) != 0) {
        f.what = fmt::format("{}: {}", step, strerror(errno));
        return false;
    }
    const ghost::UniqueFd pidfd(e.pidfd), mem(e.mem_fd);
    if (ioctl(g, GHOST_IOC_EXPORT, &e) != 0) {
        f.what = fmt::format("GHOST_IOC_EXPORT: {} ({})", strerror(errno), e.reason);
        return false;
    }
    s.frozen_ms = static_cast<double>(e.frozen_ns) / 1e6;
    s.image_bytes = e.bytes;
    return true;
}

// A forked child becomes the image in ghost @g, or in the file @image when
// @g is -1; returns the child's pid.
pid_t ioctl_import(int g, const fs::path& image, const fs::path& err) {
    const pid_t pid = fork();
    if (pid != 0)
        return pid;
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (e >= 0)
        dup2(e, 2);
    if (g < 0) {
        const int in = open(image.c_str(), O_RDONLY | O_CLOEXEC);
        g = in >= 0 ? make_ghost(in) : -1;
    }
    if (g < 0) {
        fmt::print(stderr, "cannot set up a ghost: {}\n", strerror(errno));
        _exit(100);
    }
    ghost_import im;
    ghost_restore_self(g, &im);
    fmt::print(stderr, "GHOST_IOC_IMPORT: {}\n", im.reason[0] ? im.reason : strerror(errno));
    _exit(100);
}

pid_t spawn_stub(const std::string& stub, const fs::path& image, const fs::path& err) {
    const pid_t pid = fork();
    if (pid != 0)
        return pid;
    const int in = open("/dev/null", O_RDWR);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || e < 0)
        _exit(126);
    dup2(in, 0);
    dup2(in, 1);
    dup2(e, 2);
    execlp(stub.c_str(), stub.c_str(), image.c_str(), static_cast<char*>(nullptr));
    _exit(127);
}

std::uint64_t criu_image_bytes(const fs::path& dir) {
    std::uint64_t n = 0;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().extension() == ".img")
            n += e.file_size();
    return n;
}

// ghostctl's --engine for the tools that run it.
const char* engine_of(Tool t) {
    return t == Tool::User || t == Tool::UserLazy ? "user" : "kernel";
}

// A run's fresh workload, in its directory d (with d/criu for CRIU's images).
std::optional<pid_t> prepare_run(Tool tool, size_t mib, const Programs& pr, const RunDir& d,
                                 Failure& f) {
    if (tool == Tool::Criu)
        fs::create_directories(d / "criu");
    return start_workload(pr, mib, d, f);
}

} // namespace

const char* tool_name(Tool t) {
    switch (t) {
    case Tool::Ghostctl:
        return "ghostctl";
    case Tool::User:
        return "user";
    case Tool::UserLazy:
        return "user-lazy";
    case Tool::Stubs:
        return "stubs";
    case Tool::Ioctl:
        return "ioctl";
    case Tool::IoctlMem:
        return "ioctl-mem";
    case Tool::Criu:
        return "criu";
    }
    return "?";
}

std::optional<Sample> run_once(Tool tool, size_t mib, const Programs& pr, const fs::path& base,
                               Failure& f) {
    RunDir d(base / fmt::format("{}-{}", tool_name(tool), mib));
    const fs::path image = d / "image", criu_dir = d / "criu";
    const auto pid = prepare_run(tool, mib, pr, d, f);
    if (!pid)
        return std::nullopt;
    const std::string spid = std::to_string(*pid);
    Sample s;
    ghost::UniqueFd mem_ghost; // ioctl-mem: the image, in kernel memory

    // --- checkpoint: the process ends up killed, its image on tmpfs.
    const double t0 = now_ms();
    int st = 0;
    switch (tool) {
    case Tool::Ghostctl:
    case Tool::User:
    case Tool::UserLazy:
        st = run(
            {pr.ghostctl, "--engine", engine_of(tool), "checkpoint", spid, "-o", image, "--json"},
            d / "ckpt.out", d / "ckpt.err");
        break;
    case Tool::Stubs:
        st = run({pr.ghost_export, "--kill", spid, image}, d / "ckpt.out", d / "ckpt.err");
        break;
    case Tool::Ioctl: {
        ghost::UniqueFd out(open(image.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        ghost::UniqueFd g(out ? make_ghost(out.get()) : -1);
        if (!g)
            f.what = fmt::format("cannot set up a file ghost: {}", strerror(errno));
        st = g && ioctl_export(g.get(), *pid, s, f) ? 0 : -2;
        break;
    }
    case Tool::IoctlMem:
        mem_ghost.reset(make_ghost(-1));
        if (!mem_ghost)
            f.what = fmt::format("cannot set up a memory ghost: {}", strerror(errno));
        st = mem_ghost && ioctl_export(mem_ghost.get(), *pid, s, f) ? 0 : -2;
        break;
    case Tool::Criu:
        st = run({pr.criu, "dump", "-t", spid, "-D", criu_dir}, d / "ckpt.out", d / "ckpt.err");
        break;
    }
    if (st != 0) {
        if (st != -2)
            f.what = fmt::format("checkpoint: {}: {}{}", status_text(st), slurp(d / "ckpt.err"),
                                 tool == Tool::Criu ? slurp(criu_dir / "dump.log") : "");
        kill_and_reap(*pid);
        return std::nullopt;
    }
    // Reaped on the clock: CRIU restores the same pid, which must be free.
    int wst = 0;
    while (waitpid(*pid, &wst, 0) < 0 && errno == EINTR)
        ;
    const double t1 = now_ms();

    // --- restart, in the background.
    pid_t restored = -1;
    switch (tool) {
    case Tool::Ghostctl:
    case Tool::User:
    case Tool::UserLazy: {
        std::vector<std::string> args = {pr.ghostctl, "--engine", engine_of(tool),
                                         "restart",   image,      "--detach"};
        if (tool == Tool::UserLazy)
            args.push_back("--lazy");
        st = run(args, d / "restart.out", d / "restart.err");
        if (st == 0)
            restored = static_cast<pid_t>(std::atol(slurp(d / "restart.out").c_str()));
        break;
    }
    case Tool::Stubs:
        restored = spawn_stub(pr.ghost_restore, image, d / "restart.err");
        break;
    case Tool::Ioctl:
        restored = ioctl_import(-1, image, d / "restart.err");
        break;
    case Tool::IoctlMem:
        restored = ioctl_import(mem_ghost.get(), image, d / "restart.err");
        break;
    case Tool::Criu:
        st = run({pr.criu, "restore", "-D", criu_dir, "-d"}, d / "restart.out", d / "restart.err");
        if (st == 0)
            restored = *pid;
        break;
    }
    if (st != 0 || restored <= 0) {
        f.what = fmt::format("restart: {}: {}{}", status_text(st), slurp(d / "restart.err"),
                             tool == Tool::Criu ? slurp(criu_dir / "restore.log") : "");
        return std::nullopt;
    }
    if (!wait_restored(restored, d, f))
        return std::nullopt;
    kill(restored, SIGUSR1);
    if (!d.wait_for("alive", 600e3)) {
        f.what = fmt::format("the restored process {} does not answer SIGUSR1", restored);
        kill_and_reap(restored);
        return std::nullopt;
    }
    const double t2 = now_ms();
    if (std::atol(slurp(d / "alive").c_str()) != restored) {
        f.what = fmt::format("the marker is not from process {}: {}", restored, slurp(d / "alive"));
        kill_and_reap(restored);
        return std::nullopt;
    }

    // --- off the clock: the restored memory must be intact.
    const bool verified = d.wait_for("verify", 600e3);
    s.memory_read_ms = now_ms() - t1;
    const std::string verdict = verified ? slurp(d / "verify") : "no answer";
    kill_and_reap(restored);
    if (verdict.rfind("OK ", 0) != 0) {
        f.what = fmt::format("the restored memory is wrong: {}", verdict);
        return std::nullopt;
    }

    s.ckpt_ms = t1 - t0;
    s.restart_ms = t2 - t1;
    s.total_ms = t2 - t0;
    if (tool == Tool::Criu) {
        s.image_bytes = criu_image_bytes(criu_dir);
        if ((s.frozen_ms = criu_frozen_ms(criu_dir, f)) < 0)
            return std::nullopt;
    } else if (tool != Tool::IoctlMem) { // that one has the bytes the export reported
        s.image_bytes = fs::file_size(image);
        if (tool == Tool::Stubs)
            s.frozen_ms = frozen_from(slurp(d / "ckpt.err"));
        else if (tool == Tool::Ghostctl || tool == Tool::User || tool == Tool::UserLazy)
            s.frozen_ms = frozen_from_json(slurp(d / "ckpt.out"));
    }
    return s;
}

// Issue 15's goal 2: a checkpoint that leaves a fresh workload running
// (ghostctl --leave-running, criu dump --leave-running), its time and how
// long the process was held still by the tool's own account (ghostctl's
// "frozen X ms", CRIU's stats-dump). The workload must answer SIGUSR1
// afterwards. Adds to s; false with f.what on failure.
bool leave_running_once(Tool tool, size_t mib, const Programs& pr, const fs::path& base, Sample& s,
                        Failure& f) {
    RunDir d(base / fmt::format("{}-{}-leave-running", tool_name(tool), mib));
    const fs::path image = d / "image", criu_dir = d / "criu";
    const auto pid = prepare_run(tool, mib, pr, d, f);
    if (!pid)
        return false;
    const std::string spid = std::to_string(*pid);
    const double t0 = now_ms();
    const int st = tool == Tool::Criu
                       ? run({pr.criu, "dump", "-t", spid, "-D", criu_dir, "--leave-running"},
                             d / "ckpt.out", d / "ckpt.err")
                       : run({pr.ghostctl, "--engine", engine_of(tool), "checkpoint", spid, "-o",
                              image, "--leave-running", "--json"},
                             d / "ckpt.out", d / "ckpt.err");
    s.lr_export_ms = now_ms() - t0;
    bool ok = st == 0;
    if (!ok)
        f.what = fmt::format("checkpoint --leave-running: {}: {}{}", status_text(st),
                             slurp(d / "ckpt.err"),
                             tool == Tool::Criu ? slurp(criu_dir / "dump.log") : "");
    if (ok) {
        s.lr_frozen_ms = tool == Tool::Criu ? criu_frozen_ms(criu_dir, f)
                                            : frozen_from_json(slurp(d / "ckpt.out"));
        if (s.lr_frozen_ms < 0) {
            if (tool != Tool::Criu)
                f.what = fmt::format("ghostctl --json did not report frozen_ms: {}{}",
                                     slurp(d / "ckpt.out"), slurp(d / "ckpt.err"));
            ok = false;
        }
    }
    if (ok) {
        kill(*pid, SIGUSR1);
        if (!d.wait_for("alive", 600e3)) {
            f.what = fmt::format("process {} does not answer after its --leave-running checkpoint",
                                 *pid);
            ok = false;
        }
    }
    kill_and_reap(*pid);
    return ok;
}

bool has_leave_running(Tool t) {
    return t == Tool::Ghostctl || t == Tool::User || t == Tool::Criu;
}

} // namespace bench::vs_criu
