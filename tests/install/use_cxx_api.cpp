// SPDX-License-Identifier: GPL-2.0
// A C++ user of libghost, compiled through pkg-config by check-install.
#include <ghost/engine.hpp>
#include <ghost/image.hpp>
#include <ghost/process.hpp>

int checkpoint_to(int fd, pid_t pid) {
    auto engine = ghost::Engine::open();
    if (!engine)
        return -1;
    ghost::CheckpointOptions o;
    o.fate = ghost::Fate::Run;
    auto stats = ghost::checkpoint(**engine, pid, fd, o);
    return stats ? 0 : -1;
}
