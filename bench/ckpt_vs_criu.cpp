// SPDX-License-Identifier: GPL-2.0
// Checkpoint + restart time of ghost against CRIU, measured in the same run
// on the same workload. Run in the VM (it needs ghost.ko, criu and root):
//   tests/vm/run --mem 3072 -- ghost_bench_vs_criu --sizes 16,64,256 --repeat 3
//
// One run of one tool: a fresh ghost-ckpt-workload daemon holds SIZE MiB of
// patterned anonymous memory. The clock starts, the tool's checkpoint command
// writes an image to /tmp (tmpfs) and kills the process (the default of both
// `ghostctl checkpoint` and `criu dump`), the tool's restart command brings it
// back in the background, and the clock stops when the restored process is
// alive: sleeping in its wait loop with the workload's name, it answers
// SIGUSR1 by writing a marker. Only then, off the clock, it checks every word
// of its memory; a run whose memory is not intact fails the benchmark.
//
// Tools (--tools, run interleaved so that drift in the machine hits all alike):
//   ghostctl  the kernel engine: `ghostctl --engine kernel checkpoint PID -o IMG`,
//             `ghostctl --engine kernel restart IMG --detach`
//   user      the user-space (ptrace) engine, the same commands with
//             `--engine user`; skipped, with the reason, when this ghostctl
//             cannot open that engine
//   stubs     `ghost-export --kill PID IMG`, `ghost-restore IMG` (backgrounded)
//   ioctl     GHOST_IOC_EXPORT from this process, GHOST_IOC_IMPORT in a forked
//             child: the kernel's share, with no program started
//   ioctl-mem the same through a memory ghost: nothing reaches a file, so not
//             a checkpoint; the floor of the module's own work
//   criu      `criu dump -t PID -D DIR`, `criu restore -D DIR -d`
// The headline ratio is ghostctl (stubs when this ghostctl cannot checkpoint
// yet) over criu; a second table sets both engines beside CRIU with
// bandwidths (image MiB over the mean time). Every number is printed as mean,
// min and median over --repeat runs, with the image sizes and, besides, what
// starting each command costs on its own and what the same bytes cost through
// user space (memcpy, crc32c, xxh64, write(2)/read(2) of tmpfs in page-sized and
// 1 MiB calls), which is where the ghost figures are explained.
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

// XXH64 compiled in, as libghost and ghost.ko compute it (no link needed).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "criu_stats.hpp"
#include "ghost/c/export_target.h"
#include "ghost/c/restore_self.h"
#include "ghost/fd.hpp"

namespace fs = std::filesystem;

namespace {

// What /proc/PID/stat shows for the workload (comm is cut to 15 bytes).
constexpr const char* workload_comm = "ghost-ckpt-work";

double now_ms() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

void sleep_ms(double ms) {
    timespec t{static_cast<time_t>(ms / 1e3), static_cast<long>(std::fmod(ms, 1e3) * 1e6)};
    nanosleep(&t, nullptr);
}

std::string slurp(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

enum class Tool { Ghostctl, User, Stubs, Ioctl, IoctlMem, Criu };

const char* tool_name(Tool t) {
    switch (t) {
    case Tool::Ghostctl:
        return "ghostctl";
    case Tool::User:
        return "user";
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

struct Programs {
    std::string workload, ghostctl, ghost_export, ghost_restore, criu;
};

// PROG from the directory this benchmark lives in (bin/), else from PATH.
std::string find_program(const std::string& name) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path p = self.parent_path() / name;
        if (access(p.c_str(), X_OK) == 0)
            return p;
    }
    return name;
}

// Runs argv with stdin on /dev/null and stdout/stderr into files; returns
// the wait status, or -1 when it could not be started.
int run(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err) {
    const pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        const int in = open("/dev/null", O_RDONLY);
        const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || o < 0 || e < 0)
            _exit(126);
        dup2(in, 0);
        dup2(o, 1);
        dup2(e, 2);
        close(in);
        close(o);
        close(e);
        std::vector<char*> v;
        for (const auto& a : argv)
            v.push_back(const_cast<char*>(a.c_str()));
        v.push_back(nullptr);
        execvp(v[0], v.data());
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return status;
}

std::string status_text(int status) {
    if (status < 0)
        return "could not be started";
    if (WIFEXITED(status))
        return fmt::format("exit status {}", WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return fmt::format("killed by signal {}", WTERMSIG(status));
    return fmt::format("wait status {:#x}", status);
}

// One run's failure: what went wrong, with the command's own words.
struct Failure {
    std::string what;
};

struct Sample {
    double ckpt_ms = 0, restart_ms = 0, total_ms = 0;
    std::uint64_t image_bytes = 0;
    double frozen_ms = -1; // as the tool reports it; -1 when it does not say
    // A second checkpoint of a fresh workload that leaves it running
    // (ghostctl/user/criu only; -1 for the others): the command's time and
    // how long the process was held still.
    double lr_export_ms = -1, lr_frozen_ms = -1;
};

// The directory of one run, and the workload's markers in it.
class RunDir {
  public:
    explicit RunDir(fs::path dir) : dir_(std::move(dir)) {
        fs::remove_all(dir_);
        fs::create_directories(dir_);
        ifd_.reset(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
        if (ifd_)
            inotify_add_watch(ifd_.get(), dir_.c_str(), IN_MOVED_TO);
    }
    ~RunDir() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    const fs::path& path() const { return dir_; }
    fs::path operator/(const char* name) const { return dir_ / name; }

    // Waits until the workload renamed NAME into place (it writes a
    // temporary file and renames it, so the name appears complete).
    bool wait_for(const char* name, double timeout_ms) const {
        const double deadline = now_ms() + timeout_ms;
        const fs::path p = dir_ / name;
        for (;;) {
            if (access(p.c_str(), F_OK) == 0)
                return true;
            const double left = deadline - now_ms();
            if (left <= 0)
                return false;
            if (ifd_) {
                pollfd pfd{ifd_.get(), POLLIN, 0};
                poll(&pfd, 1, static_cast<int>(std::min(left, 1000.0)) + 1);
                char buf[4096];
                while (read(ifd_.get(), buf, sizeof(buf)) > 0)
                    ;
            } else {
                sleep_ms(1);
            }
        }
    }

  private:
    fs::path dir_;
    ghost::UniqueFd ifd_;
};

// Starts the daemon; returns its pid once its memory is filled.
std::optional<pid_t> start_workload(const Programs& pr, size_t mib, const RunDir& d, Failure& f) {
    const int st = run({pr.workload, "--mib", std::to_string(mib), "--dir", d.path()},
                       d / "workload.out", d / "workload.err");
    if (st != 0) {
        f.what = fmt::format("{}: {}: {}", pr.workload, status_text(st), slurp(d / "workload.err"));
        return std::nullopt;
    }
    return static_cast<pid_t>(std::atol(slurp(d / "pid").c_str()));
}

// Reads "(comm) S" from /proc/PID/stat.
bool proc_comm_state(pid_t pid, std::string& comm, char& state) {
    const std::string s = slurp(fmt::format("/proc/{}/stat", pid));
    const auto l = s.find('('), r = s.rfind(')');
    if (l == std::string::npos || r == std::string::npos || r + 2 >= s.size())
        return false;
    comm = s.substr(l + 1, r - l - 1);
    state = s[r + 2];
    return true;
}

// Waits until PID is the workload again and sleeps in its wait loop, so a
// signal now reaches the workload's handler: ghost's import resets pending
// signals, so one sent during the restore would be lost. PID is our child
// (directly or, through PR_SET_CHILD_SUBREAPER, once the restart command
// left), so its death is seen here too.
bool wait_restored(pid_t pid, const RunDir& d, Failure& f) {
    const double deadline = now_ms() + 600e3;
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            f.what = fmt::format("the restored process {} died ({}): {}", pid, status_text(status),
                                 slurp(d / "restart.err"));
            return false;
        }
        std::string comm;
        char state = 0;
        if (proc_comm_state(pid, comm, state) && comm == workload_comm && state == 'S')
            return true;
        if (now_ms() > deadline) {
            f.what = fmt::format("process {} is not the running workload after 600 s", pid);
            return false;
        }
        sleep_ms(1);
    }
}

void kill_and_reap(pid_t pid) {
    kill(pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR)
        ;
}

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
    return t == Tool::User ? "user" : "kernel";
}

// A run's fresh workload, in its directory d (with d/criu for CRIU's images).
std::optional<pid_t> prepare_run(Tool tool, size_t mib, const Programs& pr, const RunDir& d,
                                 Failure& f) {
    if (tool == Tool::Criu)
        fs::create_directories(d / "criu");
    return start_workload(pr, mib, d, f);
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
        st = run({pr.ghostctl, "--engine", engine_of(tool), "restart", image, "--detach"},
                 d / "restart.out", d / "restart.err");
        if (st == 0)
            restored = static_cast<pid_t>(std::atol(slurp(d / "restart.out").c_str()));
        break;
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
        else if (tool == Tool::Ghostctl || tool == Tool::User)
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

struct Stat {
    double mean = 0, min = 0, median = 0;
};

Stat stat_of(std::vector<double> v) {
    Stat s;
    if (v.empty())
        return s;
    std::sort(v.begin(), v.end());
    for (double x : v)
        s.mean += x;
    s.mean /= static_cast<double>(v.size());
    s.min = v.front();
    const size_t n = v.size();
    s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return s;
}

struct Series {
    std::vector<Sample> samples;
    Stat get(double Sample::*m) const {
        std::vector<double> v;
        for (const auto& s : samples)
            v.push_back(s.*m);
        return stat_of(v);
    }
};

std::string ms3(const Stat& s) {
    return fmt::format("{:.0f} / {:.0f} / {:.0f}", s.mean, s.min, s.median);
}

double mib_of(std::uint64_t bytes) {
    return static_cast<double>(bytes) / (1 << 20);
}

// Median time to start a command that does nothing (--version, --help).
double startup_ms(const std::vector<std::string>& argv, const fs::path& dir) {
    std::vector<double> v;
    for (int i = 0; i < 5; i++) {
        const double t = now_ms();
        if (run(argv, dir / "startup.out", dir / "startup.err") != 0)
            return -1;
        v.push_back(now_ms() - t);
    }
    return stat_of(v).median;
}

// The subcommand's own help names its options; an older ghostctl answers
// with the top-level help, which only mentions the words.
bool ghostctl_can_checkpoint(const Programs& pr, const fs::path& dir) {
    for (const char* sub : {"checkpoint", "restart"}) {
        if (run({pr.ghostctl, sub, "--help"}, dir / "help.out", dir / "help.err") != 0)
            return false;
        const std::string help = slurp(dir / "help.out");
        if (help.find(sub == std::string("checkpoint") ? "--leave-running" : "--detach") ==
            std::string::npos)
            return false;
    }
    return true;
}

// Whether this ghostctl opens the user engine; if not, @why says what it said.
bool ghostctl_has_user_engine(const Programs& pr, const fs::path& dir, std::string& why) {
    const int st =
        run({pr.ghostctl, "--engine", "user", "check"}, dir / "user.out", dir / "user.err");
    why = fmt::format("{}: {}", status_text(st), slurp(dir / "user.err"));
    return st == 0;
}

// The same number of bytes through the operations ghost's path is made of,
// from user space, best of @repeat, in ms.
struct Baselines {
    double memcpy_ms = 1e18, crc_ms = 1e18, xxh_ms = 1e18, write4k_ms = 1e18, write1m_ms = 1e18,
           read4k_ms = 1e18, read1m_ms = 1e18;
};

// crc32c with the SSE4.2 instruction, as the kernel's crc32c-intel uses it.
__attribute__((target("sse4.2"))) std::uint32_t crc32c(const std::uint64_t* p, size_t words) {
    std::uint64_t c = ~0U;
    for (size_t i = 0; i < words; i++)
        c = __builtin_ia32_crc32di(c, p[i]);
    return static_cast<std::uint32_t>(~c);
}

// Writes or reads @bytes of @fd from offset 0 in @chunk calls; ms or -1.
double file_pass(int fd, bool write_it, std::vector<char>& buf, size_t bytes, size_t chunk) {
    const double t = now_ms();
    for (size_t off = 0; off < bytes; off += chunk) {
        const size_t n = std::min(chunk, bytes - off);
        const ssize_t r =
            write_it ? pwrite(fd, buf.data() + off % buf.size(), n, static_cast<off_t>(off))
                     : pread(fd, buf.data() + off % buf.size(), n, static_cast<off_t>(off));
        if (r != static_cast<ssize_t>(n))
            return -1;
    }
    return now_ms() - t;
}

Baselines measure_baselines(size_t bytes, int repeat, const fs::path& dir) {
    Baselines b;
    std::vector<std::uint64_t> a(bytes / 8), c(bytes / 8);
    for (size_t i = 0; i < a.size(); i++)
        a[i] = i * 0x9E3779B97F4A7C15ull | 1;
    std::vector<char> buf(1 << 20, 7);
    const fs::path path = dir / "baseline";
    for (int r = 0; r < repeat; r++) {
        double t = now_ms();
        memcpy(c.data(), a.data(), bytes);
        asm volatile("" : : "r"(c.data()) : "memory");
        b.memcpy_ms = std::min(b.memcpy_ms, now_ms() - t);
        if (__builtin_cpu_supports("sse4.2")) {
            t = now_ms();
            volatile std::uint32_t sink = crc32c(a.data(), a.size());
            (void)sink;
            b.crc_ms = std::min(b.crc_ms, now_ms() - t);
        }
        t = now_ms();
        volatile std::uint64_t xsink = XXH64(a.data(), bytes, 0);
        (void)xsink;
        b.xxh_ms = std::min(b.xxh_ms, now_ms() - t);
        // A new file each time, as for an image: written, then read back.
        for (size_t chunk : {size_t{4096}, size_t{1} << 20}) {
            ghost::UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
            const double w = fd ? file_pass(fd.get(), true, buf, bytes, chunk) : -1;
            const double rd = fd ? file_pass(fd.get(), false, buf, bytes, chunk) : -1;
            unlink(path.c_str());
            double& bw = chunk == 4096 ? b.write4k_ms : b.write1m_ms;
            double& br = chunk == 4096 ? b.read4k_ms : b.read1m_ms;
            if (w >= 0)
                bw = std::min(bw, w);
            if (rd >= 0)
                br = std::min(br, rd);
        }
    }
    return b;
}

std::string today() {
    const time_t t = time(nullptr);
    char buf[32];
    strftime(buf, sizeof(buf), "%Y-%m-%d", localtime(&t));
    return buf;
}

void usage(FILE* out) {
    fmt::print(out,
               "Usage: ghost_bench_vs_criu [--sizes 16,64,256] [--repeat N]\n"
               "                           [--tools ghostctl,user,stubs,ioctl,ioctl-mem,criu]\n"
               "                           [--dir DIR] [--json FILE]\n"
               "\n"
               "Checkpoint + restart time of ghost against CRIU on the same workload in\n"
               "the same run; prints markdown tables (times in ms: mean / min / median).\n"
               "Tools: ghostctl (--engine kernel), user (ghostctl --engine user, skipped\n"
               "when unavailable), stubs (ghost-export/ghost-restore), ioctl and ioctl-mem\n"
               "(the module's ioctls from this program), criu (dump/restore).\n"
               "Needs root, ghost.ko and criu: run it in the test VM, e.g.\n"
               "  tests/vm/run --mem 3072 -- ghost_bench_vs_criu --repeat 3\n"
               "Images go to DIR (default /tmp/ghost-vs-criu; keep it on tmpfs).\n"
               "For ghostctl, user and criu each run also checkpoints a fresh workload with\n"
               "--leave-running and reports how long it was held still (ghostctl's 'frozen'\n"
               "figure, CRIU's stats-dump frozen_time) against that checkpoint's time.\n"
               "--json FILE also writes one row per size and tool, means over the runs:\n"
               "  {{\"mib\", \"tool\", \"checkpoint_ms\", \"restart_ms\", \"total_ms\",\n"
               "   \"total_vs_criu\", \"frozen_ms\", \"frozen_leave_running_ms\", \"export_ms\"}}\n"
               "(tool: kernel, user, stubs, ioctl, ioctl-mem or criu; export_ms is the\n"
               "--leave-running checkpoint's time; null where a tool has no such figure).\n");
}

} // namespace

int main(int argc, char** argv) {
    std::vector<size_t> sizes{16, 64, 256};
    int repeat = 3;
    std::vector<Tool> tools{Tool::Ghostctl, Tool::User,     Tool::Stubs,
                            Tool::Ioctl,    Tool::IoctlMem, Tool::Criu};
    fs::path base = "/tmp/ghost-vs-criu";
    fs::path json_out;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--repeat" && has_value) {
            repeat = std::max(1, atoi(argv[++i]));
        } else if (a == "--sizes" && has_value) {
            sizes.clear();
            for (char* s = strtok(argv[++i], ","); s; s = strtok(nullptr, ","))
                sizes.push_back(strtoul(s, nullptr, 10));
        } else if (a == "--tools" && has_value) {
            tools.clear();
            for (char* s = strtok(argv[++i], ","); s; s = strtok(nullptr, ",")) {
                const std::string t = s;
                if (t == "ghostctl")
                    tools.push_back(Tool::Ghostctl);
                else if (t == "user")
                    tools.push_back(Tool::User);
                else if (t == "stubs")
                    tools.push_back(Tool::Stubs);
                else if (t == "ioctl")
                    tools.push_back(Tool::Ioctl);
                else if (t == "ioctl-mem")
                    tools.push_back(Tool::IoctlMem);
                else if (t == "criu")
                    tools.push_back(Tool::Criu);
                else {
                    fmt::print(stderr, "ghost_bench_vs_criu: unknown tool '{}'\n", t);
                    return 2;
                }
            }
        } else if (a == "--dir" && has_value) {
            base = argv[++i];
        } else if (a == "--json" && has_value) {
            json_out = argv[++i];
        } else if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (sizes.empty() || tools.empty() || std::count(sizes.begin(), sizes.end(), 0u)) {
        usage(stderr);
        return 2;
    }

    // Restored processes whose restart command exits (ghostctl --detach,
    // criu -d) become our children, so they can be reaped and their pids
    // freed before the next run.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    const Programs pr{find_program("ghost-ckpt-workload"), find_program("ghostctl"),
                      find_program("ghost-export"), find_program("ghost-restore"), "criu"};
    fs::create_directories(base);

    if ((std::count(tools.begin(), tools.end(), Tool::Ghostctl) ||
         std::count(tools.begin(), tools.end(), Tool::User)) &&
        !ghostctl_can_checkpoint(pr, base)) {
        fmt::print(stderr, "ghost_bench_vs_criu: this ghostctl has no checkpoint/restart; "
                           "skipping it (the headline uses the stubs)\n");
        tools.erase(std::remove(tools.begin(), tools.end(), Tool::Ghostctl), tools.end());
        tools.erase(std::remove(tools.begin(), tools.end(), Tool::User), tools.end());
    }
    if (std::string why; std::count(tools.begin(), tools.end(), Tool::User) &&
                         !ghostctl_has_user_engine(pr, base, why)) {
        fmt::print(stderr,
                   "ghost_bench_vs_criu: 'ghostctl --engine user check' fails ({}); skipping "
                   "the user engine\n",
                   why);
        tools.erase(std::remove(tools.begin(), tools.end(), Tool::User), tools.end());
    }
    if (std::count(tools.begin(), tools.end(), Tool::Criu) &&
        run({pr.criu, "check"}, base / "check.out", base / "check.err") != 0) {
        fmt::print(stderr, "ghost_bench_vs_criu: 'criu check' fails:\n{}",
                   slurp(base / "check.err"));
        return 1;
    }

    std::map<std::pair<size_t, Tool>, Series> res;
    for (size_t mib : sizes) {
        for (int r = 0; r < repeat; r++) {
            for (Tool t : tools) {
                Failure f;
                auto s = run_once(t, mib, pr, base, f);
                if (!s) {
                    fmt::print(stderr, "ghost_bench_vs_criu: {} MiB, {}: {}\n", mib, tool_name(t),
                               f.what);
                    return 1;
                }
                fmt::print(stderr,
                           "{:>4} MiB {:<8} run {}: checkpoint {:>6.0f} ms, restart {:>6.0f} ms, "
                           "total {:>6.0f} ms\n",
                           mib, tool_name(t), r + 1, s->ckpt_ms, s->restart_ms, s->total_ms);
                if (has_leave_running(t) && !leave_running_once(t, mib, pr, base, *s, f)) {
                    fmt::print(stderr, "ghost_bench_vs_criu: {} MiB, {}: {}\n", mib, tool_name(t),
                               f.what);
                    return 1;
                }
                res[{mib, t}].samples.push_back(*s);
            }
        }
    }

    utsname u{};
    uname(&u);
    fmt::print("ghost vs CRIU, checkpoint + restart to tmpfs: {} runs each, kernel {}, {} CPUs, "
               "{}\n\n",
               repeat, u.release, sysconf(_SC_NPROCESSORS_ONLN), today());

    const bool have_criu = std::count(tools.begin(), tools.end(), Tool::Criu) > 0;
    const Tool head = std::count(tools.begin(), tools.end(), Tool::Ghostctl) ? Tool::Ghostctl
                      : std::count(tools.begin(), tools.end(), Tool::Stubs)  ? Tool::Stubs
                                                                             : Tool::Ioctl;
    if (have_criu && std::count(tools.begin(), tools.end(), head)) {
        fmt::print("ghost = {}; times in ms, mean (totals: mean / min / median)\n\n",
                   tool_name(head));
        fmt::print("| MiB | ghost checkpoint | ghost restart | ghost total | CRIU dump | "
                   "CRIU restore | CRIU total | ghost/CRIU (means) | (medians) | ghost image MiB | "
                   "CRIU image MiB |\n");
        fmt::print("|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (size_t mib : sizes) {
            const Series& g = res[{mib, head}];
            const Series& c = res[{mib, Tool::Criu}];
            fmt::print("| {} | {:.0f} | {:.0f} | {} | {:.0f} | {:.0f} | {} | {:.2f}x | {:.2f}x | "
                       "{:.1f} | {:.1f} |\n",
                       mib, g.get(&Sample::ckpt_ms).mean, g.get(&Sample::restart_ms).mean,
                       ms3(g.get(&Sample::total_ms)), c.get(&Sample::ckpt_ms).mean,
                       c.get(&Sample::restart_ms).mean, ms3(c.get(&Sample::total_ms)),
                       g.get(&Sample::total_ms).mean / c.get(&Sample::total_ms).mean,
                       g.get(&Sample::total_ms).median / c.get(&Sample::total_ms).median,
                       mib_of(g.samples.front().image_bytes),
                       mib_of(c.samples.front().image_bytes));
        }
        fmt::print("\n");
    }

    // The two engines beside CRIU, with bandwidths: image bytes over the mean.
    const auto has = [&](Tool t) { return std::count(tools.begin(), tools.end(), t) > 0; };
    if (has(Tool::User) || has(Tool::Ghostctl)) {
        fmt::print("Engines (ghostctl --engine kernel|user) beside CRIU; ms as means, MiB/s as "
                   "image MiB over the mean time, ratios of means\n\n");
        fmt::print("| MiB | tool | checkpoint ms | MiB/s | restart ms | MiB/s | total ms | MiB/s | "
                   "total/CRIU | total/kernel | image MiB |\n");
        fmt::print("|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (size_t mib : sizes) {
            for (Tool t : {Tool::Ghostctl, Tool::User, Tool::Criu}) {
                if (!has(t))
                    continue;
                const Series& s = res[{mib, t}];
                const double img = mib_of(s.samples.front().image_bytes);
                const double ck = s.get(&Sample::ckpt_ms).mean,
                             rs = s.get(&Sample::restart_ms).mean,
                             tot = s.get(&Sample::total_ms).mean;
                const auto ratio = [&](Tool base) {
                    return has(base)
                               ? fmt::format("{:.2f}x",
                                             tot / res[{mib, base}].get(&Sample::total_ms).mean)
                               : std::string("-");
                };
                fmt::print("| {} | {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {} | "
                           "{} | {:.1f} |\n",
                           mib,
                           t == Tool::Ghostctl ? "kernel"
                           : t == Tool::User   ? "user"
                                               : "criu",
                           ck, img / ck * 1e3, rs, img / rs * 1e3, tot, img / tot * 1e3,
                           ratio(Tool::Criu), ratio(Tool::Ghostctl), img);
            }
        }
        fmt::print("\n");
    }

    fmt::print("Every tool; ms as mean / min / median\n\n");
    fmt::print(
        "| MiB | tool | checkpoint | restart | total | total/CRIU | frozen ms | image bytes |\n");
    fmt::print("|---|---|---|---|---|---|---|---|\n");
    for (size_t mib : sizes) {
        for (Tool t : tools) {
            const Series& s = res[{mib, t}];
            const double frozen = s.get(&Sample::frozen_ms).mean;
            fmt::print(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n", mib, tool_name(t),
                ms3(s.get(&Sample::ckpt_ms)), ms3(s.get(&Sample::restart_ms)),
                ms3(s.get(&Sample::total_ms)),
                have_criu
                    ? fmt::format("{:.2f}x", s.get(&Sample::total_ms).mean /
                                                 res[{mib, Tool::Criu}].get(&Sample::total_ms).mean)
                    : "-",
                frozen >= 0 ? fmt::format("{:.0f}", frozen) : "-", s.samples.front().image_bytes);
        }
    }

    // Goal 2 of issue 15: held still by a --leave-running checkpoint.
    if (has(Tool::User) || has(Tool::Ghostctl) || has(Tool::Criu)) {
        fmt::print("\nHeld still: a checkpoint that kills (frozen ms) and one that leaves the "
                   "process running (its time, frozen ms, frozen / time); means\n\n");
        fmt::print("| MiB | tool | frozen ms (kill) | --leave-running ms | frozen ms | "
                   "frozen / checkpoint |\n|---|---|---|---|---|---|\n");
        for (size_t mib : sizes)
            for (Tool t : {Tool::Ghostctl, Tool::User, Tool::Criu}) {
                if (!has(t))
                    continue;
                const Series& s = res[{mib, t}];
                const double ex = s.get(&Sample::lr_export_ms).mean,
                             fr = s.get(&Sample::lr_frozen_ms).mean;
                fmt::print("| {} | {} | {:.1f} | {:.0f} | {:.1f} | {:.1f}% |\n", mib,
                           t == Tool::Ghostctl ? "kernel" : tool_name(t),
                           s.get(&Sample::frozen_ms).mean, ex, fr, 100 * fr / ex);
            }
    }

    if (!json_out.empty()) {
        nlohmann::json rows = nlohmann::json::array();
        const auto value = [](double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(); };
        for (size_t mib : sizes)
            for (Tool t : tools) {
                const Series& s = res[{mib, t}];
                const double tot = s.get(&Sample::total_ms).mean;
                rows.push_back(
                    {{"mib", mib},
                     {"tool", t == Tool::Ghostctl ? "kernel" : tool_name(t)},
                     {"checkpoint_ms", s.get(&Sample::ckpt_ms).mean},
                     {"restart_ms", s.get(&Sample::restart_ms).mean},
                     {"total_ms", tot},
                     {"total_vs_criu",
                      have_criu ? value(tot / res[{mib, Tool::Criu}].get(&Sample::total_ms).mean)
                                : nlohmann::json()},
                     {"frozen_ms", value(s.get(&Sample::frozen_ms).mean)},
                     {"frozen_leave_running_ms", value(s.get(&Sample::lr_frozen_ms).mean)},
                     {"export_ms", value(s.get(&Sample::lr_export_ms).mean)},
                     {"image_bytes", s.samples.front().image_bytes},
                     {"runs", s.samples.size()}});
            }
        std::ofstream j(json_out);
        j << rows.dump(2) << "\n";
        if (!j) {
            fmt::print(stderr, "ghost_bench_vs_criu: cannot write {}\n", json_out.string());
            return 1;
        }
    }

    // What starting each program costs by itself: part of every command above.
    fmt::print("\nStarting a program that does nothing (median of 5, ms)\n\n");
    fmt::print("| command | ms |\n|---|---|\n");
    const std::vector<std::vector<std::string>> idle{{pr.ghostctl, "--version"},
                                                     {pr.ghost_export, "--help"},
                                                     {pr.ghost_restore, "--help"},
                                                     {pr.criu, "--version"},
                                                     {"true"}};
    for (const auto& argv : idle) {
        const double ms = startup_ms(argv, base);
        fmt::print("| {} {} | {} |\n", fs::path(argv[0]).filename().string(),
                   argv.size() > 1 ? argv[1] : "", ms >= 0 ? fmt::format("{:.1f}", ms) : "failed");
    }

    fmt::print(
        "\nThe same bytes from user space (best of {}, ms): what ghost's path is made of\n\n",
        repeat);
    fmt::print("| MiB | memcpy | crc32c (SSE4.2) | xxh64 | write 4 KiB calls | write 1 MiB calls | "
               "read 4 KiB calls | read 1 MiB calls |\n");
    fmt::print("|---|---|---|---|---|---|---|---|\n");
    auto cell = [](double ms) { return ms < 1e17 ? fmt::format("{:.0f}", ms) : "-"; };
    for (size_t mib : sizes) {
        const Baselines b = measure_baselines(mib << 20, repeat, base);
        fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} |\n", mib, cell(b.memcpy_ms),
                   cell(b.crc_ms), cell(b.xxh_ms), cell(b.write4k_ms), cell(b.write1m_ms),
                   cell(b.read4k_ms), cell(b.read1m_ms));
    }
    std::error_code ec;
    fs::remove_all(base, ec);
    return 0;
}
