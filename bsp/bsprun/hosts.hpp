// SPDX-License-Identifier: GPL-2.0
// bsprun --hosts: where each VP runs, moves between hosts through migd
// (migrate, then SIGUSR2 through migd's kill by gid), (the barrier hook that places
// and moves them is policy_hook.hpp; Documentation/bsp.md, "Hosts").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hub.hpp"
#include "policy_hook.hpp"

namespace ghost::bsp {

// Where a VP is: its host, its pid there, its migd gid once migd moved it
// (then it is no longer bsprun's child).
struct Place {
    std::string host;
    pid_t pid = -1;
    std::string gid;
    int exit_status = -1; // its wait status, once migd reported it (gone())
};

class HostsMover final : public Mover, public Placer {
  public:
    // home: this host's migd name; home_socket: its control socket;
    // sockets: a pattern with "{host}" giving another host's control socket
    // (empty: none; a VP on another host is then moved by gid through the
    // home migd, which forwards the request).
    HostsMover(std::string home, std::string home_socket, std::string sockets, int nprocs);

    const std::string& home() const { return home_; }
    const Place& place(int vp) const { return places_.at(static_cast<std::size_t>(vp)); }
    void set_pid(int vp, pid_t pid) { places_.at(static_cast<std::size_t>(vp)).pid = pid; }
    // A VP restarted by migd (bsprun --restart): its host, pid and gid.
    void set_place(int vp, Place p) { places_.at(static_cast<std::size_t>(vp)) = std::move(p); }
    const std::string& home_socket() const { return home_socket_; }
    // The control socket of host's migd ("" : unknown, see --migd-sockets).
    std::string socket_of(const std::string& host) const;
    // The destination and the reason of the VP's next move.
    void plan(int vp, std::string to, std::string why) override;
    const std::string& host_of(int vp) const override { return place(vp).host; }
    // Called after a move of one of bsprun's children (reaped here).
    void on_child_left(std::function<void(int vp)> cb) { child_left_ = std::move(cb); }

    Result<pid_t> move(int vp, pid_t pid, std::uint64_t superstep) override;
    Result<void> wake(int vp, pid_t pid) override;
    // SIGKILL to the VP wherever it is (by pid, or through migd by gid).
    void kill(int vp, pid_t pid);
    // Whether a VP that migd moved has exited (migd says "exited", or no
    // longer knows it); always false for bsprun's own children. An exited
    // VP's wait status, when the migd that restored it reaped it, is kept
    // for exit_status().
    bool gone(int vp);
    // The wait status migd reported for a VP that moved (-1: not known).
    int exit_status(int vp) const { return place(vp).exit_status; }

  private:
    std::string home_, home_socket_, sockets_;
    std::vector<Place> places_;
    std::vector<std::pair<std::string, std::string>> plans_; // to, why
    std::function<void(int)> child_left_;
};

// The control socket of host's migd named by a --migd-sockets pattern
// ("{host}" replaced by host); "" when the pattern names none.
std::string socket_in(const std::string& pattern, const std::string& host);

// {"op":"kill","gid":G,"signal":S} to the migd on socket, which passes it
// on to the host where G runs. The error is migd's, or why it could not be
// asked.
Result<void> migd_kill(const std::string& socket, const std::string& gid, int sig);
// Whether the process migd knows as gid has exited, or migd no longer knows
// it. *status: its wait status when migd reaped it (else left as it was).
bool migd_gone(const std::string& socket, const std::string& gid, int* status);

// Every host of the migd cluster as the migd on socket knows it ({"op":
// "hosts"}: itself, then its peers), as a comma-separated list.
Result<std::string> cluster_hosts(const std::string& socket);

} // namespace ghost::bsp
