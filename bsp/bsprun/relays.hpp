// SPDX-License-Identifier: GPL-2.0
// bsprun --routing relay: a bsp-relay process on every host of the job
// (Documentation/bsp.md, "Routing through relays"). Each starts here,
// holding nothing; migd moves it to its host and bsprun wakes it there,
// as it places a VP. The home host's stays bsprun's child.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "ghost/result.hpp"
#include "helper.hpp"
#include "hosts.hpp"

namespace ghost::bsp {

using RelayProc = HelperProc;

// "bsprun: routing: ..." for the end of a job (the relays' counters).
std::string routing_summary(const RelayTotals& t, bool broadcast);

class Relays {
  public:
    // The relays' hosts: home first, then every other host of hosts once.
    static std::vector<std::string> hosts_of(const std::string& home,
                                             const std::vector<std::string>& hosts);
    // Starts one per host (its output in DIR/relay-HOST.log); the hub must
    // be listening at hub_address. The error names the host and the cause;
    // the relays started so far are killed then.
    static Result<Relays> start(const std::vector<std::string>& hosts, HostsMover& mover,
                                const std::string& dir, const std::string& job,
                                const std::string& key_hex, const std::string& hub_address);
    Relays(Relays&&) = default;
    ~Relays() { kill_all(); }

    // Once the home relay listens on the job's socket (VPs started here
    // connect to it at once); ETIMEDOUT after 10 s.
    Result<void> wait_home_listening(const std::string& job);
    // The relays' hosts, in the order they were started (hosts_of's).
    std::vector<std::string> hosts() const;
    // The migd gids of the relays migd moved (every host's but home's).
    std::vector<std::string> gids() const;
    // SIGKILL to every relay still there (by pid, or through migd by gid).
    void kill_all();
    // After the job: waits (at most 30 s) until every relay exited, then
    // copies what each wrote to bsprun's stderr and removes its log.
    void finish();

  private:
    Relays(HostsMover& m, std::string dir) : mover_(&m), dir_(std::move(dir)) {}
    bool gone(const RelayProc& r);
    std::string log_of(const std::string& host) const;

    HostsMover* mover_;
    std::string dir_;
    std::vector<RelayProc> procs_;
    bool finished_ = false;
};

} // namespace ghost::bsp
