// SPDX-License-Identifier: GPL-2.0
// HostsMover: VPs on several hosts through migd's control
// socket (tools/migd_client).
#include "hosts.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "migd_client.hpp"

namespace ghost::bsp {

using nlohmann::json;

HostsMover::HostsMover(std::string home, std::string home_socket, std::string sockets, int nprocs)
    : home_(std::move(home)), home_socket_(std::move(home_socket)), sockets_(std::move(sockets)),
      places_(static_cast<std::size_t>(nprocs)), plans_(static_cast<std::size_t>(nprocs)) {
    for (auto& p : places_)
        p.host = home_;
}

void HostsMover::plan(int vp, std::string to, std::string why) {
    plans_.at(static_cast<std::size_t>(vp)) = {std::move(to), std::move(why)};
}

std::string socket_in(const std::string& pattern, const std::string& host) {
    const auto at = pattern.find("{host}");
    if (at == std::string::npos)
        return {};
    std::string s = pattern;
    s.replace(at, 6, host);
    return s;
}

std::string HostsMover::socket_of(const std::string& host) const {
    return host == home_ ? home_socket_ : socket_in(sockets_, host);
}

Result<pid_t> HostsMover::move(int vp, pid_t pid, std::uint64_t superstep) {
    auto [to, why] = std::move(plans_.at(static_cast<std::size_t>(vp)));
    plans_[static_cast<std::size_t>(vp)] = {};
    Place& pl = places_.at(static_cast<std::size_t>(vp));
    if (to.empty() || to == pl.host)
        return pid;
    const auto failed = [&](const std::string& e) -> Result<pid_t> {
        std::fprintf(stderr,
                     "bsprun: end of superstep %llu: moving vp %d from %s:%d to %s failed: %s; it "
                     "continues on %s\n",
                     static_cast<unsigned long long>(superstep), vp, pl.host.c_str(), pid,
                     to.c_str(), e.c_str(), pl.host.c_str());
        return Error::from_errno(EIO, e);
    };
    // The migd of the VP's host by pid when bsprun has its socket (this
    // host's, or --migd-sockets); else this host's migd by gid, which
    // forwards the request to the host where the VP runs.
    std::string sock = socket_of(pl.host);
    json req = {{"op", "migrate"}, {"pid", pid}, {"to", to}};
    if (sock.empty() && !pl.gid.empty()) {
        sock = home_socket_;
        req = {{"op", "migrate"}, {"gid", pl.gid}, {"to", to}};
    }
    if (sock.empty())
        return failed(fmt::format("bsprun knows no control socket of {}'s migd", pl.host));
    const json r = migd_client::call(sock, req);
    if (!r.value("ok", false))
        return failed(fmt::format("migd ({}): migrate {}: {}", sock,
                                  req.contains("gid") ? pl.gid : std::to_string(pid),
                                  r.value("error", "refused without a reason")));
    const Place was = pl;
    pl.host = r.value("host", to);
    pl.pid = r.value("pid", -1);
    pl.gid = r.value("gid", "");
    if (was.gid.empty()) { // it was our child: migd killed it, reap it
        while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        if (child_left_)
            child_left_(vp);
    }
    std::fprintf(stderr, "bsprun: end of superstep %llu: vp %d moved from %s:%d to %s:%d (%s)\n",
                 static_cast<unsigned long long>(superstep), vp, was.host.c_str(), pid,
                 pl.host.c_str(), pl.pid, why.c_str());
    if (r.contains("pending"))
        std::fprintf(stderr, "bsprun: note: %s\n", r.value("pending", "").c_str());
    return pl.pid;
}

Result<std::string> cluster_hosts(const std::string& socket) {
    const json r = migd_client::call(socket, {{"op", "hosts"}});
    if (!r.value("ok", false))
        return Error::from_errno(EIO,
                                 fmt::format("this host's migd ({}) did not list its hosts: {}",
                                             socket, r.value("error", "refused without a reason")));
    std::string list;
    for (const auto& h : r.value("hosts", json::array())) {
        const std::string name = h.value("name", "");
        if (name.empty())
            continue;
        list += (list.empty() ? "" : ",") + name;
    }
    if (list.empty())
        return Error::from_errno(EIO, fmt::format("the migd on {} names no host", socket));
    return list;
}

Result<void> migd_kill(const std::string& socket, const std::string& gid, int sig) {
    const json r = migd_client::call(socket, {{"op", "kill"}, {"gid", gid}, {"signal", sig}});
    if (!r.value("ok", false))
        return Error::from_errno(EIO, r.value("error", "refused without a reason"));
    return {};
}

bool migd_gone(const std::string& socket, const std::string& gid, int* status) {
    const json r = migd_client::call(socket, {{"op", "where"}, {"gid", gid}});
    if (!r.value("ok", false))
        return true;
    if (r.value("state", "") != "exited")
        return false;
    *status = r.value("exit_status", -1);
    return true;
}

Result<void> HostsMover::wake(int vp, pid_t pid) {
    const Place& pl = places_.at(static_cast<std::size_t>(vp));
    if (pl.gid.empty())
        return Mover::wake(vp, pid);
    if (auto k = migd_kill(home_socket_, pl.gid, SIGUSR2); !k)
        return Error::from_errno(EIO, fmt::format("vp {}: cannot wake {} ({}:{}) through migd: {}",
                                                  vp, pl.gid, pl.host, pl.pid, k.error().what()));
    return {};
}

void HostsMover::kill(int vp, pid_t pid) {
    const Place& pl = places_.at(static_cast<std::size_t>(vp));
    if (pl.gid.empty()) {
        ::kill(pid, SIGKILL);
        return;
    }
    if (auto k = migd_kill(home_socket_, pl.gid, SIGKILL); !k)
        std::fprintf(stderr, "bsprun: killing vp %d (%s, %s:%d) through migd: %s\n", vp,
                     pl.gid.c_str(), pl.host.c_str(), pl.pid, k.error().what().c_str());
}

bool HostsMover::gone(int vp) {
    Place& pl = places_.at(static_cast<std::size_t>(vp));
    return !pl.gid.empty() && migd_gone(home_socket_, pl.gid, &pl.exit_status);
}

} // namespace ghost::bsp
