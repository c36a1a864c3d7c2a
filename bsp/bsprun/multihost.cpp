// SPDX-License-Identifier: GPL-2.0
// MultiHost: the parts of bsprun --hosts (see multihost.hpp).
#include "multihost.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

namespace ghost::bsp {

std::vector<std::string> split_hosts(const std::string& list) {
    std::vector<std::string> out;
    std::stringstream ss(list);
    std::string h;
    while (std::getline(ss, h, ','))
        if (!h.empty())
            out.push_back(h);
    return out;
}

std::string resolve_home(std::string home) {
    if (!home.empty())
        return home;
    if (const char* h = std::getenv("GHOST_CLUSTER_HOST"); h && *h)
        return h;
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    home = name;
    if (const auto dot = home.find('.'); dot != std::string::npos)
        home.resize(dot);
    return home;
}

Result<MultiHost> MultiHost::make(std::vector<std::string> hosts, std::string home,
                                  std::string migd_socket, std::string migd_sockets,
                                  std::string hub_address, std::string job_dir, int nprocs,
                                  std::optional<wire::Key> key) {
    home = resolve_home(std::move(home));
    if (hub_address.empty()) {
        auto a = wire::default_address();
        if (!a)
            return a.error();
        hub_address = *a;
    }
    auto out = JobOutput::open(std::move(job_dir), nprocs);
    if (!out)
        return out.error();
    MultiHost m(std::move(*out));
    m.hosts_ = std::move(hosts);
    m.nprocs_ = nprocs;
    if (!key) {
        auto k = wire::make_key();
        if (!k)
            return k.error();
        key = *k;
    }
    m.key_ = *key;
    auto tcp = wire::listen_tcp(hub_address, &m.hub_addr_);
    if (!tcp)
        return Error::from_errno(tcp.error().code.value(),
                                 fmt::format("the hub's TCP listener: {}", tcp.error().what()));
    m.tcp_ = std::move(*tcp);
    // DIR/hub: where a VP that cannot reach the hub's abstract socket finds
    // it on reconnecting (a VP restored by bsprun --restart, whose hub is
    // new): written whole under another name, then renamed.
    const std::string hub_file = m.output_.dir() + "/hub", tmp = hub_file + ".tmp";
    if (std::FILE* f = std::fopen(tmp.c_str(), "we")) {
        std::fprintf(f, "%s\n", m.hub_addr_.c_str());
        const bool ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
        std::fclose(f);
        if (!ok || ::rename(tmp.c_str(), hub_file.c_str()) != 0)
            return Error::from_errno(errno, fmt::format("job directory: cannot write {}: {}",
                                                        hub_file, std::strerror(errno)));
    } else {
        return Error::from_errno(
            errno, fmt::format("job directory: cannot write {}: {}", tmp, std::strerror(errno)));
    }
    auto tls = wire::TlsContext::make(wire::TlsContext::Role::Server, m.key_);
    if (!tls)
        return tls.error();
    m.tls_ = std::make_unique<wire::TlsContext>(std::move(*tls));
    m.mover_ = std::make_unique<HostsMover>(std::move(home), std::move(migd_socket),
                                            std::move(migd_sockets), nprocs);
    return m;
}

BarrierHook& MultiHost::hook(std::unique_ptr<balance::Policy> policy, unsigned every, bool verbose,
                             bool dry_run) {
    hook_ =
        std::make_unique<PolicyHook>(*mover_, hosts_, std::move(policy), every, nprocs_, verbose);
    hook_->set_dry_run(dry_run);
    return *hook_;
}

bool MultiHost::redirect(int v) const {
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(output_.path(v, false).c_str(), O_WRONLY | O_APPEND);
    const int err = ::open(output_.path(v, true).c_str(), O_WRONLY | O_APPEND);
    if (in < 0 || out < 0 || err < 0) {
        std::fprintf(stderr, "bsprun: vp %d: cannot open its output files in %s: %s\n", v,
                     output_.dir().c_str(), std::strerror(errno));
        return false;
    }
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    return true; // close_range(3, ...) closes the originals
}

void MultiHost::set_env() const {
    ::setenv("GHOST_BSP_HUB", hub_addr_.c_str(), 1);
    ::setenv("GHOST_BSP_HUBFILE", (output_.dir() + "/hub").c_str(), 1);
    ::setenv("GHOST_BSP_KEY", wire::key_hex(key_).c_str(), 1);
}

void MultiHost::attach(Hub& hub, const std::vector<pid_t>& pids) {
    for (std::size_t v = 0; v < pids.size(); ++v)
        mover_->set_pid(static_cast<int>(v), pids[v]);
    hub.set_tcp(std::move(tcp_), std::move(*tls_));
    hub.set_mover(mover_.get());
    hub.set_killer([this](int vp, pid_t pid) { mover_->kill(vp, pid); });
    hub.watch(output_.timer(), [this, &hub] {
        output_.tick();
        // A VP that died while detached (e.g. it could not reconnect) has
        // no connection to drop: ask migd now and then (every 20 ticks, 1 s).
        if (++ticks_ % 20 != 0)
            return;
        for (int v = 0; v < nprocs_; ++v)
            if (hub.detached(v) && mover_->gone(v)) {
                const Place& p = mover_->place(v);
                return hub.fail(v,
                                fmt::format("vp {} ({} on {}, pid {}) exited while detached, "
                                            "before it reconnected to the hub",
                                            v, p.gid, p.host, p.pid),
                                true);
            }
    });
}

void MultiHost::finish(bool ok) {
    (void)ok; // a failed job's VPs were killed: they are gone soon either way
    std::vector<bool> done(static_cast<std::size_t>(nprocs_));
    for (;;) {
        bool all = true;
        for (int v = 0; v < nprocs_; ++v) {
            auto d = done[static_cast<std::size_t>(v)];
            if (!d)
                done[static_cast<std::size_t>(v)] = mover_->place(v).gid.empty() || mover_->gone(v);
            all = all && done[static_cast<std::size_t>(v)];
        }
        output_.copy();
        if (all)
            return;
        pollfd p{output_.timer(), POLLIN, 0};
        if (::poll(&p, 1, -1) > 0)
            output_.tick();
    }
}

} // namespace ghost::bsp
