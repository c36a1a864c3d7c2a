// SPDX-License-Identifier: GPL-2.0
// bsprun --checkpoint-every / --restart / --on-failure rollback: Hector's
// coordinated checkpoint at a barrier through migd's checkpoint server, the
// job manifest stored beside the images, and restoring a job from it
// (Documentation/bsp.md, "Checkpoint and rollback").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hosts.hpp"
#include "hub.hpp"

namespace ghost::bsp {

// One VP's image in a checkpoint.
struct VpImage {
    std::string id;   // the checkpoint server's image id
    std::string host; // where the VP ran when it was checkpointed
    std::string gid;  // its migd gid then ("" : bsprun's child)
    std::uint64_t bytes = 0;
};

// Everything a restart needs, stored last (after every image): a
// checkpoint is complete only once its manifest is.
struct Manifest {
    std::string job;     // job id: the hub's abstract name, HELLO's job
    std::string key_hex; // the job key (TLS-PSK) every VP holds in memory
    int nprocs = 0;
    std::vector<std::string> program; // PROGRAM ARGS (for the record)
    std::uint64_t number = 0;         // checkpoint C of the job (1, 2, ...)
    HubState hub;                     // superstep the VPs resume in, tag size
    std::string job_dir;              // the VPs' output files (reopened by path)
    std::string home;                 // the home host and hub address of the run that wrote it
    std::string hub_address;
    std::vector<std::string> hosts; // the run's --hosts
    std::vector<VpImage> images;    // by vp

    nlohmann::json to_json() const;
    static Result<Manifest> from_json(const nlohmann::json& j);
};

// The manifest of job on the checkpoint server, through the home migd.
Result<Manifest> fetch_manifest(const std::string& home_socket, const std::string& server,
                                const std::string& job);

class JobCheckpointer final : public Checkpointer {
  public:
    // base: job, key, nprocs, program, job dir, home, hub address, hosts
    // (and, after a restart, the number of the checkpoint it came from).
    JobCheckpointer(HostsMover& mover, std::string server, unsigned every, Manifest base);
    bool due(std::uint64_t superstep) override;
    void checkpoint(const HubState& st, std::span<const pid_t> pids) override;
    // The number of the last complete checkpoint (0: none yet).
    std::uint64_t last_complete() const { return last_.number; }
    const Manifest& last() const { return last_; }

  private:
    Result<std::uint64_t> take(const HubState& st, std::span<const pid_t> pids, Manifest& m);
    void remove_images(const std::vector<VpImage>& images);

    HostsMover& mover_;
    std::string server_;
    unsigned every_;
    Manifest last_; // the last complete one (number 0: none)
};

// Before a checkpointed job starts: the home migd answers, and server is
// a checkpoint server it reaches (its "images" list), or an error naming
// which of them failed and why.
Result<void> check_server(const std::string& home_socket, const std::string& server);

// Whether the hub of the run that wrote m still answers at its TCP address
// with the job's key (a TLS handshake within 2 s): then the job runs, and a
// restart must not kill its processes.
bool hub_answers(const Manifest& m);

// Restarts every VP of m from its image: VP v on hosts[v mod n], through
// the home migd's restart; old processes of the job that migd still knows
// (by gid) are killed first. Fills mover's places; returns the pids.
Result<std::vector<pid_t>> restore_vps(HostsMover& mover, const Manifest& m,
                                       const std::string& server,
                                       const std::vector<std::string>& hosts);

// Of hosts, those whose migd answers a ping on its control socket (a host
// whose socket bsprun does not know counts as up).
std::vector<std::string> hosts_up(HostsMover& mover, const std::vector<std::string>& hosts);
// The same with the sockets socket_of names (the guard has no mover).
std::vector<std::string> hosts_up(const std::vector<std::string>& hosts,
                                  const std::function<std::string(const std::string&)>& socket_of);

} // namespace ghost::bsp
