// SPDX-License-Identifier: GPL-2.0
// A local VP's session (its control frames to and from the hub, its puts
// and messages out as DATA frames, its DELIVER completed with theirs), and
// another relay's incoming DATA frames.
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "relay.hpp"

namespace ghost::bsp::relay {

using wire::Type;

namespace {

// HELLO's flags: bit 0 resumed, bit 1 through a relay.
constexpr std::uint32_t kRelayed = 2;

} // namespace

void Relay::session(UniqueFd fd) {
    {
        std::lock_guard lk(mu_);
        ++sessions_;
    }
    struct Done {
        Relay* r;
        std::uint32_t vp = ~0U;
        ~Done() {
            std::lock_guard lk(r->mu_);
            --r->sessions_;
            if (auto it = r->here_.find(vp); it != r->here_.end())
                r->here_.erase(it);    // this session's only
            r->store_cv_.notify_all(); // run() waits for the sessions to end
        }
    } done{this};
    if (!wire::peer_is_ours(fd.get())) {
        std::fprintf(stderr,
                     "bsp-relay %s: refused a local connection from pid %d: another "
                     "user's process\n",
                     c_.host.c_str(), wire::peer_pid(fd.get()));
        return;
    }
    wire::Link vp(std::move(fd));
    auto hello = wire::recv_frame(vp);
    if (!hello || hello->type != Type::Hello)
        return; // not a VP, or it died at once: the hub learns from its process
    wire::Reader r(hello->payload);
    const std::uint32_t version = r.u32(), me = r.u32(), nprocs = r.u32(), flags = r.u32();
    const std::string job = r.str();
    {
        std::unique_lock lk(mu_);
        ready_cv_.wait(lk, [&] { return ready_; });
        if (me < table_.size()) {  // the VP is here: that beats any entry
            table_[me].host = me_; // its epoch comes with the hub's ROUTE
            here_.insert(me);
            done.vp = me;
        }
    }
    auto tcp = wire::connect_tcp(c_.hub_address);
    if (!tcp)
        fatal(fmt::format("vp {}: the hub at {}: {}", me, c_.hub_address, tcp.error().what()));
    auto up = wire::tls_connect(*client_, std::move(*tcp));
    if (!up)
        fatal(fmt::format("vp {}: the hub at {}: {}", me, c_.hub_address, up.error().what()));
    wire::Writer w;
    w.u32(version);
    w.u32(me);
    w.u32(nprocs);
    w.u32(flags | kRelayed);
    w.str(job);
    if (!wire::send_frame(*up, Type::Hello, w.data()))
        return;
    std::optional<RoutedGets> gets; // asked of the VP, for its GETDATA
    for (;;) {
        bool from_vp = false, from_hub = up->pending();
        if (!from_hub) {
            pollfd fds[2] = {{vp.fd(), POLLIN, 0}, {up->fd(), POLLIN, 0}};
            if (::poll(fds, 2, -1) < 0) {
                if (errno == EINTR)
                    continue;
                return;
            }
            from_vp = fds[0].revents & (POLLIN | POLLHUP | POLLERR);
            from_hub = fds[1].revents & (POLLIN | POLLHUP | POLLERR);
        }
        if (from_vp) {
            auto f = wire::recv_frame(vp);
            if (!f) { // it detached, ended or died: the hub sees the same
                up->close();
                return;
            }
            if (f->type == Type::Sync) {
                auto s = decode_sync(std::move(f->payload), static_cast<int>(nprocs));
                if (!s) { // the hub says why, from a SYNC it cannot read either
                    (void)wire::send_frame(*up, Type::Sync, {});
                    continue;
                }
                auto frames = strip_sync(*s, me);
                originate(std::move(frames));
                if (!wire::send_frame(*up, Type::Sync, encode_sync(*s)))
                    return;
            } else if (f->type == Type::GetData && gets) {
                auto frames = split_replies(*gets, f->payload, me);
                gets.reset();
                if (!frames) { // the hub fails the job on the frame as it is
                    std::fprintf(stderr, "bsp-relay %s: vp %u: %s\n", c_.host.c_str(), me,
                                 frames.error().what().c_str());
                    if (!wire::send_frame(*up, Type::GetData, f->payload))
                        return;
                    continue;
                }
                originate(std::move(*frames));
                if (!wire::send_frame(*up, Type::GetData, {}))
                    return;
            } else if (!wire::send_frame(*up, f->type, f->payload)) {
                return;
            }
        }
        if (from_hub) {
            auto f = wire::recv_frame(*up);
            if (!f) { // the job failed or ended: the VP sees its hub go
                vp.close();
                return;
            }
            if (f->type == Type::GetsRelayed) {
                auto g = decode_routed_gets(f->payload);
                if (!g)
                    fatal(fmt::format("vp {}: {}", me, g.error().what()));
                if (!wire::send_frame(vp, Type::Gets, plain_gets(*g)))
                    return;
                gets = std::move(*g);
                continue;
            }
            if (f->type != Type::DeliverRelayed) {
                if (!wire::send_frame(vp, f->type, f->payload))
                    return;
                continue;
            }
            wire::Reader dr(f->payload);
            const std::uint32_t expected = dr.u32(), flags = dr.u32();
            const bool back = flags & kDeliverBack;
            const std::uint64_t next = dr.u64();
            if (dr.failed() || next == 0)
                fatal(fmt::format("vp {}: malformed DELIVER_RELAYED from the hub", me));
            const auto deliver = std::span<const std::byte>(f->payload).subspan(8);
            auto out = splice_deliver(deliver, take(me, next - 1, expected),
                                      static_cast<int>(nprocs), flags & kRepliesRelayed);
            if (!out)
                fatal(fmt::format("vp {}: {}", me, out.error().what()));
            if (!wire::send_frame(back ? *up : vp, back ? Type::DeliverBack : Type::Deliver, *out))
                return;
        }
    }
}

void Relay::peer_reader(UniqueFd fd) {
    const std::string from = wire::peer_address(fd.get());
    const timeval limit{10, 0}, none{0, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    auto link = wire::tls_accept(*server_, std::move(fd));
    if (!link) {
        std::fprintf(stderr,
                     "bsp-relay %s: refused a connection from %s: %s (not this job's "
                     "key?)\n",
                     c_.host.c_str(), from.c_str(), link.error().what().c_str());
        return;
    }
    ::setsockopt(link->fd(), SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    for (;;) {
        auto f = wire::recv_frame(*link);
        if (!f)
            return; // that relay ended (or died: its VPs' connections tell the hub)
        if (f->type != Type::Data)
            fatal(fmt::format("relay at {} sent {}", from, wire::type_name(f->type)));
        auto d = decode_data(std::move(f->payload));
        if (!d)
            fatal(fmt::format("relay at {}: {}", from, d.error().what()));
        route(std::move(*d), true);
    }
}

} // namespace ghost::bsp::relay
