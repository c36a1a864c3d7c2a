// SPDX-License-Identifier: GPL-2.0
// Which pages an export carries (libghost/src/user/page_runs.hpp) and the
// mappings it reads them for (mappings.hpp), in a child process: the
// PAGEMAP_SCAN regions give the same runs as reading the pagemap a page at
// a time, for holes, dropped pages, a file mapping's private copies, a
// guard page and a pre-copy parent's stretches; smaps read before the
// mappings changed is read again.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ghost/image.hpp"
#include "user/dirty.hpp"
#include "user/mappings.hpp"
#include "user/page_runs.hpp"
#include "user/pagemap_scan.hpp"
#include "user/proc.hpp"
#include "user/tracee.hpp"
#include "user/wp_tracker.hpp"

namespace {

using ghost::image::Vma;
using ghost::user::MapEntry;

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kAnon = 0x6e0000000000ULL;  // 256 pages
constexpr std::uint64_t kFile = 0x6e1000000000ULL;  // a 64-page file, private
constexpr std::uint64_t kGuard = 0x6e2000000000ULL; // 8 pages, a guard at 3
constexpr std::uint64_t kLate = 0x6e3000000000ULL;  // mapped when asked
constexpr std::uint64_t kWide = 0x6e4000000000ULL;  // 3 page tables' worth, 2 pages
constexpr std::uint64_t kHuge = 0x6e5000000000ULL;  // 512 MiB, a few pages
constexpr int kAnonPages = 256, kFilePages = 64, kWidePages = 1536;
// Of kHuge, pages 1, kMid-3..kMid+2 and the last are present; of
// 98300..98309 all but 98305 (dropped).
constexpr int kHugePages = 131072, kMid = kHugePages / 2;

void* map_at(std::uint64_t at, std::size_t len, int flags, int fd = -1) {
    void* p = mmap(reinterpret_cast<void*>(at), len, PROT_READ | PROT_WRITE,
                   flags | MAP_FIXED_NOREPLACE, fd, 0);
    if (p == MAP_FAILED)
        _exit(2);
    return p;
}

// A child with the mappings above, which maps kLate when it reads a byte
// from its pipe (or, for 'w', writes kHuge's pages kMid-1 and kMid) and
// answers with one.
class Child {
  public:
    explicit Child(bool guard) {
        char path[] = "/tmp/ghost-page-runs-XXXXXX";
        const int fd = mkstemp(path);
        EXPECT_GE(fd, 0);
        unlink(path);
        EXPECT_EQ(ftruncate(fd, kFilePages * kPage), 0);
        EXPECT_EQ(pipe(ask_), 0);
        EXPECT_EQ(pipe(answer_), 0);
        pid_ = fork();
        if (pid_ == 0) {
            auto* a = static_cast<volatile char*>(
                map_at(kAnon, kAnonPages * kPage, MAP_PRIVATE | MAP_ANONYMOUS));
            for (int i = 0; i < kAnonPages; i += 3)
                a[i * kPage] = 1;
            for (int i = 100; i < 140; i++)
                a[i * kPage] = 2;
            madvise(const_cast<char*>(a) + 110 * kPage, 20 * kPage, MADV_DONTNEED);
            // Its middle page table never filled: the kernel reports that
            // hole without looking at its entries.
            auto* w = static_cast<volatile char*>(
                map_at(kWide, kWidePages * kPage, MAP_PRIVATE | MAP_ANONYMOUS));
            w[0] = 1;
            w[(kWidePages - 1) * kPage] = 1;
            auto* h = static_cast<volatile char*>(
                map_at(kHuge, kHugePages * kPage, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE));
            for (int i :
                 {1, kMid - 3, kMid - 2, kMid - 1, kMid, kMid + 1, kMid + 2, kHugePages - 1})
                h[static_cast<std::uint64_t>(i) * kPage] = 5;
            for (int i = 98300; i < 98310; i++)
                h[static_cast<std::uint64_t>(i) * kPage] = 6;
            madvise(const_cast<char*>(h) + 98305 * kPage, kPage, MADV_DONTNEED);
            auto* f =
                static_cast<volatile char*>(map_at(kFile, kFilePages * kPage, MAP_PRIVATE, fd));
            for (int i = 0; i < 20; i++)
                (void)f[i * kPage]; // in the page cache: not the process's own
            for (int i = 10; i < 16; i++)
                f[i * kPage] = 3; // private copies
            if (guard) {
                auto* g =
                    static_cast<char*>(map_at(kGuard, 8 * kPage, MAP_PRIVATE | MAP_ANONYMOUS));
                std::memset(g, 4, 8 * kPage);
                if (madvise(g + 3 * kPage, kPage, 102 /* MADV_GUARD_INSTALL */) != 0)
                    _exit(3);
            }
            char c = 0;
            if (write(answer_[1], &c, 1) != 1)
                _exit(4);
            while (read(ask_[0], &c, 1) == 1) {
                if (c == 'w') {
                    h[static_cast<std::uint64_t>(kMid - 1) * kPage] = 7;
                    h[static_cast<std::uint64_t>(kMid) * kPage] = 7;
                } else
                    map_at(kLate, kPage, MAP_PRIVATE | MAP_ANONYMOUS);
                if (write(answer_[1], &c, 1) != 1)
                    _exit(4);
            }
            _exit(0);
        }
        close(fd);
        char c = 0;
        ready_ = read(answer_[0], &c, 1) == 1;
    }
    ~Child() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        for (int f : {ask_[0], ask_[1], answer_[0], answer_[1]})
            close(f);
    }
    pid_t pid() const { return pid_; }
    bool ready() const { return ready_; }
    bool map_late() {
        char c = 0;
        return write(ask_[1], &c, 1) == 1 && read(answer_[0], &c, 1) == 1;
    }
    bool write_middle() {
        char c = 'w';
        return write(ask_[1], &c, 1) == 1 && read(answer_[0], &c, 1) == 1;
    }

  private:
    pid_t pid_ = -1;
    int ask_[2] = {-1, -1}, answer_[2] = {-1, -1};
    bool ready_ = false;
};

Vma vma_of(std::uint64_t start, int pages, bool file) {
    Vma v;
    v.rec.start = start;
    v.rec.end = start + static_cast<std::uint64_t>(pages) * kPage;
    v.rec.flags = file ? GHOST_VMA_FILE : 0;
    return v;
}

std::string runs_text(const Vma& v) {
    std::string s = std::to_string(v.rec.nr_pages) + " pages:";
    for (const auto& r : v.runs)
        s += " " + std::to_string((r.addr - v.rec.start) / kPage) + "+" +
             std::to_string(r.nr_pages) + (r.parent ? "p" : "");
    return s;
}

// Whether this kernel answers the query find_runs() makes (else it reads
// the pagemap and the comparisons below hold trivially).
bool scan_answers(int pagemap) {
    ghost::user::ScanQuery q;
    q.category_anyof_mask = ghost::user::kPageIsPresent | ghost::user::kPageIsSwapped;
    q.return_mask = q.category_anyof_mask | ghost::user::kPageIsGuard;
    return static_cast<bool>(ghost::user::pagemap_scan(
        pagemap, kAnon, kAnon + kPage, q,
        [](std::uint64_t, std::uint64_t, std::uint64_t) -> ghost::Result<void> { return {}; }));
}

class PageRuns : public ::testing::Test {
  protected:
    void SetUp() override {
        auto pm = ghost::user::open_pagemap(child_.pid());
        ASSERT_TRUE(pm) << pm.error().what();
        pagemap_ = std::move(*pm);
        ASSERT_TRUE(child_.ready());
        if (!scan_answers(pagemap_.get()))
            GTEST_SKIP() << "PAGEMAP_SCAN does not report guard pages here (Linux 6.15+)";
    }
    // Both ways, which must agree; the runs found.
    std::string both(Vma v, const ghost::user::Parent* parent = nullptr) {
        Vma read = v;
        ghost::user::PagemapBuffer buf;
        auto a = ghost::user::find_runs(pagemap_.get(), v, buf, parent);
        auto b = ghost::user::read_runs(pagemap_.get(), read, buf, parent);
        EXPECT_EQ(static_cast<bool>(a), static_cast<bool>(b));
        if (!a || !b)
            return "error: " + (a ? std::string("-") : a.error().what()) + " / " +
                   (b ? std::string("-") : b.error().what());
        EXPECT_EQ(runs_text(v), runs_text(read));
        return runs_text(v);
    }

    Child child_{true};
    ghost::UniqueFd pagemap_;
};

TEST_F(PageRuns, AnonymousPagesWithHolesAndDroppedPages) {
    // Every third page, all of 100..139 but the 20 dropped from 110.
    int expect = 0;
    for (int i = 0; i < kAnonPages; i++)
        expect += !(i >= 110 && i < 130) && (i % 3 == 0 || (i >= 100 && i < 140));
    const auto got = both(vma_of(kAnon, kAnonPages, false));
    EXPECT_EQ(got.substr(0, got.find(' ')), std::to_string(expect)) << got;
    EXPECT_NE(got.find(" 96+1 99+11 130+10 141+1 "), std::string::npos) << got;
}

TEST_F(PageRuns, AMappingWhosePagesAreMostlyHoles) {
    EXPECT_EQ(both(vma_of(kWide, kWidePages, false)), "2 pages: 0+1 1535+1");
    // From inside a hole to inside another, and from a page to its end.
    EXPECT_EQ(both(vma_of(kWide + 5 * kPage, kWidePages - 10, false)), "0 pages:");
    EXPECT_EQ(both(vma_of(kWide + (kWidePages - 1) * kPage, 1, false)), "1 pages: 0+1");
}

// A large mapping of few pages, whole and in parts that start and end in
// its holes and runs, with and without a pre-copy parent.
TEST_F(PageRuns, ALargeMappingOfFewPagesWholeAndInParts) {
    EXPECT_EQ(both(vma_of(kHuge, kHugePages, false)),
              "17 pages: 1+1 65533+6 98300+5 98306+4 131071+1");
    EXPECT_EQ(both(vma_of(kHuge + (kMid - 2) * kPage, kHugePages - kMid + 2, false)),
              "15 pages: 0+5 32766+5 32772+4 65537+1");
    EXPECT_EQ(both(vma_of(kHuge, kMid + 1, false)), "5 pages: 1+1 65533+4");
    // A pre-copy parent that holds 65530..65539, of which 65535..65536 were
    // written since.
    ghost::user::Ranges pages, tracked, written;
    pages.add(kHuge + 65530 * kPage, kHuge + 65540 * kPage);
    tracked.add(kHuge, kHuge + kHugePages * kPage);
    written.add(kHuge + 65535 * kPage, kHuge + 65537 * kPage);
    ghost_parent rec{};
    auto parent = ghost::user::Parent::of_round(rec, pages, tracked, written);
    EXPECT_EQ(both(vma_of(kHuge, kHugePages, false), &parent),
              "17 pages: 1+1 65533+2p 65535+2 65537+2p 98300+5 98306+4 131071+1");
}

TEST_F(PageRuns, OfAFileMappingOnlyThePrivateCopies) {
    EXPECT_EQ(both(vma_of(kFile, kFilePages, true)), "6 pages: 10+6");
}

TEST_F(PageRuns, AGuardPageIsRefusedAtItsAddress) {
    const auto got = both(vma_of(kGuard, 8, false));
    char at[32];
    std::snprintf(at, sizeof(at), "%#llx", static_cast<unsigned long long>(kGuard + 3 * kPage));
    EXPECT_NE(got.find("guard pages (MADV_GUARD_INSTALL) at " + std::string(at)), std::string::npos)
        << got;
}

TEST_F(PageRuns, APreCopyParentsPagesMakeRunsOfTheirOwn) {
    // The parent has pages 0..199, tracking covers 0..255 but 250..255, and
    // pages 30..39 and 130..159 were written since: what it holds and was
    // not written since is inherited.
    ghost::user::Ranges pages, tracked, written;
    pages.add(kAnon, kAnon + 200 * kPage);
    tracked.add(kAnon, kAnon + 250 * kPage);
    written.add(kAnon + 30 * kPage, kAnon + 40 * kPage);
    written.add(kAnon + 130 * kPage, kAnon + 160 * kPage);
    ghost_parent rec{};
    auto parent = ghost::user::Parent::of_round(rec, pages, tracked, written);
    const auto got = both(vma_of(kAnon, kAnonPages, false), &parent);
    EXPECT_NE(got.find(": 0+1p 3+1p "), std::string::npos) << got;
    EXPECT_NE(got.find(" 27+1p 30+1 33+1 36+1 39+1 42+1p "), std::string::npos) << got;
    EXPECT_NE(got.find(" 96+1p 99+11p 130+10 141+1 "), std::string::npos) << got;
    EXPECT_NE(got.find(" 156+1 159+1 162+1p "), std::string::npos) << got;
    EXPECT_NE(got.find(" 198+1p 201+1 "), std::string::npos) << got;
}

// Write tracking of a large mapping of few pages: the scan that arms it
// reports every present page (and no hole), and after the child writes two
// pages, the next scan reports just those there.
TEST(WpTracker, TheArmingScanReportsThePagesThereAndTheNextOnlyThoseWritten) {
    if (auto s = ghost::user::WpTracker::supported(); !s)
        GTEST_SKIP() << s.error().what();
    Child child(false);
    ASSERT_TRUE(child.ready());
    std::optional<ghost::user::WpTracker> tracker;
    auto made = ghost::user::with_held(child.pid(), [&](ghost::user::Tracee& t) {
        auto tr = ghost::user::WpTracker::attach(t);
        if (!tr)
            return ghost::Result<void>(tr.error());
        tracker.emplace(std::move(*tr));
        return ghost::Result<void>();
    });
    ASSERT_TRUE(made) << made.error().what();
    using Range = std::pair<std::uint64_t, std::uint64_t>;
    const auto in_huge = [](const ghost::user::Ranges& r) {
        std::vector<Range> out;
        for (const auto& [from, to] : r.list())
            if (from >= kHuge && to <= kHuge + kHugePages * kPage)
                out.emplace_back((from - kHuge) / kPage, (to - kHuge) / kPage);
        return out;
    };
    auto armed = tracker->scan(child.pid());
    ASSERT_TRUE(armed) << armed.error().what();
    EXPECT_EQ(in_huge(*armed), (std::vector<Range>{{1, 2},
                                                   {kMid - 3, kMid + 3},
                                                   {98300, 98305},
                                                   {98306, 98310},
                                                   {kHugePages - 1, kHugePages}}));
    ASSERT_TRUE(child.write_middle());
    auto written = tracker->scan(child.pid());
    ASSERT_TRUE(written) << written.error().what();
    EXPECT_EQ(in_huge(*written), (std::vector<Range>{{kMid - 1, kMid + 1}}));
}

TEST(Ranges, NextChangeIsWhereContainsChanges) {
    ghost::user::Ranges r;
    r.add(10 * kPage, 20 * kPage);
    r.add(30 * kPage, 40 * kPage);
    EXPECT_EQ(r.next_change(0), 10 * kPage);
    EXPECT_EQ(r.next_change(10 * kPage), 20 * kPage);
    EXPECT_EQ(r.next_change(19 * kPage), 20 * kPage);
    EXPECT_EQ(r.next_change(20 * kPage), 30 * kPage);
    EXPECT_EQ(r.next_change(35 * kPage), 40 * kPage);
    EXPECT_EQ(r.next_change(40 * kPage), UINT64_MAX);
}

TEST(EarlySmaps, ReadBeforeTheMappingsChangedItIsReadAgain) {
    Child child(false);
    ASSERT_TRUE(child.ready());
    auto smaps = ghost::user::EarlySmaps::start(child.pid());
    usleep(100 * 1000); // long done: the child's smaps is a few KiB
    ASSERT_TRUE(child.map_late());
    auto plain = ghost::user::read_maps(child.pid());
    ASSERT_TRUE(plain) << plain.error().what();
    auto got = smaps.get(plain);
    ASSERT_TRUE(got) << got.error().what();
    ASSERT_EQ(got->size(), plain->size());
    bool late = false;
    for (const MapEntry& m : *got)
        if (m.start == kLate) {
            late = true;
            EXPECT_TRUE(m.has_flag("rd")) << m.vmflags; // smaps's flags, not maps's
        }
    EXPECT_TRUE(late);
}

} // namespace
