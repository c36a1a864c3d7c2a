// SPDX-License-Identifier: GPL-2.0
// Incremental images with the user engine, natively: checkpoint --parent
// writes only what a process wrote since its last leave-running
// checkpoint, restart follows the chain, and a wrong parent is refused.
// The worker holds a 32 MiB region of known contents and changes it on
// command; it reports a digest of its memory, so a restored copy with any
// page wrong, a dropped page come back, or an unmapped region mapped again
// reports something else.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ghost/engine.hpp"
#include "ghost/image.hpp"
#include "ghost/process.hpp"
#include "ghost/user_engine.hpp"

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kPages = 8192; // region A: 32 MiB
constexpr std::size_t kSmall = 16;   // regions B (unmapped later) and C (mapped later)

unsigned char pattern(std::size_t page, unsigned gen, std::size_t i) {
    return static_cast<unsigned char>(page * 131 + i * 7 + gen * 17 + 1);
}

// Pages of A dropped with MADV_DONTNEED by each command.
constexpr std::size_t kDrop1 = 100, kDrop1N = 20, kDrop2 = 200, kDrop2N = 5;

bool dropped(std::size_t p, int stage) {
    return (stage >= 1 && p >= kDrop1 && p < kDrop1 + kDrop1N) ||
           (stage >= 2 && p >= kDrop2 && p < kDrop2 + kDrop2N);
}

std::uint64_t fnv(std::uint64_t h, const unsigned char* p, std::size_t n) {
    for (std::size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

// Commands, one a line on cmd; after each, a line on out:
//   "report": "pid A-digest B-mapped C-digest"
//   "mutate1": pages 0-9 of A rewritten, 100-119 dropped, C mapped, B unmapped
//   "mutate2": pages 20-24 rewritten, 200-204 dropped
//   "check": "pid resident nonzero": of the dropped pages, how many are
//            resident (mincore) before being read, and their non-zero bytes
[[noreturn]] void worker(int cmd, int out) {
    const auto map = [](std::size_t pages) {
        return static_cast<unsigned char*>(::mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE,
                                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    };
    unsigned char* a = map(kPages);
    for (std::size_t p = 0; p < kPages; p++)
        for (std::size_t i = 0; i < kPage; i++)
            a[p * kPage + i] = pattern(p, 1, i);
    unsigned char* b = map(kSmall);
    std::memset(b, 0x5b, kSmall * kPage);
    unsigned char* c = nullptr;
    int stage = 0;
    std::string line;
    for (;;) {
        char ch;
        const ssize_t n = ::read(cmd, &ch, 1);
        if (n <= 0)
            ::_exit(0);
        if (ch != '\n') {
            line += ch;
            continue;
        }
        char msg[160];
        if (line == "mutate1") {
            for (std::size_t p = 0; p < 10; p++)
                for (std::size_t i = 0; i < kPage; i++)
                    a[p * kPage + i] = pattern(p, 2, i);
            ::madvise(a + kDrop1 * kPage, kDrop1N * kPage, MADV_DONTNEED);
            c = map(kSmall);
            std::memset(c, 0xc3, kSmall * kPage);
            ::munmap(b, kSmall * kPage);
            stage = 1;
        } else if (line == "mutate2") {
            for (std::size_t p = 20; p < 25; p++)
                for (std::size_t i = 0; i < kPage; i++)
                    a[p * kPage + i] = pattern(p, 3, i);
            ::madvise(a + kDrop2 * kPage, kDrop2N * kPage, MADV_DONTNEED);
            stage = 2;
        }
        if (line == "check") {
            unsigned resident = 0;
            unsigned long nonzero = 0;
            for (std::size_t p = 0; p < kPages; p++) {
                if (!dropped(p, stage))
                    continue;
                unsigned char v = 0;
                ::mincore(a + p * kPage, kPage, &v);
                resident += v & 1;
                for (std::size_t i = 0; i < kPage; i++)
                    nonzero += a[p * kPage + i] != 0;
            }
            std::snprintf(msg, sizeof(msg), "%d %u %lu\n", ::getpid(), resident, nonzero);
        } else {
            std::uint64_t h = 1469598103934665603ULL;
            for (std::size_t p = 0; p < kPages; p++)
                if (!dropped(p, stage))
                    h = fnv(h, a + p * kPage, kPage);
            const int b_mapped = ::msync(b, kSmall * kPage, MS_ASYNC) == 0;
            const std::uint64_t ch_digest = c ? fnv(1469598103934665603ULL, c, kSmall * kPage) : 0;
            std::snprintf(msg, sizeof(msg), "%d %016llx %d %016llx\n", ::getpid(),
                          static_cast<unsigned long long>(h), b_mapped,
                          static_cast<unsigned long long>(ch_digest));
        }
        line.clear();
        const auto len = std::strlen(msg);
        if (::write(out, msg, len) != static_cast<ssize_t>(len))
            ::_exit(3);
    }
}

// The worker's two pipes, and its replies.
class Worker {
  public:
    Worker() {
        int c[2], o[2];
        EXPECT_EQ(::pipe2(c, O_CLOEXEC), 0);
        EXPECT_EQ(::pipe2(o, O_CLOEXEC), 0);
        cmd_rd_ = c[0], cmd_wr_ = c[1], out_rd_ = o[0], out_wr_ = o[1];
        pid_ = ::fork();
        if (pid_ == 0)
            worker(cmd_rd_, out_wr_);
    }
    ~Worker() {
        for (pid_t p : {pid_, restored_})
            if (p > 0) {
                ::kill(p, SIGKILL);
                ::waitpid(p, nullptr, 0);
            }
        for (int fd : {cmd_rd_, cmd_wr_, out_rd_, out_wr_})
            ::close(fd);
    }
    pid_t pid() const { return restored_ > 0 ? restored_ : pid_; }
    // The reply to command, without the pid; "" after 10 s of silence.
    std::string ask(const std::string& command, pid_t* from = nullptr) {
        const std::string c = command + "\n";
        if (::write(cmd_wr_, c.data(), c.size()) != static_cast<ssize_t>(c.size()))
            return {};
        std::string r;
        for (char ch = 0; ch != '\n';) {
            pollfd p{out_rd_, POLLIN, 0};
            if (::poll(&p, 1, 10000) <= 0 || ::read(out_rd_, &ch, 1) != 1)
                return {};
            r += ch;
        }
        const auto sp = r.find(' ');
        if (from)
            *from = std::atoi(r.substr(0, sp).c_str());
        return r.substr(sp + 1);
    }
    void killed() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    void kill_restored() {
        ::kill(restored_, SIGKILL);
        ::waitpid(restored_, nullptr, 0);
        restored_ = -1;
    }
    // Restarts image (a file) as the worker, with its pipes.
    ghost::Result<pid_t> restart(ghost::Engine& e, const std::string& image) {
        const int fd = ::open(image.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return ghost::Error::from_errno(errno, "open " + image);
        ghost::RestartOptions ro;
        ro.inherit_fds = {
            {cmd_rd_, cmd_rd_}, {cmd_wr_, cmd_wr_}, {out_rd_, out_rd_}, {out_wr_, out_wr_}};
        auto child = ghost::restart(e, fd, ro);
        ::close(fd);
        if (child)
            restored_ = *child;
        return child;
    }

  private:
    int cmd_rd_ = -1, cmd_wr_ = -1, out_rd_ = -1, out_wr_ = -1;
    pid_t pid_ = -1, restored_ = -1;
};

class Incremental : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = std::string(::testing::TempDir()) + "ghost-incr-" + std::to_string(::getpid()) +
               "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
        std::filesystem::create_directories(dir_ + "/state");
        ::setenv("GHOST_STATE_DIR", (dir_ + "/state").c_str(), 1);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    std::string path(const char* name) const { return dir_ + "/" + name; }

    // Checkpoints pid into path(name), leaving it running or killing it.
    ghost::Result<ghost::ExportStats> checkpoint(pid_t pid, const char* name, bool run,
                                                 const std::string& parent = {}) {
        const int fd = ::open(path(name).c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
            return ghost::Error::from_errno(errno, "open");
        ghost::CheckpointOptions o;
        o.fate = run ? ghost::Fate::Run : ghost::Fate::Kill;
        o.parent = parent;
        auto s = ghost::checkpoint(engine_, pid, fd, o);
        ::close(fd);
        if (!s)
            ::unlink(path(name).c_str());
        return s;
    }

    ghost::image::Image read_image(const char* name) {
        const int fd = ::open(path(name).c_str(), O_RDONLY | O_CLOEXEC);
        ghost::image::FdSource src(fd);
        auto img = ghost::image::read(src);
        ::close(fd);
        EXPECT_TRUE(img) << img.error().what();
        return img ? std::move(*img) : ghost::image::Image{};
    }

    ghost::UserEngine engine_;
    std::string dir_;
};

// The scenario of the issue: a full checkpoint, a few pages changed, some
// dropped, a region mapped and one unmapped, then an incremental one; the
// restart from it has exactly the memory of the second capture.
TEST_F(Incremental, ChildHoldsOnlyWrittenPagesAndRestartsExactly) {
    Worker w;
    const std::string r0 = w.ask("report");
    ASSERT_FALSE(r0.empty());
    auto full = checkpoint(w.pid(), "full.img", true);
    ASSERT_TRUE(full) << full.error().what();
    ASSERT_EQ(w.ask("report"), r0) << "the leave-running checkpoint changed the worker";

    const std::string r1 = w.ask("mutate1");
    ASSERT_NE(r1, r0);
    EXPECT_NE(r1.find(" 0 "), std::string::npos) << "B should be unmapped: " << r1;
    auto incr = checkpoint(w.pid(), "incr.img", false, path("full.img"));
    ASSERT_TRUE(incr) << incr.error().what();
    w.killed();

    const auto parent = read_image("full.img");
    const auto child = read_image("incr.img");
    EXPECT_GE(parent.pages(), kPages);
    EXPECT_EQ(parent.inherited_pages(), 0u);
    ASSERT_TRUE(child.parent);
    EXPECT_EQ(child.parent->depth, 1u);
    EXPECT_EQ(child.parent->bytes, parent.bytes);
    EXPECT_EQ(child.parent->crc32c, parent.crc32c);
    EXPECT_EQ(child.parent_path, path("full.img"));
    // Written: 10 rewritten pages of A, 16 of C, and the worker's own stack
    // and data; inherited: the rest of A, less the dropped pages.
    EXPECT_GE(child.pages(), 10u + kSmall);
    EXPECT_LT(child.pages(), 200u) << "far more pages written than the worker changed";
    EXPECT_GE(child.inherited_pages(), kPages - 10 - kDrop1N - 50);
    EXPECT_LE(child.inherited_pages() + child.pages(), parent.pages() + kSmall);
    EXPECT_LT(incr->bytes * 20, full->bytes) << "the child image is not much smaller";

    pid_t from = 0;
    auto restored = w.restart(engine_, path("incr.img"));
    ASSERT_TRUE(restored) << restored.error().what();
    EXPECT_EQ(w.ask("report", &from), r1);
    EXPECT_EQ(from, *restored);
    EXPECT_EQ(w.ask("check"), "0 0\n") << "a dropped page came back from the parent";
    // It goes on: more changes and reports.
    EXPECT_NE(w.ask("mutate2"), r1);
}

// Three images: full, child, grandchild; restart from the last.
TEST_F(Incremental, ChainOfThreeRestartsFromTheNewest) {
    Worker w;
    ASSERT_FALSE(w.ask("report").empty());
    ASSERT_TRUE(checkpoint(w.pid(), "a.img", true));
    w.ask("mutate1");
    auto b = checkpoint(w.pid(), "b.img", true, path("a.img"));
    ASSERT_TRUE(b) << b.error().what();
    const std::string r2 = w.ask("mutate2");
    auto c = checkpoint(w.pid(), "c.img", false, path("b.img"));
    ASSERT_TRUE(c) << c.error().what();
    w.killed();

    const auto img = read_image("c.img");
    ASSERT_TRUE(img.parent);
    EXPECT_EQ(img.parent->depth, 2u);
    EXPECT_LT(img.pages(), 200u);
    EXPECT_GE(img.inherited_pages(), kPages - 60 - kDrop1N - kDrop2N);

    auto restored = w.restart(engine_, path("c.img"));
    ASSERT_TRUE(restored) << restored.error().what();
    EXPECT_EQ(w.ask("report"), r2);
    EXPECT_EQ(w.ask("check"), "0 0\n");

    // The chain moved elsewhere still restarts: parents are looked for
    // beside the child when their recorded path is gone.
    w.kill_restored();
    std::filesystem::create_directories(path("moved"));
    for (const char* n : {"a.img", "b.img", "c.img"})
        std::filesystem::rename(path(n), path("moved") + "/" + n);
    restored = w.restart(engine_, path("moved") + "/c.img");
    ASSERT_TRUE(restored) << restored.error().what();
    EXPECT_EQ(w.ask("report"), r2);
}

// A parent must be this process's last leave-running checkpoint: another
// process's image, an older image of the chain, a modified file are
// refused, naming the image, and the process runs on untouched.
TEST_F(Incremental, WrongParentsAreRefusedAndTheProcessRunsOn) {
    Worker w, other;
    const std::string r0 = w.ask("report");
    ASSERT_FALSE(other.ask("report").empty());
    ASSERT_TRUE(checkpoint(w.pid(), "a.img", true));
    ASSERT_TRUE(checkpoint(other.pid(), "other.img", true));

    auto e = checkpoint(w.pid(), "x.img", true, path("other.img"));
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code.value(), EINVAL);
    EXPECT_NE(e.error().what().find(path("other.img")), std::string::npos) << e.error().what();
    EXPECT_NE(e.error().what().find("not of process"), std::string::npos) << e.error().what();
    EXPECT_EQ(w.ask("report"), r0);

    ASSERT_TRUE(checkpoint(w.pid(), "b.img", true, path("a.img")));
    e = checkpoint(w.pid(), "x.img", true, path("a.img")); // older than b
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().what().find("last leave-running checkpoint"), std::string::npos)
        << e.error().what();
    EXPECT_EQ(w.ask("report"), r0);

    // One byte of b's page data changed: its checksum no longer holds.
    const auto b = read_image("b.img");
    ASSERT_FALSE(b.vmas.empty());
    std::uint64_t at = 0;
    for (const auto& v : b.vmas)
        for (const auto& r : v.runs)
            if (!r.parent && !at)
                at = r.data_offset + 100;
    ASSERT_NE(at, 0u);
    {
        const int fd = ::open(path("b.img").c_str(), O_RDWR | O_CLOEXEC);
        char c = 0;
        ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(at)), 1);
        c = static_cast<char>(c ^ 0x40);
        ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(at)), 1);
        ::close(fd);
    }
    e = checkpoint(w.pid(), "x.img", true, path("b.img"));
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().what().find(path("b.img")), std::string::npos) << e.error().what();
    EXPECT_NE(e.error().what().find("checksum"), std::string::npos) << e.error().what();
    EXPECT_EQ(w.ask("report"), r0);
    EXPECT_FALSE(std::filesystem::exists(path("x.img")));
}

// Restart checks every link: a missing parent, or another image in its
// place, fails the restart with the parent named; nothing is started.
TEST_F(Incremental, RestartRefusesAMissingOrWrongParent) {
    Worker w, other;
    ASSERT_FALSE(w.ask("report").empty());
    ASSERT_FALSE(other.ask("report").empty());
    ASSERT_TRUE(checkpoint(w.pid(), "a.img", true));
    ASSERT_TRUE(checkpoint(other.pid(), "other.img", true));
    w.ask("mutate1");
    ASSERT_TRUE(checkpoint(w.pid(), "b.img", true, path("a.img")));

    std::filesystem::rename(path("a.img"), path("a.saved"));
    auto r = w.restart(engine_, path("b.img"));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code.value(), ENOENT) << r.error().what();
    EXPECT_NE(r.error().what().find(path("a.img")), std::string::npos) << r.error().what();
    EXPECT_NE(r.error().what().find("missing"), std::string::npos) << r.error().what();

    std::filesystem::copy_file(path("other.img"), path("a.img"));
    r = w.restart(engine_, path("b.img"));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what().find("is not the parent of"), std::string::npos) << r.error().what();

    // With its real parent back, the same child restarts.
    std::filesystem::remove(path("a.img"));
    std::filesystem::rename(path("a.saved"), path("a.img"));
    const std::string now = w.ask("report");
    w.killed();
    r = w.restart(engine_, path("b.img"));
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_EQ(w.ask("report"), now);
}

} // namespace
