// SPDX-License-Identifier: GPL-2.0
// A C++ user of libghost, built through pkg-config by check-install and run
// against the installed library: it finds the installed restore stub, and a
// checkpoint then a restart through that stub (the user engine) work.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include <ghost/engine.hpp>
#include <ghost/events.hpp>
#include <ghost/image.hpp>
#include <ghost/process.hpp>

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "stub") == 0) {
        auto stub = ghost::restore_stub_path();
        std::printf("%s\n", stub.value_or("none").c_str());
        return stub ? 0 : 1;
    }
    auto engine = ghost::Engine::open(ghost::EngineKind::User);
    if (!engine)
        return 1;
    const pid_t pid = ::fork();
    if (pid == 0) {
        for (int i = 3; i < 1024; i++)
            ::close(i);
        for (;;)
            ::pause();
    }
    ::usleep(100000);
    const int fd = ::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    auto stats = ghost::checkpoint(**engine, pid, fd, {});
    ::waitpid(pid, nullptr, 0);
    if (!stats) {
        std::fprintf(stderr, "checkpoint: %s\n", stats.error().what().c_str());
        return 1;
    }
    ::lseek(fd, 0, SEEK_SET);
    auto child = ghost::restart(**engine, fd);
    if (!child) {
        std::fprintf(stderr, "restart: %s\n", child.error().what().c_str());
        return 1;
    }
    const bool alive = ::kill(*child, 0) == 0;
    ::kill(*child, SIGKILL);
    ::waitpid(*child, nullptr, 0);
    std::printf("restarted %d\n", *child);
    return alive ? 0 : 1;
}
