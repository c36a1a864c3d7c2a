// SPDX-License-Identifier: GPL-2.0
// The user engine's copy-on-write capture (Fate::Run, ghostctl checkpoint
// --leave-running): the process forks inside, runs on at once, and its pages
// are copied from the snapshot child. These tests check what a process and
// its image must show: the image is one instant of a process that never
// stopped writing; the process runs on, gets no SIGCHLD and keeps no zombie
// child; a mapping a fork would not copy as it is (MADV_WIPEONFORK) still
// reaches the image intact.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ghost/engine.hpp"
#include "ghost/image.hpp"
#include "ghost/process.hpp"
#include "ghost/user_engine.hpp"
#include "proc_state.hpp"

namespace {

using testing_util::children_of;
using testing_util::stat_field;
using testing_util::state_of;

constexpr std::size_t kPage = 4096;
constexpr std::size_t kPages = 8192; // 32 MiB, rewritten pass after pass
constexpr std::size_t kWipe = 256;   // 1 MiB of 0xab under MADV_WIPEONFORK
volatile sig_atomic_t g_sigchld = 0;

// Writes the pass number into the first word of every page of its buffer,
// pass after pass, without pause. After the first pass reports "BUF WIPE\n"
// (addresses; WIPE 0 without wipe); reports "sigchld\n" if it ever gets a SIGCHLD.
[[noreturn]] void writer(int out, bool wipe) {
    struct sigaction sa {};
    sa.sa_handler = [](int) { g_sigchld = 1; };
    ::sigaction(SIGCHLD, &sa, nullptr);
    auto* buf = static_cast<unsigned char*>(::mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE,
                                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    unsigned char* wiped = nullptr;
    if (wipe) {
        wiped = static_cast<unsigned char*>(::mmap(nullptr, kWipe * kPage, PROT_READ | PROT_WRITE,
                                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        std::memset(wiped, 0xab, kWipe * kPage);
        if (::madvise(wiped, kWipe * kPage, MADV_WIPEONFORK) != 0)
            ::_exit(4);
    }
    // Every page is present before the addresses are told.
    for (std::size_t i = 0; i < kPages; i++)
        *reinterpret_cast<volatile std::uint64_t*>(buf + i * kPage) = 1;
    char line[64];
    const int n = std::snprintf(line, sizeof(line), "%" PRIxPTR " %" PRIxPTR "\n",
                                reinterpret_cast<std::uintptr_t>(buf),
                                reinterpret_cast<std::uintptr_t>(wiped));
    if (::write(out, line, static_cast<std::size_t>(n)) != n)
        ::_exit(3);
    bool told = false;
    for (std::uint64_t pass = 2;; pass++) {
        for (std::size_t i = 0; i < kPages; i++)
            *reinterpret_cast<volatile std::uint64_t*>(buf + i * kPage) = pass;
        if (g_sigchld && !told) {
            told = ::write(out, "sigchld\n", 8) == 8;
        }
    }
}

struct Writer {
    pid_t pid = -1;
    int rd = -1;
    std::uint64_t buf = 0, wipe = 0;

    explicit Writer(bool wipe_region) {
        int p[2];
        EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
        pid = ::fork();
        if (pid == 0) {
            ::close(p[0]);
            writer(p[1], wipe_region);
        }
        ::close(p[1]);
        rd = p[0];
        const std::string first = read_for(5000);
        EXPECT_EQ(std::sscanf(first.c_str(), "%" SCNx64 " %" SCNx64, &buf, &wipe), 2) << first;
    }
    ~Writer() {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        ::close(rd);
    }
    // What it wrote within ms (empty if nothing).
    std::string read_for(int ms) {
        std::string s;
        pollfd p{rd, POLLIN, 0};
        while (::poll(&p, 1, ms) > 0) {
            char b[256];
            const ssize_t n = ::read(rd, b, sizeof(b));
            if (n <= 0)
                break;
            s.append(b, static_cast<std::size_t>(n));
            if (s.find('\n') != std::string::npos && ms > 1000)
                break;
        }
        return s;
    }
};

// The first word of each page of [addr, addr + pages * 4096) in the image.
std::vector<std::uint64_t> words_at(std::span<const std::byte> view, const ghost::image::Image& img,
                                    std::uint64_t addr, std::size_t pages) {
    std::vector<std::uint64_t> out;
    for (const auto& v : img.vmas)
        for (const auto& r : v.runs)
            for (std::uint64_t i = 0; i < r.nr_pages; i++) {
                const std::uint64_t a = r.addr + i * kPage;
                if (a < addr || a >= addr + pages * kPage)
                    continue;
                std::uint64_t w = 0;
                std::memcpy(&w, view.data() + r.data_offset + i * kPage, sizeof(w));
                out.push_back(w);
            }
    return out;
}

// Exports w's process with Fate::Run into a memory ghost; returns its bytes.
struct Exported {
    std::unique_ptr<ghost::MemoryGhost> ghost;
    ghost::ExportStats stats;
};

Exported export_running(const Writer& w) {
    ghost::UserEngine engine;
    auto g = engine.create_memory();
    EXPECT_TRUE(g) << g.error().what();
    auto st = (*g)->export_process(w.pid, ghost::Fate::Run);
    EXPECT_TRUE(st) << st.error().what();
    return {std::move(*g), st ? *st : ghost::ExportStats{}};
}

// Every page of the buffer holds one pass number, and the image is one
// instant of the writer: the pages the pass under way had reached hold p,
// the others p - 1 (never two boundaries, never a gap of more than one).
TEST(UserCow, ARunningExportIsOneInstantOfAProcessThatNeverStopped) {
    Writer w(false);
    auto e = export_running(w);
    ASSERT_TRUE(e.ghost);
    auto view = e.ghost->view();
    ASSERT_TRUE(view) << view.error().what();
    auto img = ghost::image::read(view->bytes());
    ASSERT_TRUE(img) << img.error().what();
    const auto words = words_at(view->bytes(), *img, w.buf, kPages);
    ASSERT_EQ(words.size(), kPages);
    const std::uint64_t first = words.front();
    std::size_t boundaries = 0;
    for (std::size_t i = 1; i < words.size(); i++) {
        if (words[i] == words[i - 1])
            continue;
        boundaries++;
        EXPECT_EQ(words[i] + 1, words[i - 1]) << "page " << i;
    }
    EXPECT_GE(first, 1u);
    EXPECT_LE(boundaries, 1u) << "pages from more than one instant";
    // It runs on, as it was: writing, not stopped, no child, no SIGCHLD.
    EXPECT_NE(state_of(w.pid), 'T');
    EXPECT_EQ(children_of(w.pid), "") << "a snapshot child is left";
    EXPECT_EQ(w.read_for(300).find("sigchld"), std::string::npos);
}

// Several exports in a row: each leaves nothing behind.
TEST(UserCow, RepeatedExportsLeaveNoChildAndNoSignal) {
    Writer w(false);
    for (int i = 0; i < 5; i++) {
        auto e = export_running(w);
        ASSERT_TRUE(e.ghost);
        EXPECT_EQ(children_of(w.pid), "") << "after export " << i;
    }
    EXPECT_EQ(w.read_for(300).find("sigchld"), std::string::npos);
    EXPECT_NE(state_of(w.pid), 'T');
}

// utime + stime (fields 14 and 15), in clock ticks.
std::uint64_t cpu_ticks_of(pid_t pid) {
    const std::string u = stat_field(pid, 14), s = stat_field(pid, 15);
    return u.empty() || s.empty() ? 0 : std::stoull(u) + std::stoull(s);
}

// "SigBlk:" of /proc/PID/status.
std::string blocked_of(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("SigBlk:", 0) == 0)
            return line;
    return {};
}

// A process exporting w's (as migd does) into a pipe nobody reads: it
// blocks once the pipe is full, in the middle of the page copy, and is
// then killed, as migd would be. Returns once it is gone.
void kill_exporter_mid_copy(const Writer& w, ghost::Fate fate) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    const pid_t e = ::fork();
    if (e == 0) {
        ghost::UserEngine engine;
        ghost::CheckpointOptions o;
        o.fate = fate;
        (void)ghost::checkpoint(engine, w.pid, p[1], o);
        ::_exit(0);
    }
    ::close(p[1]);
    // Full: the image's first bytes and some of its pages are in the pipe.
    int queued = 0;
    for (int i = 0; i < 500 && queued < 65536; i++) {
        ::usleep(10000);
        ASSERT_EQ(::ioctl(p[0], FIONREAD, &queued), 0);
    }
    EXPECT_GE(queued, 65536) << "the exporter never filled its pipe";
    ::usleep(100000);
    ::kill(e, SIGKILL);
    ASSERT_EQ(::waitpid(e, nullptr, 0), e);
    ::close(p[0]);
}

// An exporter that dies while it copies the pages leaves the process
// running as it was and no second copy: stop-and-copy, the process was
// held with our registers and every signal blocked, and must come back
// with its own (it runs on writing, its mask unchanged); copy-on-write,
// the snapshot child must not run on as a copy of it (killed with its
// tracer; a zombie, which the next export reaps: below).
TEST(UserCow, AnExporterKilledDuringTheCopyLeavesOneProcessAsItWas) {
    for (const ghost::Fate fate : {ghost::Fate::Kill, ghost::Fate::Run}) {
        SCOPED_TRACE(fate == ghost::Fate::Kill ? "stop-and-copy" : "copy-on-write");
        Writer w(false);
        const std::string mask = blocked_of(w.pid);
        ASSERT_FALSE(mask.empty());
        kill_exporter_mid_copy(w, fate);
        std::string kids = children_of(w.pid);
        for (int i = 0; i < 200 && !kids.empty(); i++) {
            bool all_dead = true;
            std::istringstream in(kids);
            for (pid_t k; in >> k;)
                all_dead &= state_of(k) == 'Z' || state_of(k) == '?';
            if (all_dead)
                break;
            ::usleep(10000);
            kids = children_of(w.pid);
        }
        std::istringstream in(kids);
        for (pid_t k; in >> k;) {
            EXPECT_TRUE(state_of(k) == 'Z' || state_of(k) == '?')
                << "the snapshot " << k << " runs on (state " << state_of(k) << ")";
            // Killed with its tracer, before it ran a single instruction
            // (left to run, it would return from our clone into the
            // process's code and die of whatever that does).
            if (state_of(k) == 'Z') {
                EXPECT_EQ(stat_field(k, 52), std::to_string(SIGKILL)) << "its exit status";
            }
        }
        ::usleep(100000);
        ASSERT_NE(state_of(w.pid), 'Z') << "the process died";
        EXPECT_NE(state_of(w.pid), 'T') << "the process stays stopped";
        EXPECT_EQ(blocked_of(w.pid), mask);
        // It runs on: it spins writing, so its CPU time grows.
        const auto t0 = cpu_ticks_of(w.pid);
        ::usleep(300000);
        EXPECT_GT(cpu_ticks_of(w.pid), t0) << "it no longer runs";
        EXPECT_EQ(w.read_for(100).find("sigchld"), std::string::npos);
    }
}

// The zombie children of w's process, once every child is one (or after
// two seconds).
std::vector<pid_t> zombie_children(const Writer& w) {
    std::vector<pid_t> out;
    for (int i = 0; i < 200; i++) {
        out.clear();
        bool all = true;
        std::istringstream in(children_of(w.pid));
        for (pid_t k; in >> k;) {
            all &= state_of(k) == 'Z';
            out.push_back(k);
        }
        if (all)
            break;
        ::usleep(10000);
    }
    return out;
}

// The snapshot a dead exporter leaves (a zombie child of the process, that
// its own wait() never sees) is named so that it can be told from the
// process's own children, and is reaped: by reap_leftover_snapshots(), as
// migd's recovery calls it, and by the next export, which exports the
// process where it refused it ("has children"). No SIGCHLD reaches it.
TEST(UserCow, ASnapshotADeadExporterLeftIsReapedBeforeTheNextExport) {
    Writer w(false);
    kill_exporter_mid_copy(w, ghost::Fate::Run);
    auto left = zombie_children(w);
    ASSERT_EQ(left.size(), 1u) << "one snapshot, a zombie";
    std::string name;
    std::getline(std::ifstream("/proc/" + std::to_string(left[0]) + "/comm"), name);
    EXPECT_EQ(name, "ghost-snapshot");
    auto reaped = ghost::reap_leftover_snapshots(w.pid);
    ASSERT_TRUE(reaped) << reaped.error().what();
    EXPECT_EQ(*reaped, 1);
    EXPECT_EQ(children_of(w.pid), "");
    EXPECT_EQ(::kill(left[0], 0), -1) << "the snapshot's pid is still taken";
    reaped = ghost::reap_leftover_snapshots(w.pid);
    ASSERT_TRUE(reaped) << reaped.error().what();
    EXPECT_EQ(*reaped, 0);

    kill_exporter_mid_copy(w, ghost::Fate::Run);
    ASSERT_EQ(zombie_children(w).size(), 1u);
    auto e = export_running(w);
    ASSERT_TRUE(e.ghost) << "the next export refused it";
    EXPECT_GT(e.stats.bytes, kPages * kPage);
    EXPECT_EQ(children_of(w.pid), "") << "a snapshot is left";
    EXPECT_NE(state_of(w.pid), 'T');
    EXPECT_EQ(w.read_for(300).find("sigchld"), std::string::npos);
}

// Spins forever inside a restartable sequence's critical section, which it
// enters (counting an entry in *entries, then pointing its rseq area's
// rseq_cs at the section) again from the abort handler whenever the kernel
// aborts it. So, while it spins, rseq_cs is set, unless the kernel cleared
// it without an abort: then it spins on unprotected, for good.
[[noreturn]] void spin_in_rseq_section(volatile std::uint64_t* entries, struct rseq* area) {
    asm volatile(".pushsection __rseq_cs, \"aw\"\n"
                 ".balign 32\n"
                 "3: .long 0, 0\n"           // version, flags
                 ".quad 1f, (2f - 1f), 4f\n" // start_ip, post_commit_offset, abort_ip
                 ".popsection\n"
                 "0: lock incq (%[entries])\n"
                 "leaq 3b(%%rip), %%rax\n"
                 "movq %%rax, 8(%[area])\n" // area->rseq_cs
                 "1: jmp 1b\n"              // the section: one instruction
                 "2: .long 0x53053053\n"    // RSEQ_SIG, just before the handler
                 "4: jmp 0b\n"              // the abort handler: in again
                 :
                 : [entries] "r"(entries), [area] "r"(area)
                 : "rax", "memory", "cc");
    __builtin_unreachable();
}

// A process held inside a restartable sequence's critical section is let
// go at the section's abort handler, as a preemption would leave it: the
// system calls we run in it make the kernel clear its rseq_cs (their rip
// is outside the section) without the abort, and a process put back inside
// the section would go on there unprotected (here: rseq_cs stays 0).
TEST(UserCow, AProcessHeldInAnRseqSectionGoesOnFromItsAbortHandler) {
    if (__rseq_size == 0)
        GTEST_SKIP() << "glibc registered no rseq area (kernel or tunable)";
    // The child's count, read from it (shared memory would be refused).
    static volatile std::uint64_t entries_here = 0;
    volatile std::uint64_t* entries = &entries_here;
    // The child's area is at the same address as ours (its thread pointer
    // is the one this thread had at the fork).
    auto* area = reinterpret_cast<struct rseq*>(static_cast<char*>(__builtin_thread_pointer()) +
                                                __rseq_offset);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        spin_in_rseq_section(entries, area);
    }
    struct Reap {
        pid_t pid;
        ~Reap() {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    } reap{pid};
    const auto word_of_child = [&](const volatile void* at) {
        std::uint64_t w = 0;
        iovec local{&w, sizeof(w)};
        iovec remote{const_cast<void*>(at), sizeof(w)};
        return ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == sizeof(w) ? w : ~0ULL;
    };
    const auto cs_of_child = [&] { return word_of_child(reinterpret_cast<char*>(area) + 8); };
    for (int i = 0; i < 500 && word_of_child(entries) == 0; i++)
        ::usleep(1000);
    ASSERT_GT(word_of_child(entries), 0u) << "the child never entered its section";
    for (int round = 0; round < 3; round++) {
        ghost::UserEngine engine;
        auto g = engine.create_memory();
        ASSERT_TRUE(g) << g.error().what();
        auto st = (*g)->export_process(pid, ghost::Fate::Run);
        ASSERT_TRUE(st) << st.error().what();
        std::uint64_t cs = 0;
        for (int i = 0; i < 200 && (cs = cs_of_child()) == 0; i++)
            ::usleep(5000);
        EXPECT_NE(cs, 0u) << "round " << round
                          << ": it went on inside its section with rseq_cs cleared";
    }
}

// A fork's child sees a MADV_WIPEONFORK mapping zeroed: such a process is
// held for the whole copy instead, and the image has the real bytes.
TEST(UserCow, WipeOnForkMemoryIsCopiedFromTheProcessItself) {
    Writer w(true);
    ASSERT_NE(w.wipe, 0u);
    auto e = export_running(w);
    ASSERT_TRUE(e.ghost);
    auto view = e.ghost->view();
    ASSERT_TRUE(view);
    auto img = ghost::image::read(view->bytes());
    ASSERT_TRUE(img) << img.error().what();
    const auto words = words_at(view->bytes(), *img, w.wipe, kWipe);
    ASSERT_EQ(words.size(), kWipe);
    for (std::size_t i = 0; i < words.size(); i++)
        ASSERT_EQ(words[i], 0xababababababababULL) << "page " << i;
    EXPECT_EQ(children_of(w.pid), "");
}

// A process that runs on has its mappings' flags read from the snapshot's
// smaps once it runs again, not while it is held: every mapping record,
// flags included, is the one a held export (Fate::Stop) gives of the same
// idle process, and the madvise() flags set below are in it.
TEST(UserCow, MappingFlagsFromTheSnapshotAreThoseOfTheProcess) {
    struct Advised {
        int advice;
        std::uint32_t flag;
    };
    static constexpr Advised kAdvised[] = {
        {MADV_DONTDUMP, GHOST_VMA_DONTDUMP},   {MADV_NOHUGEPAGE, GHOST_VMA_NOHUGEPAGE},
        {MADV_SEQUENTIAL, GHOST_VMA_SEQ_READ}, {MADV_RANDOM, GHOST_VMA_RAND_READ},
        {MADV_HUGEPAGE, GHOST_VMA_HUGEPAGE},
    };
    std::vector<std::uint64_t> at;
    for (std::size_t i = 0; i < std::size(kAdvised); i++) {
        // Apart, so that no two merge: each is its own mapping.
        void* p = ::mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        ASSERT_NE(p, MAP_FAILED);
        ASSERT_EQ(::munmap(static_cast<char*>(p) + 3 * kPage, kPage), 0);
        ASSERT_EQ(::madvise(p, 3 * kPage, kAdvised[i].advice), 0) << i;
        std::memset(p, 0x5a, kPage);
        at.push_back(reinterpret_cast<std::uint64_t>(p));
    }
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0)
        for (;;)
            ::pause();
    for (const auto a : at)
        ::munmap(reinterpret_cast<void*>(a), 3 * kPage);
    ghost::UserEngine engine;
    const auto take = [&](ghost::Fate fate) {
        auto g = engine.create_memory();
        EXPECT_TRUE(g) << g.error().what();
        auto st = (*g)->export_process(pid, fate);
        EXPECT_TRUE(st) << st.error().what();
        auto view = (*g)->view();
        EXPECT_TRUE(view);
        auto img = ghost::image::read(view->bytes());
        EXPECT_TRUE(img) << img.error().what();
        return img ? std::move(img->vmas) : std::vector<ghost::image::Vma>{};
    };
    const auto running = take(ghost::Fate::Run);
    const auto held = take(ghost::Fate::Stop);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ASSERT_EQ(running.size(), held.size());
    ASSERT_FALSE(running.empty());
    for (std::size_t i = 0; i < running.size(); i++) {
        EXPECT_EQ(running[i].rec.start, held[i].rec.start);
        EXPECT_EQ(running[i].rec.end, held[i].rec.end);
        EXPECT_EQ(running[i].rec.flags, held[i].rec.flags) << std::hex << running[i].rec.start;
        EXPECT_EQ(running[i].rec.prot, held[i].rec.prot);
        EXPECT_EQ(running[i].rec.nr_pages, held[i].rec.nr_pages);
    }
    for (std::size_t i = 0; i < at.size(); i++) {
        const auto v = std::find_if(running.begin(), running.end(),
                                    [&](const auto& m) { return m.rec.start == at[i]; });
        ASSERT_NE(v, running.end()) << i;
        EXPECT_TRUE(v->rec.flags & kAdvised[i].flag) << i;
        EXPECT_TRUE(v->rec.flags & GHOST_VMA_NORESERVE) << i;
    }
}

// A multithreaded exporter (as migd): its threads share a SysV undo list the
// target does not have, so each export forks a reference child for kcmp.
// Concurrent exports must not wait on each other's children (they did: the
// children inherited each other's pipe ends; this test hung in one run of
// three before the fix, as cluster_bench's all-at-once checkpoints did).
TEST(UserCow, ConcurrentExportsFromThreadsFinish) {
    std::vector<std::unique_ptr<Writer>> ws;
    for (int i = 0; i < 4; i++)
        ws.push_back(std::make_unique<Writer>(false));
    std::vector<std::thread> ts;
    std::atomic<int> ok{0};
    std::barrier start(4); // each round starts in every thread at once
    for (int i = 0; i < 4; i++)
        ts.emplace_back([&, i] {
            for (int k = 0; k < 100; k++) {
                start.arrive_and_wait();
                ghost::UserEngine engine;
                auto g = engine.create_memory();
                if (g &&
                    (*g)->export_process(ws[static_cast<std::size_t>(i)]->pid, ghost::Fate::Run))
                    ok++;
            }
        });
    for (auto& t : ts)
        t.join();
    EXPECT_EQ(ok.load(), 400);
    for (const auto& w : ws)
        EXPECT_EQ(children_of(w->pid), "");
}

} // namespace
