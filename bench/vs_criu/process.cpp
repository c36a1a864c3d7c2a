// SPDX-License-Identifier: GPL-2.0
// ghost_bench_vs_criu's processes: running a command with its output in
// files, the run directory and its markers, starting the workload and
// waiting for the restored process, and asking ghostctl what it can do.
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "vs_criu.hpp"

namespace bench::vs_criu {

namespace {

// What /proc/PID/stat shows for the workload (comm is cut to 15 bytes).
constexpr const char* workload_comm = "ghost-ckpt-work";

void sleep_ms(double ms) {
    timespec t{static_cast<time_t>(ms / 1e3), static_cast<long>(std::fmod(ms, 1e3) * 1e6)};
    nanosleep(&t, nullptr);
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

} // namespace

double now_ms() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

std::string slurp(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

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

RunDir::RunDir(fs::path dir) : dir_(std::move(dir)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ifd_.reset(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
    if (ifd_)
        inotify_add_watch(ifd_.get(), dir_.c_str(), IN_MOVED_TO);
}

RunDir::~RunDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

bool RunDir::wait_for(const char* name, double timeout_ms) const {
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

} // namespace bench::vs_criu
