// SPDX-License-Identifier: GPL-2.0
// bsprun --hosts: everything a multi-host job adds to a one-host one — the
// job key and the hub's TLS listener, the job directory of output files,
// placement and moves through migd — behind one object main() drives.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hosts.hpp"
#include "hub.hpp"
#include "link.hpp"
#include "output.hpp"
#include "policy_hook.hpp"

namespace ghost::bsp {

// The home host's migd name: home, else $GHOST_CLUSTER_HOST, else the host
// name up to its first dot.
std::string resolve_home(std::string home);

// "h1,h2,,h3" -> {h1, h2, h3}.
std::vector<std::string> split_hosts(const std::string& list);

class MultiHost {
  public:
    static Result<MultiHost> make(std::vector<std::string> hosts, std::string home,
                                  std::string migd_socket, std::string migd_sockets,
                                  std::string hub_address, std::string job_dir, int nprocs,
                                  std::optional<wire::Key> key = {});

    const std::string& home() const { return mover_->home(); }
    const std::string& hub_address() const { return hub_addr_; }
    std::string key_hex() const { return wire::key_hex(key_); }
    const std::vector<std::string>& hosts() const { return hosts_; }
    HostsMover& mover() { return *mover_; }
    JobOutput& output() { return output_; }
    // The barrier hook: placement, the policy's moves (policy null: none),
    // --migrate-every.
    BarrierHook& hook(std::unique_ptr<balance::Policy> policy, unsigned every, bool verbose,
                      bool dry_run = false);

    // What the policy of hook() cost so far (zeros before hook()).
    PolicyCost policy_cost() const { return hook_ ? hook_->cost() : PolicyCost{}; }

    // In VP v's child before exec: stdin /dev/null, stdout and stderr the
    // VP's files (O_APPEND). false (with a message) on an error.
    bool redirect(int v) const;
    // In a child: GHOST_BSP_HUB, GHOST_BSP_HUBFILE and GHOST_BSP_KEY.
    void set_env() const;
    // Gives the hub the TCP listener, the mover and the killer, and has it
    // follow the output files.
    void attach(Hub& hub, const std::vector<pid_t>& pids);
    // After the hub: waits (following the output) until every VP that
    // migd moved has exited; when the job failed they were killed.
    void finish(bool ok);

  private:
    MultiHost(JobOutput out) : output_(std::move(out)) {}
    std::vector<std::string> hosts_;
    int nprocs_ = 0;
    wire::Key key_{};
    std::string hub_addr_; // "a.b.c.d:port"
    UniqueFd tcp_;
    std::unique_ptr<wire::TlsContext> tls_;
    JobOutput output_;
    std::unique_ptr<HostsMover> mover_;
    std::unique_ptr<PolicyHook> hook_;
    unsigned ticks_ = 0;
};

} // namespace ghost::bsp
