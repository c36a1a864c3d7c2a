// SPDX-License-Identifier: GPL-2.0
// The hub at a barrier where VPs detach: a move (DETACH, the Mover, the
// wake-up) and a coordinated checkpoint (every VP detached at once).
#include <signal.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "hub.hpp"

namespace ghost::bsp {

using wire::Type;

void Hub::wake(int v) {
    const pid_t pid = vps_[static_cast<std::size_t>(v)].pid;
    if (mover_) {
        if (auto w = mover_->wake(v, pid); !w)
            fail(v, w.error().what(), true); // its host is unreachable?
    } else if (::kill(pid, SIGUSR2) != 0) {
        fail(
            v,
            fmt::format("vp {}: cannot wake pid {} with SIGUSR2: {}", v, pid, std::strerror(errno)),
            true);
    }
}

// Hector's coordinated checkpoint at a barrier: every VP gets DETACH (u32 1:
// "apply the DELIVER that follows, then detach") and its DELIVER, so when
// all have detached no message is in flight and the hub holds nothing.
void Hub::checkpoint_all(std::vector<std::vector<std::byte>>& out) {
    wire::Writer w;
    w.u32(1);
    for (int v = 0; v < nprocs_ && !done_; ++v) {
        send_or_fail(v, Type::Detach, w.data());
        if (!done_)
            deliver(v, out[static_cast<std::size_t>(v)]);
    }
    std::vector<pid_t> pids;
    for (int v = 0; v < nprocs_ && !done_; ++v) {
        Vp& p = vps_[static_cast<std::size_t>(v)];
        auto f = wire::recv_frame(p.fd);
        if (!f || f->type != Type::Detached)
            return fail(
                v, fmt::format("vp {} (pid {}) did not answer the checkpoint's DETACH", v, p.pid),
                !f);
        if (auto eof = wire::recv_frame(p.fd); eof)
            return fail(v,
                        fmt::format("vp {} sent {} after DETACHED", v, wire::type_name(eof->type)));
        p.fd.close();
        p.state = State::Detached;
        p.held.clear();
        pids.push_back(p.pid);
    }
    if (done_)
        return;
    checkpointer_->checkpoint(hub_state(), pids);
    for (int v = 0; v < nprocs_ && !done_; ++v)
        wake(v);
}

void Hub::detach_and_move(const std::vector<int>& moves, std::vector<std::vector<std::byte>>& out) {
    for (int v : moves) {
        if (v < 0 || v >= nprocs_ || done_)
            continue;
        Vp& p = vps_[static_cast<std::size_t>(v)];
        std::vector<std::byte> held = std::move(out[static_cast<std::size_t>(v)]);
        if (p.relayed) {
            // Its relay completes the DELIVER with the DATA frames it holds
            // and returns it: nothing for it waits on the old host.
            deliver(v, held, true);
            if (done_)
                return;
            auto b = wire::recv_frame(p.fd);
            if (!b || b->type != Type::DeliverBack)
                return fail(
                    v,
                    fmt::format("vp {} (pid {}): its relay did not return its DELIVER", v, p.pid),
                    !b);
            held = std::move(b->payload);
        }
        send_or_fail(v, Type::Detach, {});
        if (done_)
            return;
        // DETACHED, then EOF: the VP has closed its only descriptor of the
        // socket and is on its way into sigsuspend (with SIGUSR2 blocked
        // until it gets there, so the wake-up cannot be lost).
        auto f = wire::recv_frame(p.fd);
        if (!f || f->type != Type::Detached)
            return fail(v, fmt::format("vp {} (pid {}) did not answer DETACH", v, p.pid));
        auto eof = wire::recv_frame(p.fd);
        if (eof)
            return fail(v,
                        fmt::format("vp {} sent {} after DETACHED", v, wire::type_name(eof->type)));
        p.fd.close();
        p.state = State::Detached;
        p.held = std::move(held);
        const pid_t old = p.pid;
        auto moved = mover_->move(v, old, superstep_ - 1); // the superstep that ended
        if (moved)
            p.pid = *moved;
        reroute(v);
        if (done_)
            return;
        // On failure the original is still there, waiting: wake it where it is.
        if (auto w = mover_->wake(v, p.pid); !w)
            return fail(v, w.error().what(), true); // its host is unreachable?
    }
}

} // namespace ghost::bsp
