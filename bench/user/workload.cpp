// SPDX-License-Identifier: GPL-2.0
// ghost_bench_user's workload: a fresh copy of this program holding SIZE MiB
// of patterned anonymous memory and answering on two pipes; the check of an
// image against it; and the unlinked files the images go to.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "user_bench.hpp"

namespace bench::user {

namespace {

bool write_all(int fd, const void* p, size_t n) {
    return write(fd, p, n) == static_cast<ssize_t>(n);
}

bool read_all(int fd, void* p, size_t n) {
    auto* c = static_cast<char*>(p);
    while (n) {
        const ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        c += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

} // namespace

std::string errno_text() {
    return std::strerror(errno);
}

void kill_and_reap(pid_t pid) {
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR)
        ;
}

std::optional<Pipes> Pipes::make() {
    int a[2], b[2];
    if (pipe2(a, O_CLOEXEC) != 0)
        return std::nullopt;
    if (pipe2(b, O_CLOEXEC) != 0) {
        close(a[0]);
        close(a[1]);
        return std::nullopt;
    }
    Pipes p;
    p.ctl_r.reset(a[0]);
    p.ctl_w.reset(a[1]);
    p.rep_r.reset(b[0]);
    p.rep_w.reset(b[1]);
    return p;
}

[[noreturn]] void workload(size_t bytes, int ready, int ctl, int rep) {
    auto* mem = static_cast<std::uint64_t*>(
        mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (mem == MAP_FAILED)
        _exit(2);
    const size_t words = bytes / 8;
    for (size_t i = 0; i < words; i++)
        mem[i] = pattern(i);
    // Nothing but stdio on /dev/null and the two pipe ends the image carries
    // (and @ready, until the parent has read it to its end).
    const int null = open("/dev/null", O_RDWR);
    if (null < 0)
        _exit(3);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    for (int fd = 3; fd < 1024; fd++)
        if (fd != ctl && fd != rep && fd != ready)
            close(fd);
    const std::uint64_t addr = reinterpret_cast<std::uintptr_t>(mem);
    if (!write_all(ready, &addr, sizeof(addr)))
        _exit(4);
    close(ready);
    for (;;) {
        char c;
        if (read(ctl, &c, 1) != 1)
            _exit(5);
        std::int64_t answer = 0;
        if (c == 'p') {
            answer = getpid();
        } else if (c == 'v') {
            for (size_t i = 0; i < words; i++)
                answer += mem[i] != pattern(i);
        } else {
            _exit(6);
        }
        if (!write_all(rep, &answer, sizeof(answer)))
            _exit(7);
    }
}

std::int64_t Workload::ask(char cmd) const {
    std::int64_t a = 0;
    if (!write_all(pipes.ctl_w.get(), &cmd, 1) || !read_all(pipes.rep_r.get(), &a, sizeof(a)))
        return -1;
    return a;
}

std::optional<Workload> start_workload(size_t bytes, std::string& why) {
    auto pipes = Pipes::make();
    int ready[2];
    if (!pipes || pipe2(ready, O_CLOEXEC) != 0) {
        why = fmt::format("pipe: {}", errno_text());
        return std::nullopt;
    }
    const pid_t pid = fork();
    if (pid < 0) {
        why = fmt::format("fork: {}", errno_text());
        return std::nullopt;
    }
    if (pid == 0) {
        // A fresh program, so that the image holds the workload and not
        // the heap this benchmark has built up (engine buffers, baselines).
        prctl(PR_SET_PDEATHSIG, SIGKILL); // the original only: no orphan if we die
        const int keep[] = {ready[1], pipes->ctl_r.get(), pipes->rep_w.get()};
        for (int fd : keep)
            fcntl(fd, F_SETFD, 0);
        const std::string args[] = {std::to_string(bytes), std::to_string(keep[0]),
                                    std::to_string(keep[1]), std::to_string(keep[2])};
        execl("/proc/self/exe", "ghost_bench_user", workload_flag, args[0].c_str(), args[1].c_str(),
              args[2].c_str(), args[3].c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    close(ready[1]);
    Workload w;
    w.pid = pid;
    w.bytes = bytes;
    w.pipes = std::move(*pipes);
    // Read to the end: then the workload has closed its end too, and has no
    // descriptor but those of its image.
    char end;
    const bool ok = read_all(ready[0], &w.addr, sizeof(w.addr)) && read(ready[0], &end, 1) == 0;
    close(ready[0]);
    if (!ok) {
        why = "the workload died before it was ready";
        return std::nullopt;
    }
    return w;
}

// Reads an image and checks that every page of the workload's mapping is in
// it with the pattern; empty on success, else what is wrong.
std::string verify_image(ghost::image::Source& src, const Workload& w) {
    std::uint64_t pages = 0, bad = 0;
    ghost::image::ReadOptions o;
    o.on_pages = [&](const ghost::image::Vma&, const ghost::image::PageRun& run,
                     std::span<const std::byte> data) -> ghost::Result<void> {
        if (run.addr < w.addr || run.addr >= w.addr + w.bytes)
            return {};
        const size_t n = std::min<size_t>(data.size(), w.addr + w.bytes - run.addr);
        const std::uint64_t first = (run.addr - w.addr) / 8;
        for (size_t i = 0; i < n / 8; i++) {
            std::uint64_t v;
            std::memcpy(&v, data.data() + i * 8, 8);
            bad += v != pattern(first + i);
        }
        pages += n / page;
        return {};
    };
    auto img = ghost::image::read(src, o);
    if (!img)
        return fmt::format("the image does not read back: {}", img.error().what());
    if (pages != w.bytes / page || bad)
        return fmt::format("the image holds {} of the workload's {} pages, {} wrong words", pages,
                           w.bytes / page, bad);
    return {};
}

std::string verify_image_fd(int fd, const Workload& w) {
    if (lseek(fd, 0, SEEK_SET) != 0)
        return fmt::format("lseek: {}", errno_text());
    ghost::image::FdSource src(fd);
    return verify_image(src, w);
}

// A file in @dir, already unlinked.
ghost::UniqueFd temp_file(const std::string& dir) {
    std::string path = dir + "/ghost-bench-user-XXXXXX";
    ghost::UniqueFd fd(mkostemp(path.data(), O_CLOEXEC));
    if (fd)
        unlink(path.c_str());
    return fd;
}

} // namespace bench::user
