// SPDX-License-Identifier: GPL-2.0
// bsprun's guard (--on-failure rollback across hosts; Documentation/bsp.md,
// "When bsprun itself is lost"). bsprun rolls a job back when it loses a
// VP or a host, but it cannot when it is itself what was lost: its host
// died, or it was killed. The guard is a small process of the job on the
// checkpoint server's host (which must survive any rollback anyway),
// started by bsprun and placed there by migd like a relay. It holds a
// TLS-PSK connection to the hub with the job's key and waits. bsprun tells
// it to stand down (GUARD_RELEASE) whenever it ends in control of the job:
// done, failed, interrupted, or about to roll back itself. If instead the
// connection is lost (TCP keepalive notices a dead host within seconds),
// the guard kills the lost run's relays on other hosts (they would hold the
// job's socket there) and becomes "bsprun --restart JOB" on its own host,
// on the job's hosts whose migd answers, the lost home host left out; that
// restart itself refuses while the old hub still answers. A hub that went
// silent may only be cut off: the guard then first waits kFenceWaitMs, by
// when the hub has stopped its run (bsp/hub/fence.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ghost/result.hpp"
#include "helper.hpp"
#include "hosts.hpp"

namespace ghost::bsp {

// Where the guard goes: the checkpoint server, unless it is the home host
// (then losing home loses the checkpoints too, and there is no guard: "").
std::string guard_host(const std::string& home, const std::string& server);

// What the guard needs to roll the job back.
struct GuardPlan {
    std::string host;                 // where it runs (guard_host())
    std::string job, key_hex, hub;    // the job, its key, the hub's TCP address
    std::string home;                 // bsprun's host: left out of a rollback
    std::vector<std::string> hosts;   // the job's hosts (--hosts)
    std::string sockets;              // --migd-sockets pattern ("": none)
    std::vector<std::string> restart; // "--server S" and rollback_options() for its host
    std::vector<std::string> helpers; // gids of the run's relays on other hosts
    std::string log;                  // its standard output and error
};

class Guard {
  public:
    // Starts it (a "bsprun --guard" process) and places it on plan.host.
    static Result<Guard> start(HostsMover& mover, GuardPlan plan);
    // After hub.release_guard(): waits (at most 10 s) until it exited, then
    // copies what it wrote to bsprun's stderr and removes its log.
    void finish();
    const HelperProc& proc() const { return proc_; }
    const std::string& log() const { return log_; }

  private:
    Guard(HostsMover& m, HelperProc p, std::string log)
        : mover_(&m), proc_(std::move(p)), log_(std::move(log)) {}
    HostsMover* mover_;
    HelperProc proc_;
    std::string log_;
};

// "bsprun --guard": the guard's own program (its plan in the environment).
// Returns its exit status, or becomes bsprun --restart.
int guard_main();

} // namespace ghost::bsp
