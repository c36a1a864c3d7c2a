// SPDX-License-Identifier: GPL-2.0
// The user engine (ptrace, /proc), natively on the host: no module, no VM.
// Each test runs a worker process forked from the test, moves it with the
// engine and checks what it does afterwards: it must go on counting from
// where it was, with the same memory, descriptors and signal state.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ghost/engine.hpp"
#include "ghost/image.hpp"
#include "ghost/process.hpp"
#include "ghost/user_engine.hpp"
#include "proc_state.hpp"
#include "subprocess.hpp"

namespace {

using testing_util::state_of;

using namespace std::chrono_literals;

constexpr std::size_t kBuf = 8 << 20;

// Fills 8 MiB with a pattern, then every 20 ms writes "pid count sum\n" to
// out, where sum covers the pattern: a restored copy with any page wrong
// reports a different sum.
[[noreturn]] void worker(int out, bool with_thread = false, int extra_fd = -1) {
    (void)extra_fd;
    auto* buf = static_cast<unsigned char*>(
        ::mmap(nullptr, kBuf, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (std::size_t i = 0; i < kBuf; i++)
        buf[i] = static_cast<unsigned char>(i * 7 + i / 4096);
    if (with_thread)
        std::thread([] { ::pause(); }).detach();
    unsigned long count = 0;
    for (;;) {
        unsigned long sum = 0;
        for (std::size_t i = 0; i < kBuf; i += 512)
            sum = sum * 31 + buf[i];
        char line[96];
        const int n = std::snprintf(line, sizeof(line), "%d %lu %lu\n", ::getpid(), count++, sum);
        if (::write(out, line, static_cast<std::size_t>(n)) != n)
            ::_exit(3);
        ::usleep(20000);
    }
}

struct Line {
    pid_t pid = 0;
    unsigned long count = 0, sum = 0;
};

// The worker's output pipe, read line by line with a timeout.
class Lines {
  public:
    Lines() {
        int p[2];
        EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
        rd_ = p[0];
        wr_ = p[1];
    }
    ~Lines() {
        ::close(rd_);
        if (wr_ >= 0)
            ::close(wr_);
    }
    int wr() const { return wr_; }
    int rd() const { return rd_; }
    // The next line, or pid 0 after 5 s without one.
    Line next() {
        for (;;) {
            const auto nl = buf_.find('\n');
            if (nl != std::string::npos) {
                Line l;
                std::sscanf(buf_.substr(0, nl).c_str(), "%d %lu %lu", &l.pid, &l.count, &l.sum);
                buf_.erase(0, nl + 1);
                last_ = l;
                return l;
            }
            pollfd p{rd_, POLLIN, 0};
            if (::poll(&p, 1, 5000) <= 0)
                return {};
            char b[4096];
            const ssize_t n = ::read(rd_, b, sizeof(b));
            if (n <= 0)
                return {};
            buf_.append(b, static_cast<std::size_t>(n));
        }
    }
    // Everything already written, as lines.
    std::vector<Line> drain() {
        std::vector<Line> out;
        ::fcntl(rd_, F_SETFL, O_NONBLOCK);
        char b[4096];
        ssize_t n;
        while ((n = ::read(rd_, b, sizeof(b))) > 0)
            buf_.append(b, static_cast<std::size_t>(n));
        ::fcntl(rd_, F_SETFL, 0);
        for (auto nl = buf_.find('\n'); nl != std::string::npos; nl = buf_.find('\n')) {
            Line l;
            std::sscanf(buf_.substr(0, nl).c_str(), "%d %lu %lu", &l.pid, &l.count, &l.sum);
            buf_.erase(0, nl + 1);
            out.push_back(l);
            last_ = l;
        }
        return out;
    }
    // The last line read, by next() or drain().
    Line last() const { return last_; }

  private:
    int rd_ = -1, wr_ = -1;
    std::string buf_;
    Line last_;
};

pid_t spawn(Lines& lines, bool with_thread = false, int extra_fd = -1) {
    const pid_t pid = ::fork();
    if (pid == 0)
        worker(lines.wr(), with_thread, extra_fd);
    return pid;
}

void kill_wait(pid_t pid) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
}

std::unique_ptr<ghost::Engine> user_engine() {
    return std::make_unique<ghost::UserEngine>();
}

std::string tmp_image(const char* name) {
    return std::string(::testing::TempDir()) + "ghost-user-" + name + "-" +
           std::to_string(::getpid()) + ".img";
}

// A temporary image file, open for reading and writing; closed and removed
// with it.
struct TmpImage {
    explicit TmpImage(const char* name)
        : path(tmp_image(name)),
          fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) {}
    ~TmpImage() {
        if (fd >= 0)
            ::close(fd);
        ::unlink(path.c_str());
    }
    TmpImage(const TmpImage&) = delete;
    TmpImage& operator=(const TmpImage&) = delete;
    std::string path;
    int fd;
};

// Forks a child that runs body(fd) and writes one byte to fd once ready;
// returns its pid after that byte (-1 if it never came).
pid_t spawn_ready(const std::function<void(int)>& body) {
    int p[2];
    if (::pipe(p) != 0)
        return -1;
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(p[0]);
        body(p[1]);
        ::_exit(0);
    }
    ::close(p[1]);
    char c = 0;
    const bool ready = pid > 0 && ::read(p[0], &c, 1) == 1;
    ::close(p[0]);
    if (pid > 0 && !ready) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
    }
    return ready ? pid : -1;
}

TEST(UserEngine, InfoSaysUserAndImageV1) {
    auto info = user_engine()->info();
    ASSERT_TRUE(info) << info.error().what();
    EXPECT_EQ(info->engine, "user");
    EXPECT_EQ(info->image_version, GHOST_IMAGE_VERSION);
    EXPECT_TRUE(info->features & GHOST_FEAT_EXPORT);
    EXPECT_TRUE(info->features & GHOST_FEAT_IMPORT);
}

// The acceptance scenario in-process: checkpoint (the worker is killed), then
// restart; the restored process counts on from the last count, with the
// same memory (sum), as a new child.
TEST(UserEngine, CheckpointKillRestartContinuesWithSameMemory) {
    Lines lines;
    const pid_t pid = spawn(lines);
    const Line first = lines.next();
    ASSERT_EQ(first.pid, pid);
    lines.next();

    auto engine = user_engine();
    TmpImage img("ckpt");
    const int fd = img.fd;
    ASSERT_GE(fd, 0);
    ghost::CheckpointOptions o;
    o.fate = ghost::Fate::Kill;
    auto st = ghost::checkpoint(*engine, pid, fd, o);
    ASSERT_TRUE(st) << st.error().what();
    EXPECT_GT(st->bytes, kBuf);
    int ws = 0;
    ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    lines.drain();
    const Line last = lines.last();

    ASSERT_EQ(::lseek(fd, 0, SEEK_SET), 0);
    // The image's pipe ends (the worker has both) are ours at the same
    // numbers, but close-on-exec: given explicitly (the restore stub is
    // exec'd, so only those reach it).
    ghost::RestartOptions ro;
    ro.inherit_fds = {{lines.rd(), lines.rd()}, {lines.wr(), lines.wr()}};
    auto child = ghost::restart(*engine, fd, ro);
    ASSERT_TRUE(child) << child.error().what();
    const Line after = lines.next();
    EXPECT_EQ(after.pid, *child);
    EXPECT_EQ(after.count, last.count + 1);
    EXPECT_EQ(after.sum, first.sum);
    const Line again = lines.next();
    EXPECT_EQ(again.count, last.count + 2);
    kill_wait(*child);
}

// A caller that names the start time it saw (migd: the process it checked
// the client's rights to) gets no export of another process that has the
// pid by then: ESRCH, nothing written, and the process at that pid goes on.
// A process refused for a descriptor it holds (epoll) is refused before
// it is seized: the seize interrupts its epoll_wait(), which returns EINTR
// to it rather than restart (it exits 7 then).
TEST(UserEngine, AProcessRefusedForItsDescriptorsIsNotDisturbed) {
    int ready[2];
    ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        const int ep = ::epoll_create1(EPOLL_CLOEXEC);
        if (ep < 0 || ::write(ready[1], "r", 1) != 1)
            ::_exit(2);
        ::close(ready[1]);
        for (;;) {
            epoll_event ev{};
            if (::epoll_wait(ep, &ev, 1, -1) < 0 && errno == EINTR)
                ::_exit(7);
        }
    }
    ::close(ready[1]);
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    ::usleep(100000); // in epoll_wait() by now
    auto g = user_engine()->create_memory();
    ASSERT_TRUE(g);
    auto st = (*g)->export_process(pid, ghost::Fate::Run);
    ASSERT_FALSE(st) << "an epoll descriptor was exported";
    EXPECT_EQ(st.error().code.value(), EOPNOTSUPP) << st.error().what();
    EXPECT_NE(std::string(st.error().what()).find("eventpoll"), std::string::npos)
        << st.error().what();
    ::usleep(200000);
    int ws = 0;
    EXPECT_EQ(::waitpid(pid, &ws, WNOHANG), 0) << "its epoll_wait() returned EINTR";
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
}

// "ERRNO REASON" of a user-engine export of pid run in a child, or "" if it
// had not answered in 20 s: an export that waited for the process would
// hold the test too, and the child can be killed (which lets go of it).
static std::string export_from_a_child(pid_t pid) {
    int rep[2];
    if (::pipe2(rep, O_CLOEXEC) != 0)
        return {};
    const pid_t exporter = ::fork();
    if (exporter == 0) {
        auto g = user_engine()->create_memory();
        auto st = g ? (*g)->export_process(pid, ghost::Fate::Run)
                    : ghost::Result<ghost::ExportStats>(g.error());
        const std::string r =
            st ? std::string("0 exported")
               : std::to_string(st.error().code.value()) + " " + st.error().what();
        (void)!::write(rep[1], r.data(), r.size());
        ::_exit(0);
    }
    ::close(rep[1]);
    pollfd p{rep[0], POLLIN, 0};
    const bool answered = ::poll(&p, 1, 20000) == 1;
    char buf[512] = {};
    const ssize_t n = answered ? ::read(rep[0], buf, sizeof(buf) - 1) : -1;
    ::close(rep[0]);
    kill_wait(exporter);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// A frozen process (a cgroup v1 freezer: its threads in D) stops for a
// tracer only once thawed, and a tracee that never stopped cannot be let
// go: the export would wait for it forever. It is refused at once, with
// its freezer named, and counts on once thawed.
TEST(UserEngine, AFrozenProcessIsRefusedNotWaitedFor) {
    const std::string cg = "/sys/fs/cgroup/freezer/ghost-test-" + std::to_string(::getpid());
    if (::mkdir(cg.c_str(), 0700) != 0)
        GTEST_SKIP() << "no cgroup v1 freezer to use: " << std::strerror(errno);
    const auto put = [&](const std::string& file, const std::string& what) {
        std::ofstream(cg + "/" + file) << what << std::endl;
    };
    Lines lines;
    const pid_t pid = spawn(lines);
    struct Cleanup {
        std::function<void()> f;
        ~Cleanup() { f(); }
    } cleanup{[&] {
        put("freezer.state", "THAWED");
        kill_wait(pid);
        ::rmdir(cg.c_str());
    }};
    ASSERT_EQ(lines.next().pid, pid);
    put("cgroup.procs", std::to_string(pid));
    put("freezer.state", "FROZEN");
    for (int i = 0; i < 250 && state_of(pid) != 'D'; i++)
        std::this_thread::sleep_for(20ms);
    ASSERT_EQ(state_of(pid), 'D') << "the worker was not frozen";
    const std::string r = export_from_a_child(pid);
    ASSERT_FALSE(r.empty()) << "the export waited for the frozen process";
    EXPECT_EQ(r.substr(0, r.find(' ')), std::to_string(EBUSY)) << r;
    EXPECT_NE(r.find("frozen (cgroup freezer /ghost-test-"), std::string::npos) << r;
    lines.drain(); // what it wrote before it was frozen
    const unsigned long before = lines.last().count;
    put("freezer.state", "THAWED");
    const Line a = lines.next();
    EXPECT_EQ(a.pid, pid) << "it does not run on once thawed";
    EXPECT_EQ(a.count, before + 1);
}

// The same in a frozen cgroup v2: the process sleeps (S) in the freezer's
// trap, where no ptrace stop comes either. A cgroup2 hierarchy is mounted
// for the test where none is (this host mounts only v1 controllers).
TEST(UserEngine, AProcessInAFrozenCgroupV2IsRefusedNotWaitedFor) {
    const std::string mnt = "/tmp/ghost-cg2-" + std::to_string(::getpid());
    const std::string cg = mnt + "/ghost-v2-test";
    ::mkdir(mnt.c_str(), 0700);
    if (::mount("none", mnt.c_str(), "cgroup2", 0, nullptr) != 0) {
        ::rmdir(mnt.c_str());
        GTEST_SKIP() << "cannot mount a cgroup2 hierarchy: " << std::strerror(errno);
    }
    const auto put = [&](const std::string& file, const std::string& what) {
        std::ofstream(cg + "/" + file) << what << std::endl;
    };
    Lines lines;
    const pid_t pid = spawn(lines);
    struct Cleanup {
        std::function<void()> f;
        ~Cleanup() { f(); }
    } cleanup{[&] {
        put("cgroup.freeze", "0");
        kill_wait(pid);
        ::rmdir(cg.c_str());
        ::umount(mnt.c_str());
        ::rmdir(mnt.c_str());
    }};
    ASSERT_EQ(::mkdir(cg.c_str(), 0700), 0) << std::strerror(errno);
    ASSERT_EQ(lines.next().pid, pid);
    put("cgroup.procs", std::to_string(pid));
    put("cgroup.freeze", "1");
    const auto frozen = [&] {
        std::ifstream in(cg + "/cgroup.events");
        for (std::string line; std::getline(in, line);)
            if (line == "frozen 1")
                return true;
        return false;
    };
    for (int i = 0; i < 250 && !frozen(); i++)
        std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(frozen()) << "the worker was not frozen";
    const std::string r = export_from_a_child(pid);
    ASSERT_FALSE(r.empty()) << "the export waited for the frozen process";
    EXPECT_EQ(r.substr(0, r.find(' ')), std::to_string(EBUSY)) << r;
    EXPECT_NE(r.find("frozen (cgroup freezer /ghost-v2-test)"), std::string::npos) << r;
    lines.drain();
    const unsigned long before = lines.last().count;
    put("cgroup.freeze", "0");
    const Line a = lines.next();
    EXPECT_EQ(a.pid, pid) << "it does not run on once thawed";
    EXPECT_EQ(a.count, before + 1);
}

TEST(UserEngine, ACheckpointOfAnotherStartTimeIsRefused) {
    Lines lines;
    const pid_t pid = spawn(lines);
    lines.next();
    const std::uint64_t started = testing_util::start_time_of(pid);
    ASSERT_NE(started, 0u);
    auto engine = user_engine();
    TmpImage img("other");
    const int fd = img.fd;
    ASSERT_GE(fd, 0);
    ghost::CheckpointOptions o;
    o.fate = ghost::Fate::Kill;
    o.starttime = started + 1; // as a process that had the pid before
    auto st = ghost::checkpoint(*engine, pid, fd, o);
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code.value(), ESRCH) << st.error().what();
    EXPECT_EQ(::lseek(fd, 0, SEEK_END), 0) << "something was written";
    const Line a = lines.next();
    EXPECT_EQ(a.pid, pid) << "the process does not run on";
    o.starttime = started;
    o.fate = ghost::Fate::Run;
    st = ghost::checkpoint(*engine, pid, fd, o);
    EXPECT_TRUE(st) << st.error().what();
    kill_wait(pid);
}

// A checkpoint that fails after its capture lets the process go on, whatever
// fate it asked: a Stop too (the process was not stopped before).
TEST(UserEngine, AFailedCommitLeavesAStopCheckpointsProcessRunning) {
    Lines lines;
    const pid_t pid = spawn(lines);
    lines.next();
    auto engine = user_engine();
    TmpImage img("failed-commit");
    ASSERT_GE(img.fd, 0);
    ghost::CheckpointOptions o;
    o.fate = ghost::Fate::Stop;
    o.commit = [] { return ghost::Result<void>(ghost::Error::from_errno(ENOSPC, "disk full")); };
    auto st = ghost::checkpoint(*engine, pid, img.fd, o);
    ASSERT_FALSE(st);
    lines.drain();
    const Line a = lines.next();
    EXPECT_EQ(a.pid, pid) << "the process was left stopped";
    kill_wait(pid);
}

// Idles after its ready byte (fd), with a file of that name mapped.
[[noreturn]] void map_and_idle(int fd, const std::string& name) {
    const int f = ::open(name.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (f < 0 || ::ftruncate(f, 4096) != 0 ||
        ::mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, f, 0) == MAP_FAILED)
        ::_exit(2);
    ::close(f);
    (void)!::write(fd, "r", 1);
    for (;;)
        ::pause();
}

// /proc/PID/maps shows a newline in a mapped file's name as "\012": the
// image has the name as it is (from map_files), not the escaped text, which
// names another file.
TEST(UserEngine, AMappedFileWithANewlineInItsNameKeepsItsName) {
    if (::geteuid() != 0)
        GTEST_SKIP() << "map_files needs CAP_CHECKPOINT_RESTORE";
    const std::string name =
        std::string(::testing::TempDir()) + "ghost-a\nb-" + std::to_string(::getpid());
    const pid_t pid = spawn_ready([&](int ready) { map_and_idle(ready, name); });
    ASSERT_GT(pid, 0);
    auto g = user_engine()->create_memory();
    ASSERT_TRUE(g);
    auto st = (*g)->export_process(pid, ghost::Fate::Run);
    ASSERT_TRUE(st) << st.error().what();
    auto view = (*g)->view();
    ASSERT_TRUE(view);
    auto img = ghost::image::read(view->bytes());
    ASSERT_TRUE(img) << img.error().what();
    bool found = false;
    for (const auto& v : img->vmas)
        found = found || v.path == name;
    EXPECT_TRUE(found) << "no mapping of the file by its name";
    kill_wait(pid);
    ::unlink(name.c_str());
}

// A descriptor whose file cannot be named (a path longer than PATH_MAX,
// made with mkdirat()/openat()) refuses the export; it was left out of the
// image.
TEST(UserEngine, ADescriptorThatCannotBeNamedRefusesTheExport) {
    const std::string top =
        std::string(::testing::TempDir()) + "ghost-deep-" + std::to_string(::getpid());
    ASSERT_EQ(::mkdir(top.c_str(), 0700), 0);
    const pid_t pid = spawn_ready([&](int ready) {
        int dir = ::open(top.c_str(), O_PATH | O_DIRECTORY);
        const std::string part(200, 'd');
        for (int i = 0; i < 30 && dir >= 0; i++) { // 6,000 characters deep
            if (::mkdirat(dir, part.c_str(), 0700) != 0)
                ::_exit(2);
            const int next = ::openat(dir, part.c_str(), O_PATH | O_DIRECTORY);
            ::close(dir);
            dir = next;
        }
        if (dir < 0 || ::openat(dir, "f", O_RDWR | O_CREAT, 0600) < 0)
            ::_exit(3);
        ::close(dir);
        (void)!::write(ready, "r", 1);
        for (;;)
            ::pause();
    });
    ASSERT_GT(pid, 0);
    auto g = user_engine()->create_memory();
    ASSERT_TRUE(g);
    auto st = (*g)->export_process(pid, ghost::Fate::Run);
    ASSERT_FALSE(st) << "exported without the descriptor";
    EXPECT_NE(st.error().what().find("cannot name the file of fd"), std::string::npos)
        << st.error().what();
    EXPECT_NE(state_of(pid), 'T');
    kill_wait(pid);
    // Deeper than PATH_MAX: rm walks it with openat(), std::filesystem not.
    EXPECT_EQ(std::system(("rm -rf '" + top + "'").c_str()), 0);
}

// A running export leaves the worker running, undisturbed.
TEST(UserEngine, RunFateLeavesTheProcessRunning) {
    Lines lines;
    const pid_t pid = spawn(lines);
    lines.next();
    auto engine = user_engine();
    auto g = engine->create_memory();
    ASSERT_TRUE(g);
    auto st = (*g)->export_process(pid, ghost::Fate::Run);
    ASSERT_TRUE(st) << st.error().what();
    auto view = (*g)->view();
    ASSERT_TRUE(view);
    auto img = ghost::image::read(view->bytes());
    ASSERT_TRUE(img) << img.error().what(); // the reader ghost.ko's images pass
    EXPECT_EQ(img->header.pid, pid);
    EXPECT_GE(img->pages(), kBuf / 4096);
    const auto got = lines.drain();
    const Line a = lines.next(), b = lines.next();
    EXPECT_EQ(a.pid, pid);
    EXPECT_EQ(b.count, a.count + 1);
    EXPECT_NE(state_of(pid), 'T');
    (void)got;
    kill_wait(pid);
}

TEST(UserEngine, StopFateLeavesTheProcessStopped) {
    Lines lines;
    const pid_t pid = spawn(lines);
    lines.next();
    auto g = user_engine()->create_memory();
    ASSERT_TRUE(g);
    auto st = (*g)->export_process(pid, ghost::Fate::Stop);
    ASSERT_TRUE(st) << st.error().what();
    int ws = 0;
    ASSERT_EQ(::waitpid(pid, &ws, WUNTRACED), pid);
    EXPECT_TRUE(WIFSTOPPED(ws));
    lines.drain();
    ::kill(pid, SIGCONT);
    EXPECT_EQ(lines.next().pid, pid);
    kill_wait(pid);
}

// A Kill that does not wait (migd's commit) leaves the teardown to idle CPU
// time: the process dies at SCHED_IDLE (proc(5) stat field 41, 5), which a
// zombie still shows.
TEST(UserEngine, KillWithoutWaitingTearsDownAtIdlePriority) {
    Lines lines;
    const pid_t pid = spawn(lines);
    lines.next();
    auto engine = user_engine();
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    ASSERT_GE(null, 0);
    ghost::CheckpointOptions o;
    o.fate = ghost::Fate::Kill;
    o.wait_for_exit = false;
    auto st = ghost::checkpoint(*engine, pid, null, o);
    ::close(null);
    ASSERT_TRUE(st) << st.error().what();
    siginfo_t si{};
    ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOWAIT), 0);
    EXPECT_EQ(si.si_code, CLD_KILLED);
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::vector<std::string> f{"pid", "comm"};
    for (std::string x; fields >> x;)
        f.push_back(x);
    ASSERT_GT(f.size(), 40U) << text;
    EXPECT_EQ(f[40], "5") << "policy of the killed process (field 41)";
    ::waitpid(pid, nullptr, 0);
}

// dup: a second process from the first one's image, both running on.
TEST(UserEngine, DuplicateGivesAnIndependentCopy) {
    Lines lines;
    const pid_t pid = spawn(lines);
    const Line first = lines.next();
    auto engine = user_engine();
    auto copy = ghost::duplicate(*engine, pid);
    ASSERT_TRUE(copy) << copy.error().what();
    ASSERT_NE(*copy, pid);
    std::set<pid_t> seen;
    for (int i = 0; i < 20 && seen.size() < 2; i++) {
        const Line l = lines.next();
        EXPECT_EQ(l.sum, first.sum);
        seen.insert(l.pid);
    }
    EXPECT_EQ(seen, (std::set<pid_t>{pid, *copy}));
    kill_wait(pid); // the copy does not depend on the original
    lines.drain();
    EXPECT_EQ(lines.next().pid, *copy);
    kill_wait(*copy);
}

// Descriptors at the numbers the restore stub takes for itself (512 up:
// restart()'s status pipe) come back as they were, and restart() returns
// only once the process runs as the image, released by the restorer: not
// when the stub's own copy of the status pipe closes among the caller's
// descriptors, with the process's locks, name and tracer still to come.
TEST(UserEngine, DescriptorsAtTheStubsNumbersComeBackAndRestartWaitsForTheRelease) {
    TmpImage a("fd512"), b("fd700");
    ASSERT_EQ(::write(a.fd, "a", 1), 1);
    Lines lines;
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (::dup2(a.fd, 512) != 512 || ::dup2(b.fd, 700) != 700)
            ::_exit(4);
        // A POSIX lock: the restorer takes it after the descriptors.
        struct flock fl {};
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        fl.l_len = 1;
        if (::fcntl(512, F_SETLK, &fl) != 0)
            ::_exit(5);
        ::prctl(PR_SET_NAME, "fd-worker");
        worker(lines.wr());
    }
    ASSERT_EQ(lines.next().pid, pid);
    auto engine = user_engine();
    TmpImage img("fds");
    ghost::CheckpointOptions o;
    o.fate = ghost::Fate::Kill;
    auto st = ghost::checkpoint(*engine, pid, img.fd, o);
    ASSERT_TRUE(st) << st.error().what();
    ::waitpid(pid, nullptr, 0);
    lines.drain();
    const Line last = lines.last();

    ASSERT_EQ(::lseek(img.fd, 0, SEEK_SET), 0);
    ghost::RestartOptions ro;
    ro.inherit_fds = {{lines.rd(), lines.rd()}, {lines.wr(), lines.wr()}};
    auto child = ghost::restart(*engine, img.fd, ro);
    ASSERT_TRUE(child) << child.error().what();
    // At once, without waiting: released and whole.
    const std::string proc = "/proc/" + std::to_string(*child);
    auto text = [](const std::string& path) {
        std::ifstream in(path);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string status = text(proc + "/status");
    EXPECT_NE(status.find("\nTracerPid:\t0\n"), std::string::npos) << status;
    EXPECT_EQ(text(proc + "/comm"), "fd-worker\n");
    struct flock probe {};
    probe.l_type = F_WRLCK;
    probe.l_whence = SEEK_SET;
    probe.l_len = 1;
    ASSERT_EQ(::fcntl(a.fd, F_OFD_GETLK, &probe), 0);
    EXPECT_EQ(probe.l_type, F_WRLCK) << "the restored process holds its lock";
    auto target = [&](int fd) {
        char buf[4096];
        const ssize_t n =
            ::readlink((proc + "/fd/" + std::to_string(fd)).c_str(), buf, sizeof(buf));
        return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("?");
    };
    EXPECT_EQ(target(512), a.path);
    EXPECT_EQ(target(700), b.path);
    const Line after = lines.next();
    EXPECT_EQ(after.pid, *child);
    EXPECT_EQ(after.count, last.count + 1);
    kill_wait(*child);
}

// State out of scope: refused with EOPNOTSUPP and a reason, the process left
// running.
TEST(UserEngine, RefusesASocketAndLeavesTheProcessRunning) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    Lines lines;
    const pid_t pid = spawn(lines);
    ::close(sv[0]);
    ::close(sv[1]);
    lines.next();
    auto g = user_engine()->create_memory();
    auto st = (*g)->export_process(pid, ghost::Fate::Kill);
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code.value(), EOPNOTSUPP);
    EXPECT_NE(st.error().what().find("socket"), std::string::npos) << st.error().what();
    lines.drain();
    const Line a = lines.next(), b = lines.next();
    EXPECT_EQ(a.pid, pid);
    EXPECT_EQ(b.count, a.count + 1);
    kill_wait(pid);
}

std::string fmt_sharing(int flag, bool sharer_is_parent) {
    return std::string(flag == CLONE_VM ? "CLONE_VM" : "CLONE_FILES") +
           (sharer_is_parent ? ", shared with its parent" : ", shared with its sibling");
}

int pause_forever(void*) {
    for (;;)
        ::pause();
}

// Clones pause_forever() with flags on a stack of its own; its pid.
pid_t clone_pausing(int flags) {
    static std::vector<char> stack(256 << 10);
    return ::clone(pause_forever, stack.data() + stack.size(), flags | SIGCHLD, nullptr);
}

// A process that shares its memory or its descriptor table with another
// (clone(CLONE_VM or CLONE_FILES) without CLONE_THREAD) is refused as
// ghost.ko refuses it, and left running: the other would change them
// while the image is read, and a restored copy would share nothing. The
// sharer is its sibling (CLONE_PARENT) or its parent.
TEST(UserEngine, AProcessSharingItsMemoryOrDescriptorsWithAnotherIsRefused) {
    for (const int flag : {CLONE_VM, CLONE_FILES}) {
        for (const bool sharer_is_parent : {false, true}) {
            SCOPED_TRACE(fmt_sharing(flag, sharer_is_parent));
            int p[2];
            ASSERT_EQ(::pipe(p), 0);
            // [target, sharer], sent by the first process once both run.
            const pid_t first = ::fork();
            if (first == 0) {
                pid_t pids[2];
                if (sharer_is_parent) {
                    pids[0] = clone_pausing(flag); // the target: our child
                    pids[1] = ::getpid();
                } else {
                    pids[0] = ::getpid();
                    pids[1] = clone_pausing(flag | CLONE_PARENT); // our sibling
                }
                if (::write(p[1], pids, sizeof(pids)) != sizeof(pids))
                    ::_exit(1);
                for (;;)
                    ::pause();
            }
            ::close(p[1]);
            pid_t pids[2] = {-1, -1};
            const bool told = ::read(p[0], pids, sizeof(pids)) == sizeof(pids);
            ::close(p[0]);
            // Whatever happens below: all of them killed (a sharer through
            // CLONE_PARENT is our child too), none left holding our output.
            struct Reap {
                pid_t first;
                const pid_t* pids;
                bool sibling;
                ~Reap() {
                    for (const pid_t pid : {pids[0], pids[1], first})
                        if (pid > 0)
                            ::kill(pid, SIGKILL);
                    ::waitpid(first, nullptr, __WALL);
                    if (sibling && pids[1] > 0)
                        ::waitpid(pids[1], nullptr, __WALL);
                }
            } reap{first, pids, !sharer_is_parent};
            ASSERT_TRUE(told && pids[0] > 0 && pids[1] > 0);
            auto g = user_engine()->create_memory();
            auto st = (*g)->export_process(pids[0], ghost::Fate::Kill);
            ASSERT_FALSE(st) << "exported";
            EXPECT_EQ(st.error().code.value(), EOPNOTSUPP) << st.error().what();
            const std::string words =
                flag == CLONE_VM
                    ? "shares its memory with another process (clone(CLONE_VM))"
                    : "shares its descriptor table with another process (clone(CLONE_FILES))";
            EXPECT_NE(st.error().what().find(words), std::string::npos) << st.error().what();
            EXPECT_EQ(::kill(pids[0], 0), 0) << "a refused export must leave the process alive";
            const char state = state_of(pids[0]);
            EXPECT_TRUE(state == 'S' || state == 'R') << "left in state " << state;
        }
    }
}

TEST(UserEngine, RefusesAMultiThreadedProcess) {
    Lines lines;
    const pid_t pid = spawn(lines, true);
    lines.next();
    auto g = user_engine()->create_memory();
    auto st = (*g)->export_process(pid, ghost::Fate::Kill);
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code.value(), EOPNOTSUPP);
    EXPECT_NE(st.error().what().find("threads"), std::string::npos) << st.error().what();
    lines.drain();
    EXPECT_EQ(lines.next().pid, pid);
    kill_wait(pid);
}

// Root without CAP_SYS_RESOURCE (as in many containers) exporting another
// user's process: prlimit(2) on it is refused, /proc/PID/limits is not. The
// image must hold the target's own limits.
TEST(UserEngine, RootWithoutCapSysResourceReadsAnotherUsersLimits) {
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root";
    Lines lines;
    const pid_t pid = ::fork();
    if (pid == 0) {
        const rlimit nofile{100, 200};
        if (::setrlimit(RLIMIT_NOFILE, &nofile) || ::setresgid(65534, 65534, 65534) ||
            ::setresuid(65534, 65534, 65534))
            ::_exit(4);
        worker(lines.wr());
    }
    ASSERT_NE(lines.next().pid, 0);
    const pid_t exporter = ::fork();
    if (exporter == 0) {
        __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct caps[2]{};
        if (::syscall(SYS_capget, &hdr, caps))
            ::_exit(10);
        for (auto& c : caps) {
            c.effective &= c.permitted;
            c.inheritable = 0;
        }
        caps[CAP_SYS_RESOURCE / 32].effective &= ~(1U << (CAP_SYS_RESOURCE % 32));
        caps[CAP_SYS_RESOURCE / 32].permitted &= ~(1U << (CAP_SYS_RESOURCE % 32));
        if (::syscall(SYS_capset, &hdr, caps))
            ::_exit(11);
        rlimit rl{};
        if (::prlimit(pid, RLIMIT_NOFILE, nullptr, &rl) == 0 || errno != EPERM)
            ::_exit(12); // the situation of the test is not made
        auto g = user_engine()->create_memory();
        if (!g)
            ::_exit(13);
        auto st = (*g)->export_process(pid, ghost::Fate::Run);
        if (!st) {
            std::fprintf(stderr, "export: %s\n", st.error().what().c_str());
            ::_exit(14);
        }
        auto view = (*g)->view();
        if (!view)
            ::_exit(15);
        auto img = ghost::image::read(view->bytes());
        if (!img)
            ::_exit(15);
        const auto& l = img->rlimits.rlim[RLIMIT_NOFILE];
        ::_exit(l.cur == 100 && l.max == 200 ? 0 : 16);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(exporter, &status, 0), exporter);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exporter status " << status;
    lines.drain();
    EXPECT_EQ(lines.next().pid, pid); // left running
    kill_wait(pid);
}

TEST(UserEngine, RefusesToExportItselfOrNothing) {
    auto g = user_engine()->create_memory();
    auto self = (*g)->export_process(::getpid(), ghost::Fate::Run);
    ASSERT_FALSE(self);
    EXPECT_EQ(self.error().code.value(), EINVAL);
    auto none = (*g)->export_process(0x3ffffff, ghost::Fate::Run);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().code.value(), ESRCH);
}

// Imports that cannot be done come back as errors, with the caller alive and
// able to go on: one refused before the tracer starts (a mapped file is
// gone), one refused by the tracer after it seized the caller (the vDSO is
// not this kernel's), which must then put the caller back.
class BadImport : public ::testing::Test {
  protected:
    void SetUp() override {
        const pid_t pid = spawn(lines_);
        lines_.next();
        auto g = user_engine()->create_memory();
        ASSERT_TRUE(g);
        auto st = (*g)->export_process(pid, ghost::Fate::Kill);
        ASSERT_TRUE(st) << st.error().what();
        kill_wait(pid);
        auto view = (*g)->view();
        ASSERT_TRUE(view);
        bytes_.assign(view->bytes().begin(), view->bytes().end());
        auto img = ghost::image::read(bytes_);
        ASSERT_TRUE(img) << img.error().what();
        img_ = std::move(*img);
    }

    // Imports the mutated image in a forked child that reports, by its exit
    // status, whether it got the expected error back and still runs.
    void expect_refused(int expected_errno, const std::string& words,
                        const ghost::RestoreOptions& opts = {},
                        const std::function<void()>& before = {}) {
        auto bytes = ghost::image::encode(
            img_, [&](const ghost::image::Vma&, const ghost::image::PageRun& r) {
                return std::span<const std::byte>(bytes_).subspan(r.data_offset, r.nr_pages * 4096);
            });
        int p[2];
        ASSERT_EQ(::pipe(p), 0);
        const pid_t child = ::fork();
        if (child == 0) {
            ::close(p[0]);
            auto g = ghost::UserEngine().create_memory();
            if (!g || !(*g)->write(bytes))
                ::_exit(2);
            if (before)
                before();
            const ghost::Error e = (*g)->restore_self(opts);
            const std::string msg = e.what();
            (void)!::write(p[1], msg.data(), msg.size());
            ::_exit(e.code.value() == expected_errno ? 42 : 1);
        }
        ::close(p[1]);
        const std::string msg = testing_util::slurp(p[0]);
        ::close(p[0]);
        int ws = 0;
        ASSERT_EQ(::waitpid(child, &ws, 0), child);
        ASSERT_TRUE(WIFEXITED(ws)) << "the importer died: " << msg;
        EXPECT_EQ(WEXITSTATUS(ws), 42) << msg;
        EXPECT_NE(msg.find(words), std::string::npos) << msg;
    }

    Lines lines_; // open in the importer too: the image inherits its pipe
    std::vector<std::byte> bytes_;
    ghost::image::Image img_;
};

TEST_F(BadImport, MissingMappedFileIsRefusedBeforeTheTracer) {
    for (auto& v : img_.vmas)
        if (v.rec.flags & GHOST_VMA_FILE) {
            v.path = "/nonexistent/ghost-lib.so";
            v.rec.path_len = static_cast<std::uint32_t>(v.path.size());
            break;
        }
    expect_refused(ENOENT, "cannot open /nonexistent/ghost-lib.so");
}

// More memory than the importer's soft limits let it map is refused before
// the point of no return, the importer alive, as ghost.ko refuses it (the
// image's own limits are set only after its memory is made, and a mapping
// refused then would kill the importer).
TEST_F(BadImport, MemoryAboveTheImportersSoftDataLimitIsRefused) {
    ghost::image::Vma big;
    big.rec.start = 0x200000000000ULL; // far from the rest
    big.rec.end = big.rec.start + (1ULL << 30);
    big.rec.prot = PROT_READ | PROT_WRITE;
    const auto at = std::find_if(img_.vmas.begin(), img_.vmas.end(),
                                 [&](const auto& v) { return v.rec.start > big.rec.start; });
    img_.vmas.insert(at, big);
    img_.mm.nr_vmas = static_cast<std::uint32_t>(img_.vmas.size());
    expect_refused(ENOMEM, "above the caller's RLIMIT_DATA", {}, [] {
        rlimit r{};
        ::getrlimit(RLIMIT_DATA, &r);
        r.rlim_cur = 512ULL << 20;
        if (::setrlimit(RLIMIT_DATA, &r) != 0)
            ::_exit(3);
    });
}

// More mappings than vm.max_map_count admits here (the source's limit may
// have been higher) are refused before the point of no return: the mmap()
// that went past it would have failed with the caller's memory gone, as
// ghost.ko's vm_mmap() would.
TEST_F(BadImport, MoreMappingsThanVmMaxMapCountAreRefused) {
    std::uint64_t limit = 0;
    {
        std::ifstream in("/proc/sys/vm/max_map_count");
        in >> limit;
    }
    ASSERT_GT(limit, 0u);
    if (limit + 1 > GHOST_MAX_VMAS)
        GTEST_SKIP() << "vm.max_map_count is " << limit << ": no image has more mappings";
    // Pages of their own, a page apart, far from the rest.
    std::vector<ghost::image::Vma> extra(limit + 1 - img_.vmas.size());
    std::uint64_t at = 0x300000000000ULL;
    for (auto& v : extra) {
        v.rec.start = at;
        v.rec.end = at + 4096;
        v.rec.prot = PROT_READ;
        at += 2 * 4096;
    }
    const auto pos = std::find_if(img_.vmas.begin(), img_.vmas.end(),
                                  [&](const auto& v) { return v.rec.start > extra[0].rec.start; });
    img_.vmas.insert(pos, extra.begin(), extra.end());
    img_.mm.nr_vmas = static_cast<std::uint32_t>(img_.vmas.size());
    expect_refused(ENOMEM, "the image has " + std::to_string(limit + 1) +
                               " mappings, more than vm.max_map_count (" + std::to_string(limit) +
                               ") allows here");
}

// Under vm.overcommit_memory 0 one private writable mapping larger than this
// host's memory and swap together cannot be made (a source with more, or
// with overcommit 1, could hold it): refused before the point of no return,
// not by the mmap() after it.
TEST_F(BadImport, AMappingLargerThanMemoryAndSwapIsRefusedUnderOvercommitZero) {
    std::string mode;
    {
        std::ifstream in("/proc/sys/vm/overcommit_memory");
        in >> mode;
    }
    if (mode != "0")
        GTEST_SKIP() << "vm.overcommit_memory is " << mode << ", not the heuristic";
    std::uint64_t kib = 0;
    {
        std::ifstream in("/proc/meminfo");
        for (std::string line; std::getline(in, line);) {
            std::istringstream f(line);
            std::string key;
            std::uint64_t n = 0;
            if (f >> key >> n && (key == "MemTotal:" || key == "SwapTotal:"))
                kib += n;
        }
    }
    ASSERT_GT(kib, 0u);
    ghost::image::Vma big;
    big.rec.start = 0x200000000000ULL; // far from the rest
    big.rec.end = big.rec.start + ((kib + (1ULL << 20)) << 10);
    big.rec.prot = PROT_READ | PROT_WRITE;
    const auto at = std::find_if(img_.vmas.begin(), img_.vmas.end(),
                                 [&](const auto& v) { return v.rec.start > big.rec.start; });
    img_.vmas.insert(at, big);
    img_.mm.nr_vmas = static_cast<std::uint32_t>(img_.vmas.size());
    expect_refused(ENOMEM,
                   "mapping at 0x200000000000 (" + std::to_string(kib + (1ULL << 20)) +
                       " KiB) exceeds RAM+swap (" + std::to_string(kib) +
                       " KiB), vm.overcommit_memory 0",
                   {}, [] {
                       for (const int r : {RLIMIT_AS, RLIMIT_DATA}) {
                           rlimit l{};
                           ::getrlimit(r, &l);
                           l.rlim_cur = l.rlim_max; // the limits are not what is tested
                           (void)::setrlimit(r, &l);
                       }
                   });
}

// A mapping whose path is a FIFO now: refused at once (its open waited for
// a writer for ever, and a FIFO cannot be mapped anyway).
TEST_F(BadImport, AMappedPathThatIsAFifoIsRefusedWithoutWaiting) {
    const std::string fifo = "/tmp/ghost-fifo-lib." + std::to_string(::getpid());
    ::unlink(fifo.c_str());
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    for (auto& v : img_.vmas)
        if (v.rec.flags & GHOST_VMA_FILE) {
            v.path = fifo;
            v.rec.path_len = static_cast<std::uint32_t>(v.path.size());
            break;
        }
    expect_refused(EINVAL, "is not a file that can be mapped");
    ::unlink(fifo.c_str());
}

// An image restored for an owner (RestoreOptions::owner, as migd restores
// a user's image as root) that runs as another user is refused before any
// file it names is opened: its missing library is never looked for.
TEST_F(BadImport, AnotherOwnersImageIsRefusedBeforeItsFilesAreOpened) {
    ASSERT_TRUE(img_.creds);
    for (auto& v : img_.vmas)
        if (v.rec.flags & GHOST_VMA_FILE) {
            v.path = "/nonexistent/ghost-lib.so";
            v.rec.path_len = static_cast<std::uint32_t>(v.path.size());
            break;
        }
    ghost::RestoreOptions o;
    o.owner = ghost::Owner{img_.creds->uid + 1, img_.creds->gid, img_.groups};
    expect_refused(EPERM, "not all uid " + std::to_string(o.owner->uid), o);
    o.owner->uid = img_.creds->uid; // the owner's own: on to the missing file
    expect_refused(ENOENT, "cannot open /nonexistent/ghost-lib.so", o);
}

// For an owner, an image without credentials (it would run as whoever
// restores it: root, in migd), a set-group-id one, and one with a gid or a
// group its user does not have here are refused (as nobody, whose only
// group here is 65534: root restores it, as migd does, with the
// CAP_SETGID that would let it take any group).
TEST_F(BadImport, AnImageWithoutCredentialsOrGroupsBeyondItsOwnersIsRefused) {
    ASSERT_TRUE(img_.creds);
    ghost::RestoreOptions o;
    o.owner = ghost::Owner{65534, 65534, {65534}};
    auto& c = *img_.creds;
    c.uid = c.euid = c.suid = c.fsuid = 65534;
    c.gid = c.egid = c.sgid = c.fsgid = 0;
    c.cap_permitted = c.cap_effective = c.cap_inheritable = c.cap_ambient = 0;
    img_.groups.clear();
    c.ngroups = 0;
    expect_refused(EPERM, "gid 0, which is not among uid 65534's groups here", o);
    c.gid = c.egid = c.sgid = c.fsgid = 65534;
    img_.groups = {65534, 6};
    c.ngroups = 2;
    expect_refused(EPERM, "supplementary group 6, which is not among uid 65534's groups", o);
    img_.groups.clear();
    c.ngroups = 0;
    c.egid = c.fsgid = 6;
    expect_refused(EPERM, "a set-group-id process is refused", o);
    img_.creds.reset();
    img_.groups.clear();
    img_.header.features &= ~static_cast<std::uint64_t>(GHOST_IMAGE_FEAT_CREDS);
    img_.header.required_features &= ~static_cast<std::uint64_t>(GHOST_IMAGE_FEAT_CREDS);
    expect_refused(EPERM, "has no credentials section", o);
}

// Copies of pages of a private file mapping past the end of the file as it
// is now (a library's written data pages, the mapping pointed at a file of
// one byte): no restore could place them, so the import is refused before
// the tracer with a reason; the kernel engine has the same rule
// (ghost_pages_within_file()).
TEST_F(BadImport, PagesPastTheEndOfAShortenedFileAreRefusedBeforeTheTracer) {
    char path[] = "/tmp/ghost-short-lib.XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "x", 1), 1);
    ::close(fd);
    bool found = false;
    for (auto& v : img_.vmas)
        if ((v.rec.flags & GHOST_VMA_FILE) && !(v.rec.flags & GHOST_VMA_SHARED) &&
            !v.runs.empty() &&
            v.runs.back().addr + v.runs.back().nr_pages * 4096 > v.rec.start + 4096) {
            v.path = path;
            v.rec.path_len = static_cast<std::uint32_t>(v.path.size());
            found = true;
            break;
        }
    ASSERT_TRUE(found) << "no private file mapping with page copies past its first page";
    expect_refused(ESTALE, "grow it back");
    ::unlink(path);
}

// An inherited descriptor at a number the restorer keeps its own at (from
// high_fd_base, 512, up: the image, the status pipe) is refused: the
// restored process would hold the restorer's descriptor.
TEST_F(BadImport, AnInheritedDescriptorAmongTheRestorersOwnIsRefused) {
    std::uint64_t last_id = 0;
    for (const auto& f : img_.files)
        last_id = std::max<std::uint64_t>(last_id, f.rec.file_id);
    ghost::image::File f;
    f.path = "pipe:[1]";
    f.rec.fd = 600;
    f.rec.kind = GHOST_FILE_INHERIT;
    f.rec.mode = S_IFIFO;
    f.rec.file_id = last_id + 1;
    f.rec.path_len = static_cast<std::uint32_t>(f.path.size());
    ASSERT_TRUE(img_.files.empty() || img_.files.back().rec.fd < 600);
    img_.files.push_back(f);
    expect_refused(EBADF, "are the restorer's own");
}

// Another kernel's vDSO of the same size: only the recorded crc32c tells.
TEST_F(BadImport, ForeignVdsoIsRefusedAndTheCallerPutBack) {
    ASSERT_TRUE(img_.header.features & GHOST_IMAGE_FEAT_VDSO_ID);
    ASSERT_NE(img_.mm.vdso_size, 0u);
    const auto ours = img_.mm.vdso_crc32c;
    img_.mm.vdso_crc32c ^= 1;
    char why[GHOST_REASON_LEN];
    std::snprintf(why, sizeof(why), GHOST_VDSO_MISMATCH_REASON, img_.mm.vdso_size,
                  img_.mm.vdso_crc32c, img_.mm.vdso_size, ours);
    expect_refused(EOPNOTSUPP, why);
}

// A version-1 image has no vDSO record: its size is all there is to check.
TEST_F(BadImport, ForeignVdsoOfAVersion1ImageIsRefusedBySize) {
    img_.header.version = 1;
    img_.header.features = img_.header.required_features = 0;
    img_.mm.vdso_size = img_.mm.vdso_crc32c = 0;
    img_.creds.reset(); // no CREDS in version 1
    img_.groups.clear();
    img_.attrs.reset(); // version 1 has no ATTRS section
    bool found = false;
    for (auto& f : img_.files) // version 1 names the shared descriptor in pos
        if (f.rec.kind == GHOST_FILE_DUP)
            for (const auto& e : img_.files)
                if (e.rec.file_id == f.rec.file_id && e.rec.kind != GHOST_FILE_DUP)
                    f.rec.pos = static_cast<std::uint64_t>(e.rec.fd);
    for (auto& f : img_.files)
        f.rec.file_id = 0;
    for (auto& v : img_.vmas) // nor mapping attributes
        v.rec.flags &= ~static_cast<std::uint32_t>(GHOST_VMA_ATTRS);
    for (auto& v : img_.vmas)
        if (v.rec.flags & GHOST_VMA_VDSO) {
            v.rec.end -= 4096; // another kernel's, smaller vDSO
            found = true;
        }
    ASSERT_TRUE(found);
    expect_refused(EOPNOTSUPP, "vDSO");
}

// ghostctl on the host, as a user would: no module, so auto is the user
// engine; a counter is checkpointed (and killed), restarted (lazily: with
// --lazy), and counts on.
void counter_continues(bool lazy) {
    const std::string dir = std::string(::testing::TempDir());
    const std::string log = dir + "ghost-cli-counter-" + std::to_string(::getpid()) + ".log";
    const std::string img = dir + "ghost-cli-counter-" + std::to_string(::getpid()) + ".img";
    const pid_t pid = ::fork();
    if (pid == 0) {
        // No inherited pipes (the restored counter would keep ghostctl's).
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 0);
        ::dup2(fd, 1);
        ::dup2(null, 2);
        ::execl(COUNTER_PATH, COUNTER_PATH, "20", nullptr);
        ::_exit(127);
    }
    std::this_thread::sleep_for(300ms);
    auto ck = testing_util::run({GHOSTCTL_PATH, "checkpoint", std::to_string(pid), "-o", img});
    ASSERT_EQ(ck.status, 0) << ck.err;
    int ws = 0;
    ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(ws));
    auto count_lines = [&] {
        std::ifstream f(log);
        std::string line, last;
        while (std::getline(f, line))
            last = line;
        return last;
    };
    const std::string last = count_lines();
    ASSERT_FALSE(last.empty());
    const unsigned long n = std::stoul(last);
    std::vector<std::string> restart = {GHOSTCTL_PATH, "restart", "--detach", img};
    if (lazy)
        restart.push_back("--lazy");
    auto rs = testing_util::run(restart);
    ASSERT_EQ(rs.status, 0) << rs.err;
    const pid_t restored = std::stoi(rs.out);
    std::this_thread::sleep_for(300ms);
    // The restored counter appends after the checkpointed output, counting on.
    std::ifstream f(log);
    std::string line;
    std::vector<unsigned long> seen;
    while (std::getline(f, line))
        seen.push_back(std::stoul(line));
    ::kill(restored, SIGKILL);
    ASSERT_GT(seen.size(), 2u);
    bool continued = false;
    for (std::size_t i = 1; i < seen.size(); i++)
        if (seen[i - 1] == n && seen[i] == n + 1)
            continued = true;
    EXPECT_TRUE(continued) << "last count before: " << n;
    ::unlink(img.c_str());
    ::unlink(log.c_str());
}

TEST(UserEngineCli, GhostctlCheckpointRestartContinuesTheCounter) {
    counter_continues(false);
}

TEST(UserEngineCli, GhostctlLazyRestartContinuesTheCounter) {
    if (::geteuid() != 0)
        GTEST_SKIP() << "a lazy restart needs root";
    counter_continues(true);
}

TEST(UserEngineCli, GhostctlLazyRestartRefusesWhatItCannotReadInPlace) {
    auto o = testing_util::run({GHOSTCTL_PATH, "restart", "--lazy", "-"});
    EXPECT_EQ(o.status, 2);
    EXPECT_NE(o.err.find("give a file"), std::string::npos) << o.err;
    o = testing_util::run({GHOSTCTL_PATH, "restart", "--lazy", "--server", "h1", "x"});
    EXPECT_EQ(o.status, 2);
    EXPECT_NE(o.err.find("checkpoint server"), std::string::npos) << o.err;
}

// Reads what arrives on fd for up to total_ms (less at EOF).
std::string drain(int fd, int total_ms) {
    std::string got;
    char buf[4096];
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(total_ms);
    for (auto now = std::chrono::steady_clock::now(); now < end;
         now = std::chrono::steady_clock::now()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - now);
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count()) + 1) != 1)
            break;
        const ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        got.append(buf, static_cast<std::size_t>(n));
    }
    return got;
}

// The first number of each "N pid=P" line.
std::vector<unsigned long> counts(const std::string& text) {
    std::vector<unsigned long> v;
    std::size_t at = 0;
    while (at < text.size()) {
        const auto nl = text.find('\n', at);
        if (nl == std::string::npos)
            break;
        v.push_back(std::stoul(text.substr(at, nl - at)));
        at = nl + 1;
    }
    return v;
}

// A counter writing into a pipe: the checkpoint names the pipe as a
// descriptor the restart must be given, and restart --inherit-fd 1:M gives
// it another pipe, where the count goes on.
TEST(UserEngineCli, CheckpointNamesInheritedFdsAndRestartInheritFdSuppliesThem) {
    const std::string img = std::string(::testing::TempDir()) + "ghost-cli-inherit-" +
                            std::to_string(::getpid()) + ".img";
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 0);
        ::dup2(p[1], 1);
        ::dup2(null, 2);
        ::execl(COUNTER_PATH, COUNTER_PATH, "20", nullptr);
        ::_exit(127);
    }
    ::close(p[1]);
    std::this_thread::sleep_for(300ms);
    auto ck = testing_util::run({GHOSTCTL_PATH, "checkpoint", std::to_string(pid), "-o", img});
    ASSERT_EQ(ck.status, 0) << ck.err;
    EXPECT_NE(ck.err.find("fd 1 (pipe:["), std::string::npos) << ck.err;
    EXPECT_NE(ck.err.find("--inherit-fd"), std::string::npos) << ck.err;
    int ws = 0;
    ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
    const auto before = counts(drain(p[0], 1000));
    ::close(p[0]);
    ASSERT_FALSE(before.empty());

    // A number that is not open is refused, naming it; so is a bad spec.
    auto bad = testing_util::run({GHOSTCTL_PATH, "restart", "--inherit-fd", "1:777", img});
    EXPECT_EQ(bad.status, 1);
    EXPECT_NE(bad.err.find("fd 777"), std::string::npos) << bad.err;
    bad = testing_util::run({GHOSTCTL_PATH, "restart", "--inherit-fd", "1:x", img});
    EXPECT_EQ(bad.status, 1);
    EXPECT_NE(bad.err.find("N:M"), std::string::npos) << bad.err;

    int q[2];
    ASSERT_EQ(::pipe2(q, O_CLOEXEC), 0);
    ASSERT_EQ(::dup2(q[1], 50), 50); // inherited by ghostctl (no CLOEXEC)
    ::close(q[1]);
    auto rs =
        testing_util::run({GHOSTCTL_PATH, "restart", "--detach", "--inherit-fd", "1:50", img});
    ::close(50);
    ASSERT_EQ(rs.status, 0) << rs.err;
    const pid_t restored = std::stoi(rs.out);
    const auto after = counts(drain(q[0], 1000));
    ::kill(restored, SIGKILL);
    ::close(q[0]);
    ASSERT_FALSE(after.empty()) << "nothing arrived on the pipe given with --inherit-fd";
    EXPECT_EQ(after.front(), before.back() + 1);
    ::unlink(img.c_str());
}

} // namespace
