// SPDX-License-Identifier: GPL-2.0
// The hub's event loop: HELLO, SYNC, END, ABORT from the VPs; the barrier
// (GETS round, DELIVER, DETACH and the move); failures end the job.
#include "hub.hpp"

#include "keepalive.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

namespace ghost::bsp {

using wire::Type;

Hub::Hub(UniqueFd listen, std::string job, int nprocs)
    : listen_(std::move(listen)), job_(std::move(job)), nprocs_(nprocs),
      vps_(static_cast<std::size_t>(nprocs)) {}

Result<void> Mover::wake(int vp, pid_t pid) {
    if (::kill(pid, SIGUSR2) != 0)
        return Error::from_errno(errno, fmt::format("vp {}: cannot wake pid {} with SIGUSR2: {}",
                                                    vp, pid, std::strerror(errno)));
    return {};
}

void Hub::set_tcp(UniqueFd listen, wire::TlsContext ctx) {
    tcp_ = std::move(listen);
    tls_.emplace(std::move(ctx));
}

void Hub::watch(int fd, std::function<void()> readable) {
    watches_.push_back({fd, std::move(readable)});
}

void Hub::unwatch(int fd) {
    std::erase_if(watches_, [fd](const Watch& w) { return w.fd == fd; });
}

void Hub::fail(int failed_vp, std::string why, bool lost) {
    if (done_)
        return;
    done_ = true;
    outcome_ = {false, failed_vp, std::move(why), lost};
    for (int v = 0; v < nprocs_; ++v) {
        Vp& p = vps_[static_cast<std::size_t>(v)];
        // The failed VP too when it is detached: alive (on another host,
        // say, its wake-up failed) but with no connection to notice the end.
        if ((v != failed_vp || p.state == State::Detached) && p.pid > 0 && p.state != State::Gone) {
            if (killer_)
                killer_(v, p.pid);
            else
                ::kill(p.pid, SIGKILL);
        }
        p.fd.close();
    }
    for (auto& r : relays_) // each relay then drops its VPs and exits
        r.link.close();
}

void Hub::process_exited(int vp, int status) {
    Vp& p = vps_.at(static_cast<std::size_t>(vp));
    const State was = p.state;
    p.state = State::Gone;
    if (done_ || was == State::Ended)
        return;
    const std::string how = WIFSIGNALED(status)
                                ? fmt::format("was killed by signal {} ({})", WTERMSIG(status),
                                              strsignal(WTERMSIG(status)))
                                : fmt::format("exited with status {}", WEXITSTATUS(status));
    fail(vp, fmt::format("vp {} (pid {}) {} before bsp_end", vp, p.pid, how), true);
}

void Hub::send_or_fail(int vp, Type type, std::span<const std::byte> payload) {
    Vp& p = vps_[static_cast<std::size_t>(vp)];
    if (auto r = wire::send_frame(p.fd, type, payload); !r)
        fail(vp,
             fmt::format("vp {} (pid {}): sending {} failed: {} (the process died?)", vp, p.pid,
                         wire::type_name(type), r.error().what()),
             true);
}

void Hub::accept_one() {
    UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (fd && !wire::peer_is_ours(fd.get())) {
        std::fprintf(stderr,
                     "ghost-bsp: hub: refused a local connection from pid %d: another "
                     "user's process\n",
                     wire::peer_pid(fd.get()));
        return;
    }
    if (fd)
        hello(wire::Link(std::move(fd)), false);
}

void Hub::accept_tcp() {
    UniqueFd fd(::accept4(tcp_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd)
        return;
    const std::string from = wire::peer_address(fd.get());
    // A silent client cannot hold the hub for long.
    const timeval limit{10, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto link = wire::tls_accept(*tls_, std::move(fd));
    if (!link) {
        std::fprintf(stderr,
                     "bsprun: hub: refused a connection from %s: %s (not this job's key?)\n",
                     from.c_str(), link.error().what().c_str());
        return;
    }
    hello(std::move(*link), true); // HELLO within the same limit
}

void Hub::hello(wire::Link link, bool tcp) {
    auto f = wire::recv_frame(link);
    const bool relay = f && tcp && f->type == Type::RelayHello;
    const bool guard = f && tcp && f->type == Type::GuardHello;
    if (!f || (f->type != Type::Hello && !relay && !guard))
        return; // not one of ours, or it died at once: its process exit tells
    if (tcp) {  // a VP, relay or guard of ours: from now on it may be slow
        const timeval none{0, 0};
        ::setsockopt(link.fd(), SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
        ::setsockopt(link.fd(), SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
        // ...but not silently gone: a host that loses power sends no FIN,
        // and a barrier would wait for its VP for ever (keepalive.hpp).
        wire::keep_alive(link.fd());
    }
    if (relay)
        return relay_hello(std::move(link), *f);
    if (guard)
        return guard_hello(std::move(link), *f);
    wire::Reader r(f->payload);
    // flags: bit 0 resumed, bit 1 through its host's relay.
    const std::uint32_t version = r.u32(), vp = r.u32(), nprocs = r.u32(), flags = r.u32();
    const std::uint32_t resumed = flags & 1;
    const bool relayed = (flags & 2) != 0;
    const std::string job = r.str();
    // Over TCP the peer's pid is another host's: keep the one the mover
    // reported.
    const pid_t pid = tcp ? (vp < vps_.size() ? vps_[vp].pid : -1) : wire::peer_pid(link.fd());
    if (r.failed() || version != wire::kVersion || job != job_)
        return fail(-1, fmt::format("a process (pid {}) said HELLO for job '{}' version {}, not "
                                    "this job '{}' version {}",
                                    pid, job, version, job_, wire::kVersion));
    if (vp >= static_cast<std::uint32_t>(nprocs_) || nprocs != static_cast<std::uint32_t>(nprocs_))
        return fail(-1, fmt::format("pid {} said HELLO as vp {} of {}, but the job has {} "
                                    "processes",
                                    pid, vp, nprocs, nprocs_));
    if (!relays_.empty() && !relayed)
        return fail(static_cast<int>(vp),
                    fmt::format("vp {} (pid {}) reached the hub directly, not through its host's "
                                "relay (the job routes through relays: is bsp-relay running "
                                "there?)",
                                vp, pid));
    Vp& p = vps_[vp];
    const State want = resumed ? State::Detached : State::Absent;
    if (p.state != want)
        return fail(static_cast<int>(vp),
                    fmt::format("vp {} connected twice (pid {}, resumed {})", vp, pid, resumed));
    p.fd = std::move(link);
    p.pid = pid;
    p.state = State::Running;
    p.relayed = relayed;
    // A moved VP gets its held DELIVER; one detached for a checkpoint (or
    // restored from one) applied its DELIVER before detaching: none is owed.
    if (resumed && !p.held.empty()) {
        std::vector<std::byte> held = std::move(p.held);
        send_or_fail(static_cast<int>(vp), Type::Deliver, held);
    }
}

void Hub::on_frame(int vp) {
    Vp& p = vps_[static_cast<std::size_t>(vp)];
    auto f = wire::recv_frame(p.fd);
    if (!f) {
        const std::string when =
            p.state == State::Ended ? "after bsp_end, before the others" : "before bsp_end";
        return fail(vp,
                    fmt::format("vp {} (pid {}) lost its connection to the hub {}: it exited "
                                "or died ({})",
                                vp, p.pid, when, f.error().what()),
                    true);
    }
    switch (f->type) {
    case Type::Sync:
        return on_sync(vp, std::move(*f));
    case Type::End:
        return on_end(vp);
    case Type::Abort: {
        wire::Reader r(f->payload);
        return fail(vp, fmt::format("vp {} (pid {}) aborted: {}", vp, p.pid, r.str()));
    }
    default:
        return fail(vp, fmt::format("vp {} (pid {}) sent an unexpected {} frame", vp, p.pid,
                                    wire::type_name(f->type)));
    }
}

void Hub::on_sync(int vp, Frame&& f) {
    Vp& p = vps_[static_cast<std::size_t>(vp)];
    if (p.state != State::Running)
        return fail(vp, fmt::format("vp {} sent SYNC while not running", vp));
    for (int v = 0; v < nprocs_; ++v)
        if (vps_[static_cast<std::size_t>(v)].state == State::Ended)
            return fail(-1, fmt::format("bsp_sync on vp {} while vp {} already called bsp_end "
                                        "(superstep {}): every process must make the same "
                                        "number of bsp_sync calls",
                                        vp, v, superstep_));
    auto s = decode_sync(std::move(f.payload), nprocs_);
    if (!s)
        return fail(vp, fmt::format("vp {}: {}", vp, s.error().what()));
    if (s->superstep != superstep_)
        return fail(vp, fmt::format("vp {} sent the SYNC of superstep {} in superstep {}", vp,
                                    s->superstep, superstep_));
    p.sync = std::move(*s);
    p.state = State::AtSync;
    if (std::all_of(vps_.begin(), vps_.end(), [](const Vp& x) { return x.state == State::AtSync; }))
        barrier();
}

void Hub::on_end(int vp) {
    Vp& p = vps_[static_cast<std::size_t>(vp)];
    for (int v = 0; v < nprocs_; ++v)
        if (vps_[static_cast<std::size_t>(v)].state == State::AtSync)
            return fail(-1, fmt::format("bsp_end on vp {} while vp {} waits in bsp_sync "
                                        "(superstep {}): every process must make the same "
                                        "number of bsp_sync calls",
                                        vp, v, superstep_));
    p.state = State::Ended;
    if (!std::all_of(vps_.begin(), vps_.end(), [](const Vp& x) { return x.state == State::Ended; }))
        return;
    for (int v = 0; v < nprocs_ && !done_; ++v)
        send_or_fail(v, Type::EndOk, {});
    if (!done_)
        end_relays();
    done_ = true;
}

bool Hub::answer_gets(std::vector<std::vector<std::byte>>& replies) {
    std::vector<SyncRequest> syncs;
    syncs.reserve(vps_.size());
    for (auto& p : vps_)
        syncs.push_back(std::move(p.sync));
    std::vector<std::vector<std::span<const std::byte>>> per_get(vps_.size());
    bool any = false;
    for (std::size_t r = 0; r < syncs.size(); ++r) {
        per_get[r].resize(syncs[r].gets.size());
        any = any || !syncs[r].gets.empty();
    }
    std::vector<std::vector<std::byte>> data(vps_.size());
    // Through relays, a target's relay can send each requester's replies to
    // the requester's relay (DATA frames) and the hub an empty GETDATA.
    // That pays off for large replies only (bench/bsp_routing_bench): a
    // superstep whose gets read less on average per pair of VPs goes
    // through the hub.
    gets_relayed_ = !relays_.empty() && relay::worth_relaying(syncs);
    const bool relayed = gets_relayed_;
    if (any) {
        // Everyone is in bsp_sync: ask every target, then read every answer.
        std::vector<bool> asked(vps_.size());
        for (int t = 0; t < nprocs_ && !done_; ++t) {
            const auto target = static_cast<std::uint32_t>(t);
            if (relayed) {
                auto g = relay::encode_routed_gets(target, superstep_, syncs);
                if (!g)
                    continue;
                asked[target] = true;
                send_or_fail(t, Type::GetsRelayed, *g);
                continue;
            }
            auto g = gets_for(t, syncs);
            if (wire::Reader(g).u32() == 0)
                continue;
            asked[target] = true;
            send_or_fail(t, Type::Gets, g);
        }
        for (int t = 0; t < nprocs_ && !done_; ++t) {
            if (!asked[static_cast<std::size_t>(t)])
                continue;
            auto f = wire::recv_frame(vps_[static_cast<std::size_t>(t)].fd);
            if (!f || f->type != Type::GetData) {
                fail(t, fmt::format("vp {} did not answer its gets ({})", t,
                                    f ? std::string(wire::type_name(f->type)) : f.error().what()));
                break;
            }
            if (relayed && f->payload.empty())
                continue; // its relay sent the replies on
            data[static_cast<std::size_t>(t)] = std::move(f->payload);
            if (auto s = split_getdata(t, data[static_cast<std::size_t>(t)], syncs, per_get); !s)
                fail(t, s.error().what());
            else if (relayed) // the relay could not cut it (it logs why)
                fail(t, fmt::format("vp {}'s relay passed its GETDATA on uncut", t));
        }
    }
    for (int v = 0; v < nprocs_ && !done_; ++v) {
        auto& r = replies[static_cast<std::size_t>(v)];
        r = build_deliver(v, superstep_ + 1, tagsize_, syncs, per_get[static_cast<std::size_t>(v)]);
        // A frame carries at most kMaxPayload: the program's fault, not a
        // lost VP (a rollback would only replay it).
        if (r.size() > wire::kMaxPayload)
            fail(-1, fmt::format("bsp_sync: superstep {} sends vp {} {} bytes, above the {} a "
                                 "superstep may carry to one VP: split the transfer over more "
                                 "supersteps",
                                 superstep_, v, r.size(), wire::kMaxPayload));
    }
    for (std::size_t v = 0; v < vps_.size(); ++v)
        vps_[v].sync = std::move(syncs[v]);
    return !done_;
}

void Hub::barrier() {
    {
        std::vector<SyncRequest> tmp;
        for (auto& p : vps_)
            tmp.push_back(std::move(p.sync));
        std::int64_t ts = tagsize_;
        const std::string err = check_collectives(tmp, superstep_, &ts);
        for (std::size_t v = 0; v < vps_.size(); ++v)
            vps_[v].sync = std::move(tmp[v]);
        if (!err.empty())
            return fail(-1, "bsp_sync: " + err);
        tagsize_ = ts;
    }
    std::vector<std::vector<std::byte>> out(vps_.size());
    if (!answer_gets(out))
        return;
    std::vector<VpStats> stats;
    {
        std::vector<SyncRequest> tmp;
        for (auto& p : vps_)
            tmp.push_back(std::move(p.sync));
        auto recv = received_bytes(tmp);
        for (std::size_t v = 0; v < vps_.size(); ++v)
            vps_[v].sync = std::move(tmp[v]);
        for (int v = 0; v < nprocs_; ++v) {
            const Vp& p = vps_[static_cast<std::size_t>(v)];
            stats.push_back({v, p.pid, p.sync.wall, p.sync.cpu, p.sync.bytes_sent,
                             p.sync.memory_bytes, std::move(recv[static_cast<std::size_t>(v)]),
                             p.sync.instructions, p.sync.instructions_errno});
        }
    }
    expected_.assign(vps_.size(), 0);
    for (std::size_t v = 0; v < vps_.size(); ++v) {
        const auto& p = vps_[v];
        for (const auto& x : p.sync.relayed)
            expected_[x.pid] += x.frames;
        if (!gets_relayed_)
            continue;
        // One DATA frame of replies from every VP this one reads from.
        std::vector<bool> from(vps_.size());
        for (const auto& g : p.sync.gets)
            if (!from[g.pid]) {
                from[g.pid] = true;
                ++expected_[v];
            }
    }
    std::vector<int> moves;
    if (hook_)
        moves = hook_->barrier(superstep_, stats);
    if (!mover_)
        moves.clear(); // nobody to carry a move out
    for (auto& p : vps_)
        p.sync = {};
    if (checkpointer_ && checkpointer_->due(superstep_)) {
        ++superstep_;
        return checkpoint_all(out); // no move at a checkpoint's barrier
    }
    ++superstep_;
    for (int v = 0; v < nprocs_ && !done_; ++v) {
        if (std::find(moves.begin(), moves.end(), v) != moves.end())
            continue;
        vps_[static_cast<std::size_t>(v)].state = State::Running;
        deliver(v, out[static_cast<std::size_t>(v)]);
    }
    if (!done_ && !moves.empty())
        detach_and_move(moves, out);
}

void Hub::resume(const HubState& st) {
    superstep_ = st.superstep;
    tagsize_ = st.tagsize;
    for (auto& p : vps_) {
        p.state = State::Detached;
        p.held.clear();
    }
}

std::vector<std::vector<std::uint64_t>> received_bytes(std::span<const SyncRequest> syncs) {
    const std::size_t n = syncs.size();
    std::vector<std::vector<std::uint64_t>> r(n, std::vector<std::uint64_t>(n, 0));
    for (std::size_t src = 0; src < n; ++src) {
        for (const auto& p : syncs[src].puts)
            if (p.pid < n)
                r[p.pid][src] += p.data.size();
        for (const auto& m : syncs[src].msgs)
            if (m.pid < n)
                r[m.pid][src] += m.tag.size() + m.payload.size();
        for (const auto& g : syncs[src].gets) // src reads from g.pid
            if (g.pid < n)
                r[src][g.pid] += g.len;
        for (const auto& x : syncs[src].relayed) // what its relay carried
            if (x.pid < n)
                r[x.pid][src] += x.bytes;
    }
    return r;
}

Outcome Hub::run() {
    while (!done_) {
        // Frames TLS already decrypted are not seen by poll(): take them first.
        bool pending = false;
        for (int v = 0; v < nprocs_ && !done_; ++v)
            if (vps_[static_cast<std::size_t>(v)].fd.pending()) {
                pending = true;
                on_frame(v);
            }
        for (std::size_t i = 0; i < relays_.size() && !done_; ++i)
            if (relays_[i].link.pending()) {
                pending = true;
                on_relay_frame(i);
            }
        if (pending)
            continue;
        std::vector<pollfd> fds;
        // VP index, -1 listen, -3 tcp, -4 - i watch i, nprocs + i relay i
        std::vector<int> who;
        if (listen_) { // none when relays own the job's socket
            fds.push_back({listen_.get(), POLLIN, 0});
            who.push_back(-1);
        }
        if (tcp_) {
            fds.push_back({tcp_.get(), POLLIN, 0});
            who.push_back(-3);
        }
        for (int v = 0; v < nprocs_; ++v)
            if (vps_[static_cast<std::size_t>(v)].fd) {
                fds.push_back({vps_[static_cast<std::size_t>(v)].fd.fd(), POLLIN, 0});
                who.push_back(v);
            }
        for (std::size_t i = 0; i < watches_.size(); ++i) {
            fds.push_back({watches_[i].fd, POLLIN, 0});
            who.push_back(-4 - static_cast<int>(i));
        }
        for (std::size_t i = 0; i < relays_.size(); ++i)
            if (relays_[i].link) {
                fds.push_back({relays_[i].link.fd(), POLLIN, 0});
                who.push_back(nprocs_ + static_cast<int>(i));
            }
        if (::poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR)
                continue;
            fail(-1, fmt::format("hub: poll: {}", std::strerror(errno)));
            break;
        }
        for (std::size_t i = 0; i < fds.size() && !done_; ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (who[i] == -1)
                accept_one();
            else if (who[i] == -3)
                accept_tcp();
            else if (who[i] >= nprocs_)
                on_relay_frame(static_cast<std::size_t>(who[i] - nprocs_));
            else if (who[i] >= 0)
                on_frame(who[i]);
            else {
                const auto w = static_cast<std::size_t>(-4 - who[i]);
                if (w < watches_.size()) {
                    auto cb = watches_[w].cb; // it may unwatch itself
                    cb();
                }
            }
        }
    }
    return outcome_;
}

} // namespace ghost::bsp
