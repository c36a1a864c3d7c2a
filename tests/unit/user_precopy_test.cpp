// SPDX-License-Identifier: GPL-2.0
// Pre-copy with the user engine, natively (ghost/precopy.hpp): a whole
// image while the process runs, then images of only the pages it wrote
// (told by userfaultfd write-protection), the last taken as it is killed;
// the sequence, read from one stream, restores the process exactly as it
// was at the last capture. Skipped where the kernel cannot track writes
// so (before Linux 6.7).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "ghost/image.hpp"
#include "ghost/precopy.hpp"
#include "ghost/process.hpp"
#include "ghost/user_engine.hpp"
#include "user/precopy_state.hpp"
#include "user/shadow.hpp"

#include "mutating_worker.hpp"

namespace {

class Precopy : public ::testing::Test {
  protected:
    void SetUp() override {
        if (auto s = ghost::Precopy::supported(); !s)
            GTEST_SKIP() << s.error().what();
        path_ = std::string(::testing::TempDir()) + "ghost-precopy-" + std::to_string(::getpid()) +
                "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
        fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_GE(fd_, 0);
    }
    void TearDown() override {
        if (fd_ >= 0)
            ::close(fd_);
        std::filesystem::remove(path_);
    }

    // The next image of pc, appended to the stream file.
    ghost::Result<ghost::ExportStats> round(pid_t pid, ghost::Precopy& pc, bool last) {
        ghost::CheckpointOptions o;
        o.fate = last ? ghost::Fate::Kill : ghost::Fate::Run;
        o.precopy = &pc;
        return ghost::checkpoint(engine_, pid, fd_, o);
    }

    // Restarts the sequence in the stream file as w's process: the copy
    // answers, as itself, with report.
    void restored_reports(Worker& w, const std::string& report) {
        pid_t from = 0;
        auto restored = w.restart(engine_, path_, true);
        ASSERT_TRUE(restored) << restored.error().what();
        EXPECT_EQ(w.ask("report", &from), report);
        EXPECT_EQ(from, *restored);
    }

    ghost::UserEngine engine_;
    std::string path_;
    int fd_ = -1;
};

// Three images: whole, then what mutate1 wrote, then (killing it) what
// mutate2 wrote; the restored process reports the memory of the last
// capture, its dropped pages stay dropped, and it goes on.
TEST_F(Precopy, LaterImagesHoldOnlyWrittenPagesAndTheSequenceRestoresExactly) {
    Worker w;
    const std::string r0 = w.ask("report");
    ASSERT_FALSE(r0.empty());
    ghost::Precopy pc;
    auto first = round(w.pid(), pc, false);
    ASSERT_TRUE(first) << first.error().what();
    EXPECT_EQ(pc.rounds(), 1u);
    EXPECT_GE(pc.last_page_bytes(), kPages * kPage);
    ASSERT_EQ(w.ask("report"), r0) << "the first image changed the worker";

    // Nothing written but the worker's reply: the second image is small.
    const std::string r1 = w.ask("mutate1");
    ASSERT_NE(r1, r0);
    auto second = round(w.pid(), pc, false);
    ASSERT_TRUE(second) << second.error().what();
    EXPECT_GE(pc.last_page_bytes(), (10 + kSmall) * kPage);
    EXPECT_LT(pc.last_page_bytes(), 200 * kPage) << "far more pages than the worker wrote";
    EXPECT_LT(second->bytes * 20, first->bytes);
    ASSERT_EQ(w.ask("report"), r1);

    const std::string r2 = w.ask("mutate2");
    auto last = round(w.pid(), pc, true);
    ASSERT_TRUE(last) << last.error().what();
    EXPECT_TRUE(pc.state().flags_early)
        << "the worker only waited in read(), yet its smaps was read again while held";
    EXPECT_EQ(pc.rounds(), 3u);
    EXPECT_GE(pc.last_page_bytes(), 5 * kPage);
    EXPECT_LT(pc.last_page_bytes(), 200 * kPage);
    w.killed();

    // The stream holds the three images, each the parent of the next.
    ASSERT_EQ(::lseek(fd_, 0, SEEK_SET), 0);
    ghost::image::FdSource src(fd_);
    std::uint64_t total = 0;
    for (std::uint32_t depth = 0; depth < 3; depth++) {
        auto img = ghost::image::read(src);
        ASSERT_TRUE(img) << img.error().what();
        EXPECT_EQ(img->parent ? img->parent->depth : 0u, depth);
        total += img->bytes;
    }
    EXPECT_EQ(total, first->bytes + second->bytes + last->bytes);

    ASSERT_NO_FATAL_FAILURE(restored_reports(w, r2));
    EXPECT_EQ(w.ask("check"), "0 0\n") << "a dropped page came back from an earlier image";
    EXPECT_NE(w.ask("mutate1"), r2);
}

// A page of a private file mapping that the process wrote (its own copy),
// carried by a round, then dropped (it reads the file again) before the
// last image: the copy reads the file there, not the dropped copy from the
// earlier image.
TEST_F(Precopy, ADroppedCopyOfAFilePageReadsTheFileAgain) {
    Worker w;
    ASSERT_EQ(w.ask("fmap"), "22\n");
    ghost::Precopy pc;
    auto first = round(w.pid(), pc, false);
    ASSERT_TRUE(first) << first.error().what();
    ASSERT_EQ(w.ask("fdrop"), "dropped\n"); // not read again before the last image
    auto last = round(w.pid(), pc, true);
    ASSERT_TRUE(last) << last.error().what();
    const pid_t old = w.pid();
    w.killed();
    auto restored = w.restart(engine_, path_, true);
    ASSERT_TRUE(restored) << restored.error().what();
    EXPECT_EQ(w.ask("fpeek"), "11\n") << "the dropped copy came back from the first image";
    std::filesystem::remove("/tmp/ghost-worker-file-" + std::to_string(old));
}

// A round that is not the last reads the process as it runs: what the
// process does between the capture and the read (pages rewritten and
// dropped, a region unmapped, another mapped) neither fails the round nor
// reaches the copy wrong. The unmapped region, which could not be read, is
// remembered to be written again; the next image carries what changed.
TEST_F(Precopy, ARoundReadsTheRunningProcessAndTheNextImageCarriesWhatChanged) {
    Worker w;
    ASSERT_FALSE(w.ask("report").empty());
    ghost::Precopy pc;
    std::string r1;
    pc.state().before_pages = [&] { r1 = w.ask("mutate1"); };
    auto first = round(w.pid(), pc, false);
    ASSERT_TRUE(first) << first.error().what();
    ASSERT_FALSE(r1.empty()) << "the round did not let the worker run before reading it";
    EXPECT_EQ(pc.state().unsent.bytes(), kSmall * kPage)
        << "the region unmapped before it was read is not marked to be written again";
    pc.state().before_pages = nullptr;
    ASSERT_EQ(w.ask("report"), r1);

    auto last = round(w.pid(), pc, true);
    ASSERT_TRUE(last) << last.error().what();
    EXPECT_GE(pc.last_page_bytes(), (10 + kSmall) * kPage)
        << "the pages written while the first image was read are missing";
    w.killed();
    ASSERT_NO_FATAL_FAILURE(restored_reports(w, r1));
    const std::string check = w.ask("check");
    EXPECT_TRUE(check.ends_with(" 0\n")) << "a dropped page is not zero: " << check;
}

// The write tracking is armed before the first image holds the process,
// which runs on meanwhile. What it does between the arming and the first
// capture (pages rewritten and dropped, a region unmapped, another mapped)
// is in the first image; from that capture on it is tracked like the rest:
// the last image carries only what mutate2 wrote, and the copy reports the
// memory of the last capture, with C, mapped after the arming.
TEST_F(Precopy, WhatTheProcessDoesWhileTheTrackingIsArmedIsTrackedFromTheFirstCapture) {
    Worker w;
    ASSERT_FALSE(w.ask("report").empty());
    ghost::Precopy pc;
    std::string r1;
    pc.state().after_arm = [&] { r1 = w.ask("mutate1"); };
    auto first = round(w.pid(), pc, false);
    ASSERT_TRUE(first) << first.error().what();
    ASSERT_FALSE(r1.empty()) << "the worker did not run between the arming and the capture";
    pc.state().after_arm = nullptr;
    EXPECT_GE(pc.last_page_bytes(), (kPages - 20 + kSmall) * kPage);
    ASSERT_EQ(w.ask("report"), r1);

    const std::string r2 = w.ask("mutate2");
    auto last = round(w.pid(), pc, true);
    ASSERT_TRUE(last) << last.error().what();
    EXPECT_GE(pc.last_page_bytes(), 5 * kPage) << "the pages mutate2 wrote are missing";
    EXPECT_LT(pc.last_page_bytes(), 200 * kPage)
        << "far more pages than the worker wrote: the tracking was not armed";
    w.killed();
    ASSERT_NO_FATAL_FAILURE(restored_reports(w, r2));
    EXPECT_EQ(w.ask("check"), "0 0\n") << "a dropped page came back";
}

// A round whose process changes its mappings before their flags are read
// (from the running process) is taken again, the process held while its
// smaps is read. The pages the first try's scan found written (and
// protected again) must still reach it: restored, the process reports the
// memory of the last capture. A mapping a fork would not pass on
// (MADV_DONTFORK) is read like any other.
TEST_F(Precopy, AnImageTakenAgainKeepsThePagesItsFirstTryFoundWritten) {
    Worker w;
    ghost::Precopy pc;
    auto first = round(w.pid(), pc, false);
    ASSERT_TRUE(first) << first.error().what();
    const std::string r1 = w.ask("mutate1");
    w.ask("dontfork");
    int tries = 0;
    pc.state().before_flags = [&] {
        if (tries++ == 0)
            w.ask("map");
    };
    auto second = round(w.pid(), pc, false);
    ASSERT_TRUE(second) << second.error().what();
    EXPECT_EQ(tries, 2) << "the changed mappings did not make the round try again";
    pc.state().before_flags = nullptr;
    // A (10 pages), C and the region "map" made.
    EXPECT_GE(pc.last_page_bytes(), (10 + 2 * kSmall) * kPage)
        << "the first try's pages are missing";
    ASSERT_EQ(w.ask("report"), r1);
    const std::string r2 = w.ask("mutate2");
    auto last = round(w.pid(), pc, true);
    ASSERT_TRUE(last) << last.error().what();
    w.killed();
    ASSERT_NO_FATAL_FAILURE(restored_reports(w, r2));
    EXPECT_EQ(w.ask("check"), "0 0\n");
}

// The last image reads the mappings' flags while the process still runs,
// its system calls watched. A madvise() it makes meanwhile (the worker
// marks C MADV_DONTFORK while it is watched) sends the flags to be read
// again while it is held: the last image has the flag, and the restored
// copy reports the memory of the last capture.
TEST_F(Precopy, AMappingChangedWhileTheLastImageWatchesIsReadAgain) {
    Worker w;
    ghost::Precopy pc;
    ASSERT_TRUE(round(w.pid(), pc, false));
    const std::string r1 = w.ask("mutate1"); // maps C
    ASSERT_TRUE(round(w.pid(), pc, false));
    bool sent = false;
    std::string reply;
    pc.state().watched_until = [&] {
        if (!sent) {
            sent = true;
            EXPECT_TRUE(w.send("dontfork"));
            return false;
        }
        return w.replied(reply);
    };
    auto last = round(w.pid(), pc, true);
    ASSERT_TRUE(last) << last.error().what();
    EXPECT_FALSE(reply.empty()) << "the worker did not answer while it was watched";
    EXPECT_FALSE(pc.state().flags_early) << "the flags read before the madvise() were kept";
    w.killed();

    ASSERT_EQ(::lseek(fd_, 0, SEEK_SET), 0);
    ghost::image::FdSource src(fd_);
    std::optional<ghost::image::Image> newest;
    for (int i = 0; i < 3; i++) {
        auto img = ghost::image::read(src);
        ASSERT_TRUE(img) << img.error().what();
        newest.emplace(std::move(*img));
    }
    EXPECT_TRUE(std::any_of(newest->vmas.begin(), newest->vmas.end(), [](const auto& v) {
        return v.rec.flags & GHOST_VMA_DONTFORK;
    })) << "the last image lacks the MADV_DONTFORK made while it watched";
    ASSERT_NO_FATAL_FAILURE(restored_reports(w, r1));
}

// A signal that comes while the last image watches the process is
// delivered as it came (SIGWINCH, ignored by the worker), and the image is
// taken with the flags read early: a signal changes no mapping.
TEST_F(Precopy, ASignalWhileTheLastImageWatchesIsDelivered) {
    Worker w;
    ghost::Precopy pc;
    ASSERT_TRUE(round(w.pid(), pc, false));
    const std::string r1 = w.ask("mutate1");
    int polls = 0;
    pc.state().watched_until = [&] {
        if (polls == 0) {
            EXPECT_EQ(::kill(w.pid(), SIGWINCH), 0);
        }
        return ++polls > 20; // about a millisecond for it to arrive
    };
    auto last = round(w.pid(), pc, true);
    ASSERT_TRUE(last) << last.error().what();
    EXPECT_GT(polls, 20);
    EXPECT_TRUE(pc.state().flags_early) << "a signal sent the flags to be read again";
    w.killed();
    ASSERT_NO_FATAL_FAILURE(restored_reports(w, r1));
}

// A sequence cut short (its last image truncated) or out of order is
// refused, naming the image; nothing is started.
TEST_F(Precopy, ABrokenSequenceIsRefused) {
    Worker w;
    ASSERT_FALSE(w.ask("report").empty());
    ghost::Precopy pc;
    auto first = round(w.pid(), pc, false);
    ASSERT_TRUE(first) << first.error().what();
    w.ask("mutate1");
    auto second = round(w.pid(), pc, false);
    ASSERT_TRUE(second) << second.error().what();

    ASSERT_EQ(::ftruncate(fd_, static_cast<off_t>(first->bytes + second->bytes - 100)), 0);
    auto r = w.restart(engine_, path_, true);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what().find("image 2"), std::string::npos) << r.error().what();

    // The second image alone: incremental, but first in the sequence.
    ghost::Precopy pc2;
    ASSERT_EQ(::ftruncate(fd_, 0), 0);
    ASSERT_EQ(::lseek(fd_, 0, SEEK_SET), 0);
    ASSERT_TRUE(round(w.pid(), pc2, false));
    w.ask("mutate2");
    const off_t whole = ::lseek(fd_, 0, SEEK_CUR);
    ASSERT_TRUE(round(w.pid(), pc2, false));
    const off_t end = ::lseek(fd_, 0, SEEK_CUR);
    const std::string only = path_ + ".second";
    {
        const int out = ::open(only.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_GE(out, 0);
        off_t at = whole;
        ASSERT_EQ(
            ::copy_file_range(fd_, &at, out, nullptr, static_cast<std::size_t>(end - whole), 0),
            end - whole);
        ::close(out);
    }
    r = w.restart(engine_, only, true);
    std::filesystem::remove(only);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what().find("first image of the sequence"), std::string::npos)
        << r.error().what();
    EXPECT_FALSE(w.ask("report").empty()) << "the worker did not run on";
}

// A pre-copy belongs to one process.
TEST_F(Precopy, ItBelongsToOneProcess) {
    Worker a, b;
    ASSERT_FALSE(a.ask("report").empty());
    const std::string rb = b.ask("report");
    ghost::Precopy pc;
    ASSERT_TRUE(round(a.pid(), pc, false));
    auto e = round(b.pid(), pc, false);
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code.value(), EINVAL);
    EXPECT_NE(e.error().what().find("this pre-copy is of process"), std::string::npos)
        << e.error().what();
    EXPECT_EQ(b.ask("report"), rb);
}

// A whole image restored from a stream (a pipe, as migd's restore stub
// reads it) has its anonymous memory read straight into place: the copy
// reports the memory of the capture, its dropped pages stay dropped, and
// it goes on. A byte flipped in a page is refused before anything runs.
class UserStream : public ::testing::Test {
  protected:
    void SetUp() override {
        path_ = std::string(::testing::TempDir()) + "ghost-stream-" + std::to_string(::getpid()) +
                "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    }
    void TearDown() override { std::filesystem::remove(path_); }

    ghost::Result<ghost::ExportStats> checkpoint(pid_t pid, ghost::Fate fate) {
        const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
            return ghost::Error::from_errno(errno, "open " + path_);
        ghost::CheckpointOptions o;
        o.fate = fate;
        auto st = ghost::checkpoint(engine_, pid, fd, o);
        ::close(fd);
        return st;
    }

    ghost::UserEngine engine_;
    std::string path_;
};

TEST_F(UserStream, AWholeImageFromAPipeRestoresItsMemoryExactly) {
    Worker w;
    ASSERT_FALSE(w.ask("report").empty());
    const std::string r1 = w.ask("mutate1"); // dropped pages, a mapping gone, one new
    ASSERT_FALSE(r1.empty());
    auto st = checkpoint(w.pid(), ghost::Fate::Kill);
    ASSERT_TRUE(st) << st.error().what();
    w.killed();

    pid_t from = 0;
    auto restored = w.restart(engine_, path_, false, true);
    ASSERT_TRUE(restored) << restored.error().what();
    EXPECT_EQ(w.ask("report", &from), r1);
    EXPECT_EQ(from, *restored);
    EXPECT_EQ(w.ask("check"), "0 0\n") << "a dropped page came back";
    const std::string r2 = w.ask("mutate2");
    EXPECT_NE(r2, r1);
    EXPECT_EQ(w.ask("report"), r2) << "the restored memory does not take writes";
}

TEST_F(UserStream, AFlippedPageByteInAPipeIsRefused) {
    Worker w;
    const std::string r0 = w.ask("report");
    ASSERT_FALSE(r0.empty());
    auto st = checkpoint(w.pid(), ghost::Fate::Run);
    ASSERT_TRUE(st) << st.error().what();

    // A byte in the middle of region A's pages (the image's largest run).
    const int fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ghost::image::FdSource src(fd);
    auto img = ghost::image::read(src);
    ASSERT_TRUE(img) << img.error().what();
    std::uint64_t at = 0, most = 0;
    for (const auto& v : img->vmas)
        for (const auto& r : v.runs)
            if (r.nr_pages > most)
                most = r.nr_pages, at = r.data_offset + r.nr_pages * kPage / 2;
    ASSERT_GE(most, kPages);
    unsigned char b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(at)), 1);
    b ^= 0x40;
    ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(at)), 1);
    ::close(fd);

    auto restored = w.restart(engine_, path_, false, true);
    ASSERT_FALSE(restored) << "a damaged image was restored as pid " << *restored;
    EXPECT_NE(restored.error().what().find("checksum"), std::string::npos)
        << restored.error().what();
    EXPECT_EQ(w.ask("report"), r0) << "the worker did not run on";
}

// A pre-copy's first image is read straight into buffers (Shadow::place):
// the image's kept copy has holes there. When a later image's mapping grew
// and no buffer can be made for its new extent (RLIMIT_AS here), the pages
// it inherits are only in the old buffer: apply() fails (ENOMEM) rather
// than leave the rebuild to copy them, as zeros, from those holes.
TEST(Shadow, PagesOnlyABufferHoldsAreNeverRestoredFromTheImagesHoles) {
    const pid_t child = ::fork();
    if (child == 0) {
        constexpr std::uint64_t at = 0x7f0000000000ULL, page = 4096;
        ghost::user::Shadow shadow;
        ghost::image::Image whole;
        ghost::image::Vma v;
        v.rec.start = at;
        v.rec.end = at + 16 * page;
        const ghost::image::PageRun part{at, 16, 0, false};
        const auto placed = shadow.place(whole, v, part);
        if (placed.size() != 16 * page)
            ::_exit(2);
        std::memset(placed.data(), 'x', placed.size());
        v.runs.push_back(part);
        whole.vmas.push_back(v);
        if (!shadow.apply(whole, {}))
            ::_exit(3);
        ghost::image::Image next;
        next.parent = ghost_parent{};
        ghost::image::Vma grown = v;
        grown.rec.end = at + (64ULL << 30);
        grown.runs = {{at, 16, 0, true}};
        next.vmas.push_back(grown);
        const rlimit as{16ULL << 30, 16ULL << 30};
        if (::setrlimit(RLIMIT_AS, &as) != 0)
            ::_exit(4);
        const auto r = shadow.apply(next, {});
        if (r)
            ::_exit(5);
        std::fprintf(stderr, "%s\n", r.error().what().c_str());
        ::_exit(r.error().code.value() == ENOMEM &&
                        r.error().what().find("read into a buffer only") != std::string::npos
                    ? 0
                    : 6);
    }
    ASSERT_GT(child, 0);
    int st = 0;
    ASSERT_EQ(::waitpid(child, &st, 0), child);
    ASSERT_TRUE(WIFEXITED(st)) << "status " << st;
    EXPECT_EQ(WEXITSTATUS(st), 0) << "2-4: setup; 5: applied (the rebuild would restore zeros)";
}

} // namespace
