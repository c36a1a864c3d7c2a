// SPDX-License-Identifier: GPL-2.0
// ghost::EventStream (ghost/events.hpp). In the VM (`ghost-vm-tests
// libevents`, ghost.ko loaded): a checkpoint and a refused restart are
// announced with their pid, bytes, mode and outcome, and fd() polls
// readable. Natively (no module): opening says the module is not loaded and
// that the user engine emits no events.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>

#include "ghost/engine.hpp"
#include "ghost/events.hpp"
#include "ghost/fd.hpp"
#include "ghost/process.hpp"

namespace {

using namespace std::chrono_literals;

bool module_loaded() {
    return ::access("/dev/ghost", F_OK) == 0;
}

// The next event of that kind, skipping others (a few at most).
std::optional<ghost::Event> next_of(ghost::EventStream& s, ghost::Event::Kind kind) {
    for (int i = 0; i < 8; i++) {
        auto e = s.next(5000ms);
        if (!e || !*e)
            return std::nullopt;
        if ((*e)->kind == kind)
            return **e;
    }
    return std::nullopt;
}

// A child that waits in pause(), holding nothing an export refuses (not
// our event socket); with dontfork, a page of it is marked MADV_DONTFORK
// first. It has 100 ms to get there.
pid_t idle_child(bool dontfork) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::syscall(SYS_close_range, 3, ~0U, 0);
        if (dontfork) {
            void* p =
                ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED || ::madvise(p, 4096, MADV_DONTFORK) != 0)
                ::_exit(1);
            static_cast<char*>(p)[0] = 1;
        }
        for (;;)
            ::pause();
    }
    ::usleep(100000);
    return pid;
}

// Checkpoints pid with that fate into a new unnamed file in /tmp.
ghost::Result<ghost::ExportStats> checkpoint_to_tmp(ghost::Engine& engine, pid_t pid,
                                                    ghost::Fate fate) {
    ghost::UniqueFd img(::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (!img)
        return ghost::Error::from_errno(errno, "cannot make an image file in /tmp");
    ghost::CheckpointOptions o;
    o.fate = fate;
    return ghost::checkpoint(engine, pid, img.get(), o);
}

TEST(EventStream, WithoutTheModuleSaysSo) {
    if (module_loaded())
        GTEST_SKIP() << "ghost.ko is loaded";
    auto s = ghost::EventStream::open();
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code.value(), ENOENT);
    EXPECT_NE(s.error().what().find("is ghost.ko loaded?"), std::string::npos) << s.error().what();
    EXPECT_NE(s.error().what().find("user engine emits no events"), std::string::npos);
}

TEST(EventStream, AnnouncesAnExportAndARefusedImport) {
    if (!module_loaded())
        GTEST_SKIP() << "no ghost.ko";
    auto s = ghost::EventStream::open();
    ASSERT_TRUE(s) << s.error().what();
    // Nothing yet: next() with a timeout gives nullopt, not an error.
    auto none = s->next(0ms);
    ASSERT_TRUE(none) << none.error().what();

    auto engine = ghost::Engine::open(ghost::EngineKind::Kernel);
    ASSERT_TRUE(engine) << engine.error().what();
    const pid_t pid = idle_child(false);
    auto st = checkpoint_to_tmp(**engine, pid, ghost::Fate::Kill);
    ASSERT_TRUE(st) << st.error().what();
    ::waitpid(pid, nullptr, 0);

    pollfd p{s->fd(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 5000), 1) << "fd() does not poll readable";
    auto ex = next_of(*s, ghost::Event::Kind::Export);
    ASSERT_TRUE(ex);
    EXPECT_EQ(ex->pid, pid);
    EXPECT_TRUE(ex->ok());
    EXPECT_EQ(ex->bytes, st->bytes);
    EXPECT_EQ(ex->mode(), "stop"); // checkpoint() holds it stopped, then kills it
    EXPECT_EQ(ex->error().code.value(), 0);

    // Not an image: the import is refused, with its reason.
    ghost::UniqueFd junk(::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    const std::string bytes(8192, 'x');
    ASSERT_EQ(::write(junk.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ASSERT_EQ(::lseek(junk.get(), 0, SEEK_SET), 0);
    auto r = ghost::restart(**engine, junk.get());
    ASSERT_FALSE(r);
    auto im = next_of(*s, ghost::Event::Kind::Import);
    ASSERT_TRUE(im);
    EXPECT_FALSE(im->ok());
    EXPECT_LT(im->result, 0);
    EXPECT_EQ(im->mode(), "prepare");
    EXPECT_EQ(im->error().code.value(), -im->result);
    EXPECT_FALSE(im->reason.empty());
    EXPECT_EQ(im->reason, r.error().message);
}

// A leave-running checkpoint of a process with a MADV_DONTFORK mapping: the
// copy-on-write snapshot is refused (a fork would not copy that mapping) and
// libghost exports the plain way. One export, one event: the successful one.
TEST(EventStream, ARefusedSnapshotThenAPlainExportIsOneEvent) {
    if (!module_loaded())
        GTEST_SKIP() << "no ghost.ko";
    auto s = ghost::EventStream::open();
    ASSERT_TRUE(s) << s.error().what();
    auto engine = ghost::Engine::open(ghost::EngineKind::Kernel);
    ASSERT_TRUE(engine) << engine.error().what();
    const pid_t pid = idle_child(true);
    auto st = checkpoint_to_tmp(**engine, pid, ghost::Fate::Run);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ASSERT_TRUE(st) << st.error().what();
    EXPECT_FALSE(st->copy_on_write) << "the snapshot was not refused";
    auto ex = next_of(*s, ghost::Event::Kind::Export);
    ASSERT_TRUE(ex);
    EXPECT_EQ(ex->pid, pid);
    EXPECT_TRUE(ex->ok()) << "the first event is a failure: " << ex->reason;
    EXPECT_EQ(ex->bytes, st->bytes);
    auto more = s->next(500ms);
    ASSERT_TRUE(more) << more.error().what();
    EXPECT_FALSE(*more) << "a second event for one export";
}

} // namespace
