// SPDX-License-Identifier: GPL-2.0
// Lazy restart (user engine, natively; RestartOptions::lazy): the restored
// process runs while its pager still puts its memory in, and whatever it
// does meanwhile (reads every page, drops pages, unmaps, moves a mapping,
// forks) it sees the image's memory, never a page of zeros where the image
// had data nor the image's data where it dropped a page. The image file may
// be replaced or written while that goes on without reaching the process.
// The pager is slowed (GHOST_LAZY_PACE_US) so that most of the worker's
// 32 MiB are still pending when it starts.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ghost/engine.hpp"
#include "ghost/image.hpp"
#include "ghost/process.hpp"
#include "ghost/user_engine.hpp"

#include "mutating_worker.hpp"

namespace {

class Lazy : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0)
            GTEST_SKIP() << "a lazy restart needs root (userfaultfd's fork events)";
        dir_ = std::string(::testing::TempDir()) + "ghost-lazy-" + std::to_string(::getpid()) +
               "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
        std::filesystem::create_directories(dir_ + "/state");
        ::setenv("GHOST_STATE_DIR", (dir_ + "/state").c_str(), 1);
        ::setenv("GHOST_LAZY_PACE_US", "40000", 1); // 1 MiB per 40 ms: 32 MiB in 1.3 s
    }
    void TearDown() override {
        ::unsetenv("GHOST_LAZY_PACE_US");
        if (!dir_.empty())
            std::filesystem::remove_all(dir_);
    }

    std::string image() const { return dir_ + "/img"; }

    // Checkpoints the worker into image(), killing it.
    void checkpoint(Worker& w) {
        const int fd = ::open(image().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_GE(fd, 0);
        ghost::CheckpointOptions o;
        o.fate = ghost::Fate::Kill;
        auto s = ghost::checkpoint(engine_, w.pid(), fd, o);
        ::close(fd);
        ASSERT_TRUE(s) << s.error().what();
    }

    // The worker's report, then the worker checkpointed, killed and
    // restarted lazily (its pid in *pid); fails the test if any step does.
    std::string restart_lazily(Worker& w, pid_t* pid) {
        const std::string before = w.ask("report");
        EXPECT_FALSE(before.empty());
        checkpoint(w);
        w.killed();
        auto r = w.restart(engine_, image(), false, false, true);
        EXPECT_TRUE(r) << r.error().what();
        *pid = r ? *r : -1;
        return before;
    }

    // pid once it ended and was reaped (its status in *status), waiting up
    // to 5 s; 0 if it still runs.
    static pid_t reaped_within_5s(pid_t pid, int* status) {
        pid_t done = 0;
        for (int i = 0; i < 100 && done == 0; i++) {
            done = ::waitpid(pid, status, WNOHANG);
            if (done == 0)
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return done;
    }

    // Resident anonymous memory of pid, in KiB.
    static long rss_anon_kib(pid_t pid) {
        std::ifstream st("/proc/" + std::to_string(pid) + "/status");
        for (std::string line; std::getline(st, line);)
            if (line.rfind("RssAnon:", 0) == 0)
                return std::stol(line.substr(8));
        return -1;
    }

    // The process named comm that maps image (the pager reads the image in
    // place, and its guard inherited the mapping), or -1.
    static pid_t mapping(const std::string& comm, const std::string& image) {
        for (const auto& e : std::filesystem::directory_iterator("/proc")) {
            const std::string name = e.path().filename();
            if (name.find_first_not_of("0123456789") != std::string::npos)
                continue;
            std::ifstream c(e.path() / "comm");
            std::string got;
            if (!std::getline(c, got) || got != comm)
                continue;
            std::ifstream maps(e.path() / "maps");
            for (std::string line; std::getline(maps, line);)
                if (line.size() > image.size() &&
                    line.compare(line.size() - image.size(), image.size(), image) == 0)
                    return std::stoi(name);
        }
        return -1;
    }

    // The descriptors of pid that are userfaultfds.
    static std::vector<int> uffd_fds(pid_t pid) {
        std::vector<int> fds;
        std::error_code ec;
        const std::filesystem::path dir = "/proc/" + std::to_string(pid) + "/fd";
        for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
            const auto target = std::filesystem::read_symlink(e.path(), ec);
            if (!ec && target == "anon_inode:[userfaultfd]")
                fds.push_back(std::stoi(e.path().filename()));
        }
        return fds;
    }

    // Every process with uid among its real, effective and saved uids
    // holding a userfaultfd, with its name.
    static std::vector<std::pair<pid_t, std::string>> holders_of_uffd(uid_t uid) {
        std::vector<std::pair<pid_t, std::string>> found;
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
            const std::string name = e.path().filename();
            if (name.find_first_not_of("0123456789") != std::string::npos)
                continue;
            std::ifstream st(e.path() / "status");
            std::string line, comm;
            bool theirs = false;
            while (std::getline(st, line)) {
                if (line.rfind("Name:\t", 0) == 0)
                    comm = line.substr(6);
                if (line.rfind("Uid:", 0) == 0) {
                    std::istringstream ids(line.substr(4));
                    uid_t real = 0, eff = 0, saved = 0;
                    ids >> real >> eff >> saved;
                    theirs = real == uid || eff == uid || saved == uid;
                    break;
                }
            }
            const pid_t pid = std::stoi(name);
            if (theirs && !uffd_fds(pid).empty())
                found.emplace_back(pid, comm);
        }
        return found;
    }

    ghost::UserEngine engine_;
    std::string dir_;
};

TEST_F(Lazy, TheProcessRunsFirstAndReadsTheImagesMemory) {
    Worker w;
    pid_t pid = -1;
    const std::string before = restart_lazily(w, &pid);
    ASSERT_GT(pid, 0);
    // Running, with most of its 32 MiB still in the image.
    const long rss = rss_anon_kib(pid);
    EXPECT_GE(rss, 0);
    EXPECT_LT(rss, 24 * 1024) << "the restart waited for the memory: not lazy";
    // Reading all of it takes each page from the pager.
    EXPECT_EQ(w.ask("report"), before);
}

TEST_F(Lazy, PagesDroppedAndUnmappedBeforeThePagerCameStayGone) {
    // What the same commands give without a restart. (The worker to
    // restart is made first: the reference, made after it, has its own
    // pipes, which the restored worker must not have.)
    Worker w;
    Worker ref;
    ASSERT_FALSE(ref.ask("mutate1").empty());
    const std::string after_mutate = ref.ask("report");
    ASSERT_EQ(ref.ask("check"), "0 0\n");
    ASSERT_FALSE(w.ask("report").empty());
    checkpoint(w);
    w.killed();
    auto pid = w.restart(engine_, image(), false, false, true);
    ASSERT_TRUE(pid) << pid.error().what();
    // Pages dropped (MADV_DONTNEED) and B unmapped before the pager put
    // them in: they must not come back from the image.
    EXPECT_EQ(w.ask("mutate1"), after_mutate);
    EXPECT_EQ(w.ask("check"), "0 0\n");
    EXPECT_EQ(w.ask("report"), after_mutate);
}

// Faults and drops at once, from two threads, while the pages are still
// pending: a fault the pager reads while a drop is under way must still be
// served (it waits for the drop, then gets the page or zeros), and no byte
// is anything but the image's or zero.
TEST_F(Lazy, FaultsRacingDropsAreAllServed) {
    Worker w;
    pid_t pid = -1;
    restart_lazily(w, &pid);
    ASSERT_GT(pid, 0);
    EXPECT_EQ(w.ask("race"), "0\n") << "a fault was never served, or a byte came back wrong";
    EXPECT_EQ(w.ask("check"), "0 0\n");
}

TEST_F(Lazy, AForkAndAMovedMappingGetTheirPagesToo) {
    Worker w;
    pid_t pid = -1;
    const std::string before = restart_lazily(w, &pid);
    ASSERT_GT(pid, 0);
    // A child forked at once lacks what its parent lacks: the pager
    // serves it too (its reply reads all of A in the child only).
    pid_t from = 0;
    EXPECT_EQ(w.ask("fork", &from), before);
    EXPECT_NE(from, pid);
    // A moved while most of it is still pending: the pager follows it.
    EXPECT_EQ(w.ask("remap"), before);
    EXPECT_EQ(w.ask("report"), before);
}

// A mapping split while its pages are pending (a part given another flag):
// the kernel copies within one mapping only, and a fault's 64 KiB or a
// background step's 1 MiB that crosses the new boundary must still put
// every page in, never leave zeros.
TEST_F(Lazy, PagesOfAMappingSplitWhileTheyArePendingAllComeIn) {
    Worker w;
    pid_t pid = -1;
    const std::string before = restart_lazily(w, &pid);
    ASSERT_GT(pid, 0);
    EXPECT_EQ(w.ask("split"), before) << "pages around the split read as zeros";
    EXPECT_EQ(w.ask("report"), before);
}

// Pages still pending when the process makes them MADV_WIPEONFORK and
// forks: the child gets zeros there, as the kernel gives a wiped mapping,
// not the image's data (a generator's state kept so must never reach a
// child); the parent keeps its memory.
TEST_F(Lazy, AForkGetsZerosWhereItsParentMadePendingPagesWipeOnFork) {
    Worker w;
    pid_t pid = -1;
    const std::string before = restart_lazily(w, &pid);
    ASSERT_GT(pid, 0);
    pid_t from = 0;
    EXPECT_EQ(w.ask("wipefork", &from), "0\n") << "the child saw the image's data";
    EXPECT_NE(from, pid);
    EXPECT_EQ(w.ask("report"), before);
}

TEST_F(Lazy, OutlivesItsImageBeingOverwrittenAndReplaced) {
    Worker w;
    pid_t pid = -1;
    const std::string before = restart_lazily(w, &pid);
    ASSERT_GT(pid, 0);
    const auto size = std::filesystem::file_size(image());
    // Overwritten in place: the open for writing waits for the pager (its
    // read lease); the zeros must not reach the process.
    std::thread writer([&] {
        const int fd = ::open(image().c_str(), O_WRONLY | O_CLOEXEC);
        ASSERT_GE(fd, 0) << std::strerror(errno);
        const std::vector<char> zeros(1 << 20, 0);
        for (std::uintmax_t at = 0; at < size; at += zeros.size())
            ASSERT_GT(::pwrite(fd, zeros.data(), zeros.size(), static_cast<off_t>(at)), 0);
        ::close(fd);
    });
    writer.join();
    // Replaced: a new file renamed over it.
    {
        std::ofstream junk(dir_ + "/junk");
        junk << std::string(1 << 16, 'x');
    }
    ASSERT_EQ(::rename((dir_ + "/junk").c_str(), image().c_str()), 0);
    EXPECT_EQ(w.ask("report"), before);
}

// A checkpoint of a process whose pager is still at work would carry the
// pages still to come as holes (zeros): both engines refuse it, the process
// runs on, and once the pager is done a checkpoint is taken and restarts.
TEST_F(Lazy, ACheckpointBeforeThePagerIsDoneIsRefusedAndLosesNothing) {
    Worker w;
    pid_t pid = -1;
    const std::string before = restart_lazily(w, &pid);
    ASSERT_GT(pid, 0);
    const std::string second = dir_ + "/second";
    const auto try_checkpoint = [&](ghost::Engine& e) {
        const int fd = ::open(second.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ghost::CheckpointOptions o;
        o.fate = ghost::Fate::Run;
        auto s = ghost::checkpoint(e, pid, fd, o);
        ::close(fd);
        return s;
    };
    std::vector<std::unique_ptr<ghost::Engine>> engines;
    engines.push_back(std::make_unique<ghost::UserEngine>());
    if (auto k = ghost::Engine::open(ghost::EngineKind::Kernel); k) // in the VM
        engines.push_back(std::move(*k));
    for (auto& e : engines) {
        auto s = try_checkpoint(*e);
        ASSERT_FALSE(s) << e->name() << " engine: a checkpoint with pages still to come";
        EXPECT_EQ(s.error().code.value(), EBUSY) << s.error().what();
        EXPECT_NE(s.error().what().find("userfaultfd"), std::string::npos) << s.error().what();
    }
    // It ran on; reading all its memory brings every page in, and the
    // pager then lets go.
    EXPECT_EQ(w.ask("report"), before);
    ghost::Result<ghost::ExportStats> s = ghost::Error::from_errno(EBUSY, "not tried");
    for (int i = 0; i < 200 && !s; i++) {
        s = try_checkpoint(engine_);
        if (!s && s.error().code.value() != EBUSY)
            break;
        if (!s)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(s) << s.error().what();
    w.kill_restored();
    auto again = w.restart(engine_, second);
    ASSERT_TRUE(again) << again.error().what();
    EXPECT_EQ(w.ask("report"), before);
}

// A pager killed before it is done: the pages it had not put in would
// read as zeros. Its guard holds the userfaultfd too, so the process waits
// for them instead, and the guard kills it and its descendants: a process
// that is gone, never one that runs on with memory it did not have.
TEST_F(Lazy, APagerKilledBeforeItIsDoneTakesItsProcessWithIt) {
    Worker w;
    pid_t pid = -1;
    restart_lazily(w, &pid);
    ASSERT_GT(pid, 0);
    const pid_t pager = mapping("ghost-pager", image());
    ASSERT_GT(pager, 0) << "no ghost-pager maps " << image();
    // The pager forks its guard as it starts: on a loaded machine the guard
    // may not be there yet (its name and mapping come in its first steps).
    pid_t guard = -1;
    for (int i = 0; i < 100 && guard <= 0; i++) {
        guard = mapping("ghost-pgguard", image());
        if (guard <= 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_GT(guard, 0) << "the pager has no guard";
    ASSERT_LT(rss_anon_kib(pid), 24 * 1024) << "the pager was done already";
    ASSERT_EQ(::kill(pager, SIGKILL), 0);
    (void)w.send("report"); // reads every page: none can come now
    int status = 0;
    ASSERT_EQ(reaped_within_5s(pid, &status), pid) << "the process runs on without its pager";
    w.forget_restored();
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
    std::string partial;
    EXPECT_FALSE(w.replied(partial)) << "it answered: " << partial;
    for (int i = 0; i < 100 && mapping("ghost-pgguard", image()) > 0; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_LT(mapping("ghost-pgguard", image()), 0) << "the guard outlived its process";
}

// The same with descendants: each is stopped before any is killed, so that
// a child of one killed first is not handed to init and missed, to run on
// reading zeros where pages were pending. Several rounds: the miss was a
// race with the parent's exit.
TEST_F(Lazy, APagerKilledBeforeItIsDoneTakesEveryDescendantWithIt) {
    for (int round = 0; round < 4; round++) {
        SCOPED_TRACE("round " + std::to_string(round));
        Worker w;
        pid_t pid = -1;
        restart_lazily(w, &pid);
        ASSERT_GT(pid, 0);
        std::istringstream kids(w.ask("sleepers"));
        std::vector<pid_t> children;
        for (pid_t c; kids >> c;)
            children.push_back(c);
        ASSERT_EQ(children.size(), 4u);
        const pid_t pager = mapping("ghost-pager", image());
        ASSERT_GT(pager, 0) << "no ghost-pager maps " << image();
        ASSERT_LT(rss_anon_kib(pid), 24 * 1024) << "the pager was done already";
        ASSERT_EQ(::kill(pager, SIGKILL), 0);
        (void)w.send("report"); // waits for a page that cannot come now
        int status = 0;
        ASSERT_EQ(reaped_within_5s(pid, &status), pid) << "the process runs on without its pager";
        w.forget_restored();
        // Reparented to init (or a subreaper) when their parent died: gone
        // or a zombie, never sleeping on.
        const auto running = [](pid_t c) {
            std::ifstream st("/proc/" + std::to_string(c) + "/stat");
            std::string line;
            if (!std::getline(st, line))
                return false;
            const auto close = line.rfind(')');
            return close != std::string::npos && close + 2 < line.size() &&
                   line[close + 2] != 'Z' && line[close + 2] != 'X';
        };
        for (int i = 0; i < 40 && std::ranges::any_of(children, running); i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        for (const pid_t c : children) {
            EXPECT_FALSE(running(c)) << "child " << c << " escaped the kill";
            if (running(c))
                ::kill(c, SIGKILL); // one of ours: the worker's child
        }
    }
}

// A process forking in a loop sends the pager a message every time it
// looks; only a copy into a fork finds that it has exited. The pager
// still takes a push step now and then, so the userfaultfds of exited
// forks are let go as it goes, not kept until the loop ends (a long-running
// forking server would run the pager and its guard out of descriptors).
TEST_F(Lazy, ExitedForksAreLetGoWhileTheProcessForksOn) {
    // 1 MiB per 200 ms: the pager is still at work when the forks end.
    ::setenv("GHOST_LAZY_PACE_US", "200000", 1);
    Worker w;
    pid_t pid = -1;
    const std::string before = restart_lazily(w, &pid);
    ASSERT_GT(pid, 0);
    const pid_t pager = mapping("ghost-pager", image());
    ASSERT_GT(pager, 0) << "no ghost-pager maps " << image();
    const auto open_fds = [](pid_t p) {
        std::error_code ec;
        long n = 0;
        for (std::filesystem::directory_iterator it("/proc/" + std::to_string(p) + "/fd", ec), end;
             !ec && it != end; it.increment(ec))
            n++;
        return n;
    };
    std::atomic<bool> stop{false};
    long most = 0;
    std::thread watch([&] {
        while (!stop) {
            most = std::max(most, open_fds(pager));
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    });
    // Under emulation (the VM) a fork takes milliseconds: more than ask()'s
    // 10 s in all.
    ASSERT_TRUE(w.send("forks"));
    std::string forked;
    for (int i = 0; i < 1200 && !w.replied(forked); i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stop = true;
    watch.join();
    EXPECT_EQ(forked.substr(forked.find(' ') + 1), "1000\n") << forked;
    // (The pager may finish before the forks do; it did not hold them
    // meanwhile.)
    ASSERT_GT(most, 0) << "the pager was done before the forks began";
    EXPECT_LT(most, 400) << "the pager held a userfaultfd for most of 1000 exited forks";
    // And the process's memory is all there.
    EXPECT_EQ(w.ask("report"), before);
}

// The userfaultfd a lazy restart makes serves faults taken inside system
// calls (root made it): a power the image's user must never get. Every
// holder of one is watched while the restart runs; none of the image's
// user's but the pager and its guard may hold it, and theirs cannot be
// taken (pidfd_getfd) by that user, who can take the restored process's
// descriptors; nor may that user stop them (SIGSTOP), which would hold
// such faults for as long as they liked.
TEST_F(Lazy, OnlyThePagerHoldsTheUserfaultfd) {
    constexpr uid_t kUser = 65534;
    Worker w(kUser);
    const std::string before = w.ask("report");
    ASSERT_FALSE(before.empty());
    checkpoint(w);
    w.killed();
    std::atomic<bool> stop{false};
    std::set<std::string> wrong; // "pid comm" of each wrong holder seen
    int rounds = 0;
    std::thread watch([&] {
        while (!stop) {
            for (const auto& [pid, comm] : holders_of_uffd(kUser))
                if (comm != "ghost-pager" && comm != "ghost-pgguard")
                    wrong.insert(std::to_string(pid) + " " + comm);
            rounds++;
        }
    });
    auto r = w.restart(engine_, image(), false, false, true);
    // Watched a little longer: until the pager is done, the restored
    // process and its tracer (gone by now) were the exposed ones.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop = true;
    watch.join();
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_TRUE(wrong.empty()) << "held by " << *wrong.begin() << " (" << wrong.size()
                               << " in all, " << rounds << " rounds)";
    const auto held = holders_of_uffd(kUser);
    ASSERT_FALSE(held.empty()) << "the pager was done already";
    // As the image's user: the restored process's descriptors can be taken
    // (the check is real), the pager's cannot.
    auto take = [&](pid_t from, int fd) {
        const pid_t c = ::fork();
        if (c == 0) {
            if (::setgroups(0, nullptr) != 0 || ::setresgid(kUser, kUser, kUser) != 0 ||
                ::setresuid(kUser, kUser, kUser) != 0)
                ::_exit(99);
            const int pfd = static_cast<int>(::syscall(SYS_pidfd_open, from, 0));
            if (pfd < 0)
                ::_exit(98);
            const int got = static_cast<int>(::syscall(SYS_pidfd_getfd, pfd, fd, 0));
            ::_exit(got >= 0 ? 0 : errno == EPERM ? 1 : 97);
        }
        int st = 0;
        ::waitpid(c, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    };
    EXPECT_EQ(take(*r, 0), 0) << "the image's user cannot take its own process's descriptor";
    for (const auto& [pid, comm] : held)
        for (const int fd : uffd_fds(pid))
            EXPECT_EQ(take(pid, fd), 1) << comm << " " << pid << ": its userfaultfd " << fd
                                        << " could be taken by the image's user";
    // As the image's user: its own process may be signalled (the check is
    // real), the pager and its guard may not.
    auto signal_as_user = [&](pid_t whom, int sig) {
        const pid_t c = ::fork();
        if (c == 0) {
            if (::setgroups(0, nullptr) != 0 || ::setresgid(kUser, kUser, kUser) != 0 ||
                ::setresuid(kUser, kUser, kUser) != 0)
                ::_exit(99);
            ::_exit(::kill(whom, sig) == 0 ? 0 : errno == EPERM ? 1 : 97);
        }
        int st = 0;
        ::waitpid(c, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    };
    EXPECT_EQ(signal_as_user(*r, 0), 0) << "the image's user cannot signal its own process";
    for (const auto& [pid, comm] : held) {
        EXPECT_EQ(signal_as_user(pid, SIGSTOP), 1)
            << comm << " " << pid << " could be stopped by the "
            << "image's user";
        ::kill(pid, SIGCONT); // had it been stopped
    }
    // Served all the same, a fork's pages too (the pager reads the
    // process's smaps as its user).
    EXPECT_EQ(w.ask("fork"), before);
    EXPECT_EQ(w.ask("report"), before);
}

TEST_F(Lazy, RefusesAnImageOpenForWritingAndTheCallerGoesOn) {
    Worker w;
    const std::string before = w.ask("report");
    checkpoint(w);
    w.killed();
    const int writer = ::open(image().c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(writer, 0);
    auto pid = w.restart(engine_, image(), false, false, true);
    ASSERT_FALSE(pid);
    EXPECT_NE(pid.error().what().find("open for writing"), std::string::npos) << pid.error().what();
    ::close(writer);
    // Nothing lost: the same image restarts lazily once nobody writes it.
    auto again = w.restart(engine_, image(), false, false, true);
    ASSERT_TRUE(again) << again.error().what();
    EXPECT_EQ(w.ask("report"), before);
}

// A damaged page is caught before the point of no return: the END
// checksum is checked over the whole image, under the lease, before the
// caller changes; restart() fails naming it.
TEST_F(Lazy, ADamagedPageIsRefusedBeforeTheProcessRuns) {
    Worker w;
    ASSERT_FALSE(w.ask("report").empty());
    checkpoint(w);
    w.killed();
    std::uint64_t at = 0;
    {
        const int fd = ::open(image().c_str(), O_RDONLY | O_CLOEXEC);
        ghost::image::FdSource src(fd);
        auto img = ghost::image::read(src);
        ::close(fd);
        ASSERT_TRUE(img) << img.error().what();
        for (const auto& v : img->vmas)
            for (const auto& r : v.runs)
                if (!at && r.nr_pages > 100)
                    at = r.data_offset + 50 * 4096 + 7; // deep in a run, not at its start
    }
    ASSERT_NE(at, 0u);
    {
        const int fd = ::open(image().c_str(), O_RDWR | O_CLOEXEC);
        char c = 0;
        ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(at)), 1);
        c = static_cast<char>(c ^ 0x10);
        ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(at)), 1);
        ::close(fd);
    }
    auto pid = w.restart(engine_, image(), false, false, true);
    ASSERT_FALSE(pid) << "a damaged image restarted lazily";
    EXPECT_NE(pid.error().what().find("checksum"), std::string::npos) << pid.error().what();
}

TEST_F(Lazy, RefusesAStreamWithAReason) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    ghost::RestartOptions o;
    o.lazy = true;
    auto pid = ghost::restart(engine_, p[0], o);
    ::close(p[0]);
    ::close(p[1]);
    ASSERT_FALSE(pid);
    EXPECT_NE(pid.error().what().find("regular file"), std::string::npos) << pid.error().what();
}

} // namespace
