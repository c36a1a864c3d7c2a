// SPDX-License-Identifier: GPL-2.0
// A worker process for tests of incremental and pre-copy images: it holds
// a 32 MiB region of known contents and changes it on command, and reports
// a digest of its memory, so a restored copy with any page wrong, a dropped
// page come back, or an unmapped region mapped again reports something
// else. Included by one test file each (definitions in an unnamed namespace).
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "ghost/engine.hpp"
#include "ghost/process.hpp"

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kPages = 8192; // region A: 32 MiB
constexpr std::size_t kSmall = 16;   // regions B (unmapped later) and C (mapped later)

unsigned char pattern(std::size_t page, unsigned gen, std::size_t i) {
    return static_cast<unsigned char>(page * 131 + i * 7 + gen * 17 + 1);
}

// Pages of A dropped with MADV_DONTNEED by each command.
constexpr std::size_t kDrop1 = 100, kDrop1N = 20, kDrop2 = 200, kDrop2N = 5;

// Stage 3 (after "race", from the start): 1000-1999 only.
bool dropped(std::size_t p, int stage) {
    if (stage == 3)
        return p >= 1000 && p < 2000;
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
//   "dontfork": C (mapped by mutate1) made MADV_DONTFORK
//   "map": one more region mapped and written (not in the report): the
//          process's mappings change, its reported memory does not
//   "check": "pid resident nonzero": of the dropped pages, how many are
//            resident (mincore) before being read, and their non-zero bytes
//   "remap": A moved (mremap) to another address; the report is the same
//   "fork": a child forked now replies "report" (with its own pid) and
//           exits; the worker waits for it
//   "fmap": a file of 4 pages of 0x11 mapped privately (F), its first
//           page written with 0x22 (the process's own copy); "fdrop" drops
//           that page (MADV_DONTNEED: it reads the file again) without
//           reading it ("pid dropped"); "fpeek": "pid BYTE" (F's first
//           byte, in hex)
//   "split": A split into three mappings (pages 1000-1002 made
//           MADV_DONTDUMP, which no page's contents notice), then "report"
//   "wipefork": A made MADV_WIPEONFORK, then a child forked replies "pid
//           nonzero" (A's non-zero bytes in the child: 0 as the kernel
//           gives it) and exits; the worker waits, then makes A
//           MADV_KEEPONFORK again
//   "sleepers": "pid C1 C2 C3 C4": four children forked now, sleeping
//           until killed (nobody waits for them)
//   "forks": "pid N": N = 1000 children forked one after another, each
//           exiting at once and waited for
//   "race": "pid bad": for 300 ms a second thread drops pages 1000-1999
//           of A (MADV_DONTNEED, 16 at a time) while the worker reads
//           them; bad counts bytes read that were neither the page's nor
//           zero. Pages 1000-1999 are then dropped for good (stage 3)
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
    unsigned char* f = nullptr; // "fmap"
    int stage = 0;
    bool forked = false; // a "fork" command's child, which replies and exits
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
        } else if (line == "dontfork" && c) {
            ::madvise(c, kSmall * kPage, MADV_DONTFORK);
        } else if (line == "map") {
            // Far from B's old place, which the report asks about.
            void* d = ::mmap(reinterpret_cast<void*>(0x500000000000ULL), kSmall * kPage,
                             PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (d != MAP_FAILED)
                std::memset(d, 0xd4, kSmall * kPage);
        } else if (line == "remap") {
            void* to = ::mremap(a, kPages * kPage, kPages * kPage, MREMAP_MAYMOVE | MREMAP_FIXED,
                                reinterpret_cast<void*>(0x400000000000ULL));
            if (to != MAP_FAILED)
                a = static_cast<unsigned char*>(to);
        } else if (line == "fork") {
            const pid_t child = ::fork();
            if (child > 0) {
                ::waitpid(child, nullptr, 0);
                line.clear();
                continue;
            }
            line = "report";
            forked = true;
        } else if (line == "fmap") {
            const std::string path = "/tmp/ghost-worker-file-" + std::to_string(::getpid());
            const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            unsigned char page[kPage];
            std::memset(page, 0x11, kPage);
            for (int i = 0; i < 4; i++)
                if (::write(fd, page, kPage) != static_cast<ssize_t>(kPage))
                    ::_exit(4);
            f = static_cast<unsigned char*>(
                ::mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
            ::close(fd);
            std::memset(f, 0x22, kPage);
            line = "fpeek";
        } else if (line == "fdrop" && f) {
            ::madvise(f, kPage, MADV_DONTNEED); // and not read: "dropped"
        } else if (line == "split") {
            ::madvise(a + 1000 * kPage, 3 * kPage, MADV_DONTDUMP);
            line = "report";
        } else if (line == "wipefork") {
            ::madvise(a, kPages * kPage, MADV_WIPEONFORK);
            const pid_t child = ::fork();
            if (child > 0) {
                ::waitpid(child, nullptr, 0);
                ::madvise(a, kPages * kPage, MADV_KEEPONFORK);
                line.clear();
                continue;
            }
            line = "wiped";
            forked = true;
        } else if (line == "mutate2") {
            for (std::size_t p = 20; p < 25; p++)
                for (std::size_t i = 0; i < kPage; i++)
                    a[p * kPage + i] = pattern(p, 3, i);
            ::madvise(a + kDrop2 * kPage, kDrop2N * kPage, MADV_DONTNEED);
            stage = 2;
        }
        if (line == "race") {
            std::atomic<bool> stop{false};
            std::thread dropper([&] {
                // A short pause between drops: a thread dropping without
                // any could keep a fault from ever being served (lazy.cpp).
                for (std::size_t p = 1000; !stop; p = p + 16 >= 2000 ? 1000 : p + 16) {
                    ::madvise(a + p * kPage, 16 * kPage, MADV_DONTNEED);
                    std::this_thread::sleep_for(std::chrono::microseconds(20));
                }
            });
            unsigned long bad = 0;
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
            while (std::chrono::steady_clock::now() < until)
                for (std::size_t p = 1000; p < 2000; p += 7) {
                    // Byte by byte: a page may be dropped while it is read.
                    const volatile unsigned char* q = a + p * kPage;
                    for (std::size_t i = 0; i < kPage; i += 512) {
                        const unsigned char v = q[i];
                        bad += v != pattern(p, 1, i) && v != 0;
                    }
                }
            stop = true;
            dropper.join();
            ::madvise(a + 1000 * kPage, 1000 * kPage, MADV_DONTNEED);
            stage = 3;
            std::snprintf(msg, sizeof(msg), "%d %lu\n", ::getpid(), bad);
        } else if (line == "forks") {
            int n = 0;
            for (; n < 1000; n++) {
                const pid_t child = ::fork();
                if (child == 0)
                    ::_exit(0);
                if (child < 0 || ::waitpid(child, nullptr, 0) != child)
                    break;
            }
            std::snprintf(msg, sizeof(msg), "%d %d\n", ::getpid(), n);
        } else if (line == "sleepers") {
            int at = std::snprintf(msg, sizeof(msg), "%d", ::getpid());
            for (int i = 0; i < 4; i++) {
                const pid_t child = ::fork();
                if (child == 0)
                    for (;;)
                        ::pause();
                at += std::snprintf(msg + at, sizeof(msg) - at, " %d", child);
            }
            std::snprintf(msg + at, sizeof(msg) - at, "\n");
        } else if (line == "fdrop") {
            std::snprintf(msg, sizeof(msg), "%d dropped\n", ::getpid());
        } else if (line == "fpeek") {
            std::snprintf(msg, sizeof(msg), "%d %02x\n", ::getpid(), f ? f[0] : 0);
        } else if (line == "wiped") {
            unsigned long nonzero = 0;
            for (std::size_t i = 0; i < kPages * kPage; i++)
                nonzero += a[i] != 0;
            std::snprintf(msg, sizeof(msg), "%d %lu\n", ::getpid(), nonzero);
        } else if (line == "check") {
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
        if (forked)
            ::_exit(0);
    }
}

// The worker's two pipes, and its replies.
class Worker {
  public:
    // as: the uid (and gid) the worker runs as, with no groups; 0 leaves it
    // the test's.
    explicit Worker(uid_t as = 0) {
        int c[2], o[2];
        EXPECT_EQ(::pipe2(c, O_CLOEXEC), 0);
        EXPECT_EQ(::pipe2(o, O_CLOEXEC), 0);
        cmd_rd_ = c[0], cmd_wr_ = c[1], out_rd_ = o[0], out_wr_ = o[1];
        pid_ = ::fork();
        if (pid_ == 0) {
            if (as != 0) {
                // Only its pipes: a descriptor the test inherited (ctest's
                // log, say) is root's, and its image could not reopen it.
                for (int fd = 3; fd < 1024; fd++)
                    if (fd != cmd_rd_ && fd != cmd_wr_ && fd != out_rd_ && fd != out_wr_)
                        ::close(fd);
                if (::setgroups(0, nullptr) != 0 || ::setresgid(as, as, as) != 0 ||
                    ::setresuid(as, as, as) != 0 || ::prctl(PR_SET_DUMPABLE, 1) != 0)
                    ::_exit(99);
            }
            worker(cmd_rd_, out_wr_);
        }
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
    // Sends command and returns at once; replied() tells when its reply
    // has come.
    bool send(const std::string& command) {
        const std::string c = command + "\n";
        return ::write(cmd_wr_, c.data(), c.size()) == static_cast<ssize_t>(c.size());
    }
    // Whether a whole reply line has come (never waits); it is added to
    // partial as it arrives.
    bool replied(std::string& partial) {
        for (char ch = 0;;) {
            pollfd p{out_rd_, POLLIN, 0};
            if (::poll(&p, 1, 0) <= 0 || ::read(out_rd_, &ch, 1) != 1)
                return false;
            partial += ch;
            if (ch == '\n')
                return true;
        }
    }
    void killed() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    // The restored process was reaped by the test (it died on its own).
    void forget_restored() { restored_ = -1; }
    void kill_restored() {
        ::kill(restored_, SIGKILL);
        ::waitpid(restored_, nullptr, 0);
        restored_ = -1;
    }
    // Restarts image (a file) as the worker, with its pipes; with
    // sequence, the file holds a pre-copy's images. through_pipe: the
    // restart reads the image from a pipe a thread copies the file into
    // (a stream, as migd's), not from the file. lazy: RestartOptions::lazy.
    ghost::Result<pid_t> restart(ghost::Engine& e, const std::string& image, bool sequence = false,
                                 bool through_pipe = false, bool lazy = false) {
        int fd = ::open(image.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return ghost::Error::from_errno(errno, "open " + image);
        std::thread feeder;
        if (through_pipe) {
            int p[2];
            if (::pipe2(p, O_CLOEXEC) != 0)
                return ghost::Error::from_errno(errno, "pipe");
            feeder = std::thread([file = fd, wr = p[1]] {
                char buf[65536];
                ssize_t n;
                while ((n = ::read(file, buf, sizeof(buf))) > 0)
                    if (::write(wr, buf, static_cast<std::size_t>(n)) != n)
                        break;
                ::close(file);
                ::close(wr);
            });
            fd = p[0];
        }
        ghost::RestartOptions ro;
        ro.inherit_fds = {
            {cmd_rd_, cmd_rd_}, {cmd_wr_, cmd_wr_}, {out_rd_, out_rd_}, {out_wr_, out_wr_}};
        ro.sequence = sequence;
        ro.lazy = lazy;
        auto child = ghost::restart(e, fd, ro);
        ::close(fd);
        if (feeder.joinable())
            feeder.join();
        if (child)
            restored_ = *child;
        return child;
    }

  private:
    int cmd_rd_ = -1, cmd_wr_ = -1, out_rd_ = -1, out_wr_ = -1;
    pid_t pid_ = -1, restored_ = -1;
};

} // namespace
