// SPDX-License-Identifier: LGPL-2.1-or-later
// EventStream: ghost.ko's generic netlink events, read with libnl-genl.
#include "ghost/events.hpp"

#include <fcntl.h>
#include <netlink/errno.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/socket.h>
#include <poll.h>

#include <cerrno>
#include <deque>

#include <fmt/format.h>
#include <linux/ghost.h>

#include "sys.hpp"

namespace ghost {

namespace {

struct SockFree {
    void operator()(nl_sock* s) const { nl_socket_free(s); }
};

// libnl's error numbers as errno values, for Error::code.
int nl_errno(int nlerr) {
    switch (nlerr < 0 ? -nlerr : nlerr) {
    case NLE_PERM:
    case NLE_NOACCESS:
        return EPERM;
    case NLE_OBJ_NOTFOUND:
        return ENOENT;
    case NLE_NOMEM:
        return ENOBUFS; // a full receive queue: events were dropped
    case NLE_INTR:
        return EINTR;
    case NLE_AGAIN:
        return EAGAIN;
    case NLE_BAD_SOCK:
        return EBADF;
    default:
        return EIO;
    }
}

} // namespace

Error Event::error() const {
    if (result == 0)
        return {};
    std::string why = reason.empty() ? errno_text(-result) : reason;
    return Error::from_errno(-result, std::move(why));
}

std::string Event::mode() const {
    if (kind == Kind::Import)
        return (flags & GHOST_IMPORT_PREPARE) ? "prepare" : "restore";
    if (flags & GHOST_EXPORT_RUN)
        return "run";
    if (flags & GHOST_EXPORT_STOP)
        return "stop";
    if (flags & GHOST_EXPORT_KILL)
        return "kill";
    return "?";
}

struct EventStream::Impl {
    std::unique_ptr<nl_sock, SockFree> sk;
    std::deque<Event> queue;

    static int on_message(nl_msg* msg, void* arg) {
        auto* self = static_cast<Impl*>(arg);
        nlmsghdr* nlh = nlmsg_hdr(msg);
        auto* gh = static_cast<genlmsghdr*>(nlmsg_data(nlh));
        nlattr* a[GHOST_ATTR_MAX + 1];
        if (genlmsg_parse(nlh, 0, a, GHOST_ATTR_MAX, nullptr) != 0)
            return NL_SKIP;
        Event e;
        if (gh->cmd == GHOST_CMD_EXPORTED)
            e.kind = Event::Kind::Export;
        else if (gh->cmd == GHOST_CMD_IMPORTED)
            e.kind = Event::Kind::Import;
        else
            return NL_SKIP; // a command this libghost does not know
        if (a[GHOST_ATTR_PID])
            e.pid = static_cast<pid_t>(nla_get_u32(a[GHOST_ATTR_PID]));
        if (a[GHOST_ATTR_BYTES])
            e.bytes = nla_get_u64(a[GHOST_ATTR_BYTES]);
        if (a[GHOST_ATTR_FROZEN_NS])
            e.frozen_ns = nla_get_u64(a[GHOST_ATTR_FROZEN_NS]);
        if (a[GHOST_ATTR_RESULT])
            e.result = static_cast<std::int32_t>(nla_get_u32(a[GHOST_ATTR_RESULT]));
        if (a[GHOST_ATTR_FLAGS])
            e.flags = nla_get_u32(a[GHOST_ATTR_FLAGS]);
        if (a[GHOST_ATTR_REASON])
            e.reason = nla_get_string(a[GHOST_ATTR_REASON]);
        self->queue.push_back(std::move(e));
        return NL_OK;
    }
};

EventStream::EventStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EventStream::EventStream(EventStream&&) noexcept = default;
EventStream& EventStream::operator=(EventStream&&) noexcept = default;
EventStream::~EventStream() = default;

Result<EventStream> EventStream::open() {
    auto impl = std::make_unique<Impl>();
    impl->sk.reset(nl_socket_alloc());
    if (!impl->sk)
        return Error::from_errno(ENOMEM, "cannot allocate a netlink socket");
    if (int err = genl_connect(impl->sk.get()); err < 0)
        return Error::from_errno(nl_errno(err), fmt::format("cannot connect to generic netlink: "
                                                            "{}",
                                                            nl_geterror(err)));
    const int grp = genl_ctrl_resolve_grp(impl->sk.get(), GHOST_GENL_NAME, GHOST_GENL_MCGRP_EVENTS);
    if (grp < 0)
        return Error::from_errno(ENOENT, fmt::format("the netlink family \"{}\" is not there: is "
                                                     "ghost.ko loaded? ({}; the user engine "
                                                     "emits no events)",
                                                     GHOST_GENL_NAME, nl_geterror(grp)));
    nl_socket_disable_seq_check(impl->sk.get());
    nl_socket_modify_cb(impl->sk.get(), NL_CB_VALID, NL_CB_CUSTOM, &Impl::on_message, impl.get());
    if (int err = nl_socket_add_membership(impl->sk.get(), grp); err < 0)
        return Error::from_errno(nl_errno(err), fmt::format("cannot join the ghost events group: "
                                                            "{} (it needs CAP_NET_ADMIN: run "
                                                            "as root)",
                                                            nl_geterror(err)));
    // Not inherited by programs the caller runs.
    ::fcntl(nl_socket_get_fd(impl->sk.get()), F_SETFD, FD_CLOEXEC);
    if (int err = nl_socket_set_nonblocking(impl->sk.get()); err < 0)
        return Error::from_errno(nl_errno(err),
                                 fmt::format("netlink socket: {}", nl_geterror(err)));
    return EventStream(std::move(impl));
}

int EventStream::fd() const {
    return nl_socket_get_fd(impl_->sk.get());
}

Result<std::optional<Event>> EventStream::next(std::chrono::milliseconds timeout) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + timeout;
    while (impl_->queue.empty()) {
        int wait = -1;
        if (timeout.count() >= 0) {
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
            wait = left.count() > 0 ? static_cast<int>(left.count()) : 0;
        }
        pollfd p{fd(), POLLIN, 0};
        const int r = ::poll(&p, 1, wait);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return Error::from_errno(
                errno, fmt::format("waiting for ghost events: {}", errno_text(errno)));
        if (r == 0)
            return std::optional<Event>();
        const int err = nl_recvmsgs_default(impl_->sk.get());
        if (err < 0 && err != -NLE_INTR && err != -NLE_AGAIN)
            return Error::from_errno(nl_errno(err),
                                     fmt::format("receiving ghost events: {}", nl_geterror(err)));
    }
    Event e = std::move(impl_->queue.front());
    impl_->queue.pop_front();
    return std::optional<Event>(std::move(e));
}

} // namespace ghost
