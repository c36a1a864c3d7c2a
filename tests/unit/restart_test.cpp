// SPDX-License-Identifier: GPL-2.0
// restart() and duplicate() through the restore stub, with the engine
// $GHOST_ENGINE names (auto: the kernel engine where ghost.ko is loaded).
// Natively (ctest native:Restart.*) the user engine; in the VM
// (`ghost-vm-tests restart`) the kernel engine.
//
//  - the library never forks: a pthread_atfork() child handler of ours
//    would run in a forked child and tell us; and a caller whose threads
//    are busy in malloc and stdio restarts many times, without a deadlock;
//  - RestartOptions::stopped: state T, no output until SIGCONT, then the
//    count goes on; SIGKILL while stopped leaves no process behind;
//  - the stub is found or named in the error; a refused image's reason
//    comes back through it;
//  - RestartOptions::owner: another user's image is refused, the owner's
//    restarts; a process that is not dumpable comes back so;
//  - a CPU time limit is enforced after a restart (SIGXCPU).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ghost/engine.hpp"
#include "ghost/fd.hpp"
#include "ghost/process.hpp"
#include "proc_state.hpp"

namespace {

// Set by our pthread_atfork() child handler: in a child fork()ed from this
// process it writes to this pipe.
int g_forked_fd = -1;
void on_fork_child() {
    if (g_forked_fd >= 0)
        (void)!::write(g_forked_fd, "F", 1);
}

// Registers on_fork_child once per process (tests may share one).
bool watch_forks() {
    static const int registered = ::pthread_atfork(nullptr, nullptr, on_fork_child);
    return registered == 0;
}

std::string fmt_proc(pid_t pid, const char* what) {
    return "/proc/" + std::to_string(pid) + "/" + what;
}

std::unique_ptr<ghost::Engine> engine() {
    const char* name = std::getenv("GHOST_ENGINE");
    auto kind = ghost::parse_engine_kind(name && *name ? name : "auto");
    if (!kind)
        return nullptr;
    auto e = ghost::Engine::open(*kind);
    return e ? std::move(*e) : nullptr;
}

// A worker writing "pid count\n" to its fd kOut every 20 ms.
constexpr int kOut = 100;

[[noreturn]] void worker() {
    // Only stdio and kOut: no other inherited descriptor in its image.
    ::syscall(SYS_close_range, 3, kOut - 1, 0);
    ::syscall(SYS_close_range, kOut + 1, ~0U, 0);
    unsigned long n = 0;
    for (;;) {
        char line[64];
        const int len = std::snprintf(line, sizeof(line), "%d %lu\n", ::getpid(), ++n);
        if (::write(kOut, line, static_cast<std::size_t>(len)) != len)
            ::_exit(3);
        ::usleep(20000);
    }
}

class Restart : public ::testing::Test {
  protected:
    void SetUp() override {
        eng_ = engine();
        ASSERT_TRUE(eng_) << "no engine";
        // Orphans (the user engine's tracer) become our children: a test
        // can tell that nothing is left behind.
        ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
        int p[2];
        ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
        rd_.reset(p[0]);
        ASSERT_EQ(::dup3(p[1], kOut, O_CLOEXEC), kOut);
        ::close(p[1]);
        wr_.reset(kOut);
    }
    void TearDown() override {
        for (const pid_t p : pids_)
            ::kill(p, SIGKILL);
        while (::waitpid(-1, nullptr, __WALL) > 0) {
        }
    }

    // A worker, checkpointed (killed) into a file at offset 0; its fd.
    // setup runs in it first.
    ghost::UniqueFd checkpointed(const std::function<void()>& setup = {}) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (setup)
                setup();
            worker();
        }
        EXPECT_GT(next_line().first, 0);
        ghost::UniqueFd img(::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
        EXPECT_TRUE(img);
        ghost::CheckpointOptions o;
        o.fate = ghost::Fate::Kill;
        auto st = ghost::checkpoint(*eng_, pid, img.get(), o);
        EXPECT_TRUE(st) << st.error().what();
        EXPECT_EQ(::waitpid(pid, nullptr, 0), pid);
        drain();
        EXPECT_EQ(::lseek(img.get(), 0, SEEK_SET), 0);
        return img;
    }

    ghost::RestartOptions opts() const {
        ghost::RestartOptions o;
        o.inherit_fds = {{kOut, kOut}};
        return o;
    }

    // The next line: {pid, count}, {0, 0} after timeout_ms without one.
    std::pair<pid_t, unsigned long> next_line(int timeout_ms = 5000) {
        for (;;) {
            const auto nl = buf_.find('\n');
            if (nl != std::string::npos) {
                pid_t pid = 0;
                unsigned long n = 0;
                std::sscanf(buf_.substr(0, nl).c_str(), "%d %lu", &pid, &n);
                buf_.erase(0, nl + 1);
                last_ = n;
                return {pid, n};
            }
            pollfd p{rd_.get(), POLLIN, 0};
            if (::poll(&p, 1, timeout_ms) <= 0)
                return {0, 0};
            char b[4096];
            const ssize_t n = ::read(rd_.get(), b, sizeof(b));
            if (n <= 0)
                return {0, 0};
            buf_.append(b, static_cast<std::size_t>(n));
        }
    }
    void drain() {
        while (next_line(100).first != 0) {
        }
    }

    std::unique_ptr<ghost::Engine> eng_;
    ghost::UniqueFd rd_, wr_;
    std::string buf_;
    unsigned long last_ = 0;
    std::vector<pid_t> pids_;
};

TEST_F(Restart, NeverForksAndSurvivesBusyThreads) {
    auto img = checkpointed();
    int f[2];
    ASSERT_EQ(::pipe2(f, O_CLOEXEC | O_NONBLOCK), 0);
    g_forked_fd = f[1];
    ASSERT_TRUE(watch_forks());

    const unsigned long last = last_;
    // Threads that hold malloc's and stdio's locks as often as they can.
    std::atomic<bool> stop{false};
    std::vector<std::thread> busy;
    for (int t = 0; t < 4; t++)
        busy.emplace_back([&stop, t] {
            FILE* null = std::fopen("/dev/null", "we");
            while (!stop.load(std::memory_order_relaxed)) {
                std::vector<std::unique_ptr<char[]>> v;
                for (int i = 0; i < 64; i++)
                    v.emplace_back(new char[static_cast<std::size_t>(16 + i * 97 + t)]);
                std::fprintf(null, "%d %s %f\n", t, std::to_string(v.size()).c_str(), 1.5);
                std::fflush(null);
            }
            std::fclose(null);
        });
    constexpr int kRounds = 25;
    for (int i = 0; i < kRounds; i++) {
        ASSERT_EQ(::lseek(img.get(), 0, SEEK_SET), 0);
        auto child = ghost::restart(*eng_, img.get(), opts());
        ASSERT_TRUE(child) << "round " << i << ": " << child.error().what();
        pids_.push_back(*child);
        const auto [pid, n] = next_line();
        EXPECT_EQ(pid, *child) << "round " << i;
        EXPECT_EQ(n, last + 1) << "round " << i << ": the restored count goes on";
        ::kill(*child, SIGKILL);
        EXPECT_EQ(::waitpid(*child, nullptr, 0), *child);
        drain();
    }
    stop = true;
    for (auto& t : busy)
        t.join();
    char c;
    EXPECT_EQ(::read(f[0], &c, 1), -1) << "the library fork()ed (our atfork handler ran)";
    g_forked_fd = -1;
    ::close(f[0]);
    ::close(f[1]);
}

TEST_F(Restart, DuplicateNeverForks) {
    int f[2];
    ASSERT_EQ(::pipe2(f, O_CLOEXEC | O_NONBLOCK), 0);
    g_forked_fd = f[1];
    ASSERT_TRUE(watch_forks());
    const pid_t orig = ::fork();
    if (orig == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        worker();
    }
    pids_.push_back(orig);
    char c;
    pollfd pf{f[0], POLLIN, 0};
    ASSERT_EQ(::poll(&pf, 1, 5000), 1);
    ASSERT_EQ(::read(f[0], &c, 1), 1); // our own fork, seen: the handler works
    ASSERT_GT(next_line().first, 0);
    auto copy = ghost::duplicate(*eng_, orig);
    ASSERT_TRUE(copy) << copy.error().what();
    pids_.push_back(*copy);
    EXPECT_EQ(::read(f[0], &c, 1), -1) << "duplicate() fork()ed (our atfork handler ran)";
    // Both run on, each with its own pid.
    bool seen_orig = false, seen_copy = false;
    for (int i = 0; i < 40 && !(seen_orig && seen_copy); i++) {
        const pid_t p = next_line().first;
        seen_orig |= p == orig;
        seen_copy |= p == *copy;
    }
    EXPECT_TRUE(seen_orig && seen_copy);
    g_forked_fd = -1;
    ::close(f[0]);
    ::close(f[1]);
}

TEST_F(Restart, StoppedUntilContinued) {
    auto img = checkpointed();
    const unsigned long last = last_;
    auto o = opts();
    o.stopped = true;
    auto child = ghost::restart(*eng_, img.get(), o);
    ASSERT_TRUE(child) << child.error().what();
    pids_.push_back(*child);
    EXPECT_EQ(testing_util::state_of(*child), 'T');
    int st = 0;
    ASSERT_EQ(::waitpid(*child, &st, WUNTRACED | WNOHANG), *child);
    EXPECT_TRUE(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP) << "status " << st;
    // Not one line while stopped.
    EXPECT_EQ(next_line(500).first, 0) << "the stopped process wrote";
    EXPECT_EQ(testing_util::state_of(*child), 'T');
    ASSERT_EQ(::kill(*child, SIGCONT), 0);
    const auto [pid, n] = next_line();
    EXPECT_EQ(pid, *child);
    EXPECT_EQ(n, last + 1) << "the first line after SIGCONT is the next count";
    EXPECT_EQ(next_line().second, last + 2);
}

// restart() returns once the process runs as the image and nothing holds
// it any more: it can be checkpointed again at once (a process still held
// by the user engine's tracer could not be seized).
TEST_F(Restart, ReturnsOnlyOnceReleased) {
    auto img = checkpointed();
    for (int round = 0; round < 5; round++) {
        auto child = ghost::restart(*eng_, img.get(), opts());
        ASSERT_TRUE(child) << child.error().what();
        pids_.push_back(*child);
        std::ifstream status("/proc/" + std::to_string(*child) + "/status");
        std::string line, tracer;
        while (std::getline(status, line))
            if (line.rfind("TracerPid:", 0) == 0)
                tracer = line.substr(line.find_first_not_of(" \t", 10));
        EXPECT_EQ(tracer, "0") << "round " << round << ": still held after restart() returned";
        ghost::UniqueFd again(::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
        ASSERT_TRUE(again);
        ghost::CheckpointOptions o;
        o.fate = ghost::Fate::Kill;
        auto st = ghost::checkpoint(*eng_, *child, again.get(), o);
        ASSERT_TRUE(st) << "round " << round << ": " << st.error().what();
        EXPECT_EQ(::waitpid(*child, nullptr, 0), *child);
        drain();
        ASSERT_EQ(::lseek(img.get(), 0, SEEK_SET), 0);
    }
}

TEST_F(Restart, KilledWhileStoppedLeavesNothing) {
    auto img = checkpointed();
    auto o = opts();
    o.stopped = true;
    auto child = ghost::restart(*eng_, img.get(), o);
    ASSERT_TRUE(child) << child.error().what();
    EXPECT_EQ(testing_util::state_of(*child), 'T');
    ASSERT_EQ(::kill(*child, SIGKILL), 0);
    int st = 0;
    ASSERT_EQ(::waitpid(*child, &st, 0), *child);
    EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "status " << st;
    // No other process of ours is left (the subreaper would inherit it),
    // and nothing was written.
    for (int i = 0; i < 50; i++) {
        const pid_t p = ::waitpid(-1, nullptr, __WALL | WNOHANG);
        if (p < 0 && errno == ECHILD)
            break;
        ::usleep(20000);
    }
    EXPECT_EQ(::waitpid(-1, nullptr, __WALL | WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD) << "a process of the restart is left";
    EXPECT_EQ(next_line(200).first, 0);
}

TEST_F(Restart, StubFromOptionsOrEnvironmentElseNamedInTheError) {
    auto found = ghost::restore_stub_path();
    ASSERT_TRUE(found) << found.error().what();
    EXPECT_NE(found->find("ghost-restore-stub"), std::string::npos);
    auto img = checkpointed();
    auto o = opts();
    o.stub = "/nonexistent/ghost-restore-stub";
    auto r = ghost::restart(*eng_, img.get(), o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code.value(), ENOENT);
    EXPECT_NE(r.error().what().find("/nonexistent/ghost-restore-stub"), std::string::npos)
        << r.error().what();
    ::setenv("GHOST_RESTORE_STUB", "/nonexistent/env-stub", 1);
    auto e = ghost::restart(*eng_, img.get(), opts());
    ::unsetenv("GHOST_RESTORE_STUB");
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().what().find("GHOST_RESTORE_STUB=/nonexistent/env-stub"), std::string::npos)
        << e.error().what();
    // A program that is not the stub: it says nothing and is refused.
    o.stub = "/bin/true";
    auto t = ghost::restart(*eng_, img.get(), o);
    ASSERT_FALSE(t);
    EXPECT_NE(t.error().what().find("did not start"), std::string::npos) << t.error().what();
}

// RestartOptions::owner (migd restores a user's image as root): an image
// of another user is refused by the stub, from a file and from a pipe (the
// kernel engine's and the user engine's two ways in), and leaves nothing
// behind; the image of the owner named restarts and goes on counting.
TEST_F(Restart, AnImageRestartsOnlyAsTheOwnerItIsGiven) {
    auto img = checkpointed();
    const unsigned long last = last_;
    ghost::Owner me{::getuid(), ::getgid(), {}};
    me.groups.resize(static_cast<std::size_t>(::getgroups(0, nullptr)));
    ASSERT_EQ(::getgroups(static_cast<int>(me.groups.size()), me.groups.data()),
              static_cast<int>(me.groups.size()));
    const uid_t other = me.uid == 0 ? 65534 : 0;
    auto o = opts();
    o.owner = me;
    o.owner->uid = other;
    auto r = ghost::restart(*eng_, img.get(), o);
    ASSERT_FALSE(r) << "restored as pid " << *r;
    EXPECT_EQ(r.error().code.value(), EPERM) << r.error().what();
    const std::string words = "not all uid " + std::to_string(other);
    EXPECT_NE(r.error().what().find(words), std::string::npos) << r.error().what();

    // The same image through a pipe.
    ASSERT_EQ(::lseek(img.get(), 0, SEEK_SET), 0);
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    ghost::UniqueFd prd(p[0]), pwr(p[1]);
    std::thread feed([&] {
        char b[65536];
        ssize_t n;
        while ((n = ::read(img.get(), b, sizeof(b))) > 0)
            if (::write(pwr.get(), b, static_cast<std::size_t>(n)) != n)
                break;
        pwr.reset();
    });
    auto rp = ghost::restart(*eng_, prd.get(), o);
    prd.reset(); // a feeder still writing gets EPIPE
    feed.join();
    ASSERT_FALSE(rp) << "restored from the pipe as pid " << *rp;
    EXPECT_EQ(rp.error().code.value(), EPERM) << rp.error().what();
    EXPECT_NE(rp.error().what().find(words), std::string::npos) << rp.error().what();
    EXPECT_EQ(::waitpid(-1, nullptr, __WALL | WNOHANG), -1) << "a process of a refusal is left";
    EXPECT_EQ(next_line(200).first, 0) << "a refused image ran";

    ASSERT_EQ(::lseek(img.get(), 0, SEEK_SET), 0);
    o.owner = me;
    auto child = ghost::restart(*eng_, img.get(), o);
    ASSERT_TRUE(child) << child.error().what();
    pids_.push_back(*child);
    const auto [pid, n] = next_line();
    EXPECT_EQ(pid, *child);
    EXPECT_EQ(n, last + 1) << "the owner's image goes on counting";
}

// A process that is not dumpable (its owner may not ptrace it or read its
// memory) comes back not dumpable, also from a restorer acting as that
// owner (migd's stub: without CAP_SYS_PTRACE, the user engine's tracer
// must be done writing its memory first); a dumpable one stays dumpable.
// /proc/PID/status belongs to root while a process is not dumpable.
TEST_F(Restart, ANonDumpableProcessComesBackNotDumpable) {
    if (::getuid() != 0)
        GTEST_SKIP() << "needs root: checkpoints another user's process that is not dumpable";
    constexpr uid_t kNobody = 65534;
    for (const bool dumpable : {false, true}) {
        auto img = checkpointed([dumpable] {
            if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
                ::setresuid(kNobody, kNobody, kNobody) != 0)
                ::_exit(5);
            // A change of uid left it not dumpable.
            if (dumpable)
                ::prctl(PR_SET_DUMPABLE, 1);
        });
        const unsigned long last = last_;
        auto o = opts();
        o.owner = ghost::Owner{kNobody, kNobody, {}};
        auto child = ghost::restart(*eng_, img.get(), o);
        ASSERT_TRUE(child) << (dumpable ? "dumpable: " : "not dumpable: ") << child.error().what();
        pids_.push_back(*child);
        const auto [pid, n] = next_line();
        EXPECT_EQ(pid, *child);
        EXPECT_EQ(n, last + 1);
        struct stat st {};
        ASSERT_EQ(::stat(("/proc/" + std::to_string(*child) + "/status").c_str(), &st), 0);
        EXPECT_EQ(st.st_uid, dumpable ? kNobody : 0u)
            << (dumpable ? "a dumpable process came back not dumpable"
                         : "a process that was not dumpable came back dumpable");
        ::kill(*child, SIGKILL);
    }
}

// Forks a process of uid `uid` that reads a restore stub's pid from
// `pids` (restart()'s spawned callback writes it) and then opens its
// /proc/PID/mem as often as it can, until killed. It writes one byte to
// `out` once an open succeeds: from then on that descriptor would read
// whatever memory the process is given, whatever it is made later (the
// check is at open). It exits 5 if it cannot become `uid`.
pid_t watch_for_open_stub(uid_t uid, int pids, int out) {
    const pid_t w = ::fork();
    if (w != 0)
        return w;
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 ||
        ::setresuid(uid, uid, uid) != 0)
        ::_exit(5);
    pid_t stub = 0;
    if (::read(pids, &stub, sizeof(stub)) != sizeof(stub))
        ::_exit(6);
    const std::string mem = fmt_proc(stub, "mem");
    for (;;) {
        const int fd = ::open(mem.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            (void)!::write(out, "!", 1);
            ::_exit(0);
        }
    }
}

// While root restarts another user's process that is not dumpable, that
// user's own processes never get at the image's pages: the restarter is
// not dumpable from the moment it takes the user's credentials (a
// /proc/PID/mem opened in between would read the restored memory for
// good). The kernel engine only: the user engine's tracer, running as the
// owner, needs the stub dumpable to seize it (image-format.md, "not
// dumpable").
TEST_F(Restart, ANonDumpableImageIsNeverOpenToItsOwnerWhileRestarting) {
    if (::getuid() != 0)
        GTEST_SKIP() << "needs root: checkpoints another user's process that is not dumpable";
    if (eng_->name() == "user")
        GTEST_SKIP() << "the user engine's tracer needs the stub dumpable while it rebuilds it";
    constexpr uid_t kNobody = 65534;
    for (int round = 0; round < 3; round++) {
        auto img = checkpointed([] {
            if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
                ::setresuid(kNobody, kNobody, kNobody) != 0)
                ::_exit(5);
        });
        int p[2], q[2];
        ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
        ASSERT_EQ(::pipe2(q, O_CLOEXEC), 0);
        ghost::UniqueFd seen(p[0]), tell(p[1]), pids_rd(q[0]), pids_wr(q[1]);
        const pid_t watcher = watch_for_open_stub(kNobody, pids_rd.get(), tell.get());
        ASSERT_GT(watcher, 0);
        tell.reset();
        pids_rd.reset();
        auto o = opts();
        o.owner = ghost::Owner{kNobody, kNobody, {}};
        o.spawned = [&](pid_t stub) { (void)!::write(pids_wr.get(), &stub, sizeof(stub)); };
        auto child = ghost::restart(*eng_, img.get(), o);
        ::kill(watcher, SIGKILL);
        int st = 0;
        ASSERT_EQ(::waitpid(watcher, &st, 0), watcher);
        EXPECT_TRUE(WIFSIGNALED(st)) << "the watcher ended by itself, status " << st;
        ASSERT_TRUE(child) << child.error().what();
        pids_.push_back(*child);
        EXPECT_EQ(next_line().first, *child);
        char c = 0;
        EXPECT_NE(::read(seen.get(), &c, 1), 1)
            << "uid " << kNobody << " opened the memory of its process being restarted (round "
            << round << ")";
        ::kill(*child, SIGKILL);
    }
}

static void spin_forever(int) {
    for (;;)
        asm volatile("" ::: "memory");
}

// A finite RLIMIT_CPU comes back enforced: the restarted process, spinning
// once told to, is sent SIGXCPU after its soft limit of one second. The
// kernel engine sets the limit but cannot arm the timer that enforces it
// (update_rlimit_cpu() is not exported): the restore stub sets it with
// setrlimit(2) before the last call (GHOST_IMPORT_ATTRS_CPU_LIMIT).
TEST_F(Restart, ACpuTimeLimitIsEnforcedAfterARestart) {
    auto img = checkpointed([] {
        const rlimit no_core{0, 0};
        const rlimit cpu{1, RLIM_INFINITY};
        struct sigaction sa {};
        sa.sa_handler = spin_forever;
        if (::setrlimit(RLIMIT_CORE, &no_core) != 0 || ::setrlimit(RLIMIT_CPU, &cpu) != 0 ||
            ::sigaction(SIGUSR1, &sa, nullptr) != 0)
            ::_exit(5);
    });
    auto child = ghost::restart(*eng_, img.get(), opts());
    ASSERT_TRUE(child) << child.error().what();
    pids_.push_back(*child);
    EXPECT_EQ(next_line().first, *child) << "the restarted process does not run";
    rlimit got{};
    ASSERT_EQ(::prlimit(*child, RLIMIT_CPU, nullptr, &got), 0);
    EXPECT_EQ(got.rlim_cur, 1u);
    EXPECT_EQ(got.rlim_max, RLIM_INFINITY);
    ASSERT_EQ(::kill(*child, SIGUSR1), 0);
    // One second of CPU time; up to 60 s on a loaded machine or under TCG.
    int st = 0;
    pid_t done = 0;
    for (int i = 0; i < 600 && (done = ::waitpid(*child, &st, WNOHANG)) == 0; i++)
        ::usleep(100000);
    ASSERT_EQ(done, *child) << "still running after 60 s: its CPU time limit is not enforced";
    EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGXCPU) << "status " << st;
}

TEST_F(Restart, RefusedImageReasonComesBackThroughTheStub) {
    // Not an image: the stub's reader refuses it, and says why.
    ghost::UniqueFd junk(::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    ASSERT_TRUE(junk);
    const std::string bytes(8192, 'x');
    ASSERT_EQ(::write(junk.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ASSERT_EQ(::lseek(junk.get(), 0, SEEK_SET), 0);
    auto r = ghost::restart(*eng_, junk.get(), opts());
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().code.value(), 0);
    EXPECT_FALSE(r.error().message.empty());
    EXPECT_EQ(r.error().message.find("did not start"), std::string::npos) << r.error().what();
    // The same reason as restart_self() gives in this process (its
    // refusal leaves the caller as it was).
    ASSERT_EQ(::lseek(junk.get(), 0, SEEK_SET), 0);
    const ghost::Error here = ghost::restart_self(*eng_, junk.get());
    EXPECT_EQ(r.error().code.value(), here.code.value());
    EXPECT_EQ(r.error().message, here.message);
}

} // namespace
