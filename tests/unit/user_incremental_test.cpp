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

#include "mutating_worker.hpp"

namespace {

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

    // Pages written between a and b, so that b holds page data of its own
    // (without them, whether b has any depends on what ran before).
    w.ask("mutate1");
    const std::string r1 = w.ask("report");
    ASSERT_TRUE(checkpoint(w.pid(), "b.img", true, path("a.img")));
    e = checkpoint(w.pid(), "x.img", true, path("a.img")); // older than b
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().what().find("last leave-running checkpoint"), std::string::npos)
        << e.error().what();
    EXPECT_EQ(w.ask("report"), r1);

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
    EXPECT_EQ(w.ask("report"), r1);
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

// The parents an image names are opened as the image's user, even by root:
// a parent its user could not read (here one of root's, mode 0600) is
// refused, and so is a FIFO in its place, without waiting on it. Once the
// user owns its parent, root restarts the chain.
TEST_F(Incremental, ParentsAreOpenedAsTheImagesUser) {
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root (a worker of another user)";
    constexpr uid_t nobody = 65534;
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    Worker w(nobody);
    ASSERT_FALSE(w.ask("report").empty());
    ASSERT_TRUE(checkpoint(w.pid(), "a.img", true));
    w.ask("mutate1");
    ASSERT_TRUE(checkpoint(w.pid(), "b.img", true, path("a.img")));
    const std::string now = w.ask("report");
    w.killed();

    auto r = w.restart(engine_, path("b.img"));
    ASSERT_FALSE(r) << "root read uid " << nobody << "'s parent for it";
    EXPECT_EQ(r.error().code.value(), EACCES) << r.error().what();
    EXPECT_NE(r.error().what().find(path("a.img")), std::string::npos) << r.error().what();

    std::filesystem::rename(path("a.img"), path("a.saved"));
    ASSERT_EQ(::mkfifo(path("a.img").c_str(), 0666), 0);
    r = w.restart(engine_, path("b.img"));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what().find("is not a regular file"), std::string::npos)
        << r.error().what();

    std::filesystem::remove(path("a.img"));
    std::filesystem::rename(path("a.saved"), path("a.img"));
    ASSERT_EQ(::chown(path("a.img").c_str(), nobody, nobody), 0);
    r = w.restart(engine_, path("b.img"));
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_EQ(w.ask("report"), now);
}

} // namespace
