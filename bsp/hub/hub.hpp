// SPDX-License-Identifier: GPL-2.0
// The per-host hub of a BSP job: accepts the virtual processors (VPs), holds
// everything they send until the barrier, answers gets, delivers, and moves
// VPs at barriers through a BarrierHook and a Mover (Documentation/bsp.md).
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data.hpp"
#include "fence.hpp"
#include "ghost/fd.hpp"
#include "ghost/result.hpp"
#include "link.hpp"
#include "sync.hpp"

namespace ghost::bsp {

// What a VP reports at a barrier about the superstep it just ended.
struct VpStats {
    int vp = 0;
    pid_t pid = -1;                 // its process now
    double comp_wall = 0;           // seconds of wall time computing (since its last sync)
    double comp_cpu = 0;            // seconds of CPU time in the same span
    std::uint64_t bytes_sent = 0;   // put, hpput and send payload bytes of the superstep
    std::uint64_t memory_bytes = 0; // its resident size at the sync (/proc/self/statm); 0: unknown
    // Bytes it receives at this barrier from each VP (indexed by source VP):
    // puts and messages (tag + payload) addressed to it, and its gets' replies.
    std::vector<std::uint64_t> bytes_from;
    // User-mode instructions of its computation, counted with
    // perf_event_open; when they could not be, the errno why (and 0).
    std::uint64_t instructions = 0;
    int instructions_errno = 0;
};

// bytes_from of every VP (received[dest][src]) from the barrier's SYNCs.
std::vector<std::vector<std::uint64_t>> received_bytes(std::span<const SyncRequest> syncs);

// Called once per barrier (after gets are answered, before delivery) with
// every VP's statistics; returns the VPs to move (later: the balance/
// policies and migd). The default moves nothing.
class BarrierHook {
  public:
    virtual ~BarrierHook() = default;
    virtual std::vector<int> barrier(std::uint64_t superstep, std::span<const VpStats> stats) = 0;
};

// Moves a detached VP (blocked in sigsuspend with no socket) and returns its
// new pid, with the copy running (it still waits for SIGUSR2, which the hub
// sends). On an error the original must still exist and be untouched.
class Mover {
  public:
    virtual ~Mover() = default;
    virtual Result<pid_t> move(int vp, pid_t pid, std::uint64_t superstep) = 0;
    // Wakes the detached VP (moved or not) with SIGUSR2 wherever it is.
    virtual Result<void> wake(int vp, pid_t pid);
};

// How a job ended.
struct Outcome {
    bool ok = true;
    int failed_vp = -1; // the VP that aborted or died; -1 for a job-wide error
    std::string why;    // for the user, naming the VP and the cause
    bool lost = false;  // failed_vp's process or connection was lost (not an abort or misuse)
};

// What the hub must get back to resume a job from a checkpoint (besides
// the job id and key, which bsprun keeps): the superstep the VPs resume in
// and the tag size in force. Registrations need nothing here: the hub only
// checks each barrier's collective operations and every VP holds the
// sizes of all registrations in its own memory.
struct HubState {
    std::uint64_t superstep = 0;
    std::int64_t tagsize = 0;
};

// Coordinated checkpoints (bsprun --checkpoint-every, Documentation/bsp.md).
class Checkpointer {
  public:
    virtual ~Checkpointer() = default;
    // Whether to checkpoint at the end of this superstep.
    virtual bool due(std::uint64_t superstep) = 0;
    // Every VP has applied its DELIVER and is detached: no socket, nothing
    // in flight, nothing held by the hub. pids[v]: VP v's process. The hub
    // wakes them all afterwards, whatever happened here.
    virtual void checkpoint(const HubState& st, std::span<const pid_t> pids) = 0;
};

// What the relays did (their RELAY_STATS, summed at the job's end).
struct RelayTotals : relay::Counters {
    int reported = 0; // relays that answered END
};

class Hub {
  public:
    // listen: the job's abstract socket; nprocs VPs are expected.
    Hub(UniqueFd listen, std::string job, int nprocs);

    void set_hook(BarrierHook* hook) { hook_ = hook; }
    void set_mover(Mover* mover) { mover_ = mover; }
    void set_checkpointer(Checkpointer* c) { checkpointer_ = c; }
    // Resume a job restarted from a checkpoint: every VP is detached (its
    // restored process waits for SIGUSR2) and owes no DELIVER; superstep
    // and tag size are the checkpoint's.
    void resume(const HubState& st);
    HubState hub_state() const { return {superstep_, tagsize_}; }
    // VPs on other hosts: a TCP listener whose connections must complete a
    // TLS-PSK handshake with the job key (ctx) before their HELLO. A
    // refused connection is logged on stderr and changes nothing else.
    void set_tcp(UniqueFd listen, wire::TlsContext ctx);
    // The VP's process before it says HELLO (bsprun knows it from fork), so
    // that a failure before then still kills it.
    void set_pid(int vp, pid_t pid) { vps_.at(vp).pid = pid; }
    pid_t pid(int vp) const { return vps_.at(vp).pid; }
    // Whether the VP was sent DETACH and has not said HELLO again.
    bool detached(int vp) const { return vps_.at(vp).state == State::Detached; }
    // Another descriptor the loop polls (bsprun: output pipes, SIGCHLD).
    void watch(int fd, std::function<void()> readable);
    void unwatch(int fd);
    // VP vp's process ended with a wait status (bsprun's SIGCHLD): fails the
    // job unless the VP had ended or is being moved.
    void process_exited(int vp, int status);
    // Fails the job: kills every VP's process (SIGKILL: by pid, or through
    // the killer for a VP on another host) but failed_vp's, and makes run()
    // return.
    // lost: the VP's process or connection was lost (Outcome::lost).
    void fail(int failed_vp, std::string why, bool lost = false);
    // How fail() kills a VP (default: SIGKILL to its pid; bsprun: through
    // migd for a VP on another host).
    void set_killer(std::function<void(int vp, pid_t pid)> k) { killer_ = std::move(k); }

    // Routing through relays (bsprun --routing relay, bsp/relay/): one relay
    // per host of hosts connects over TCP (RELAY_HELLO); every VP must come
    // through its host's relay. host_of gives a VP's host now (after a
    // move too). broadcast: a move's new link-table entry goes to every
    // relay (else to the old and the new host's only).
    void set_relays(std::vector<std::string> hosts, bool broadcast,
                    std::function<std::string(int vp)> host_of);
    const RelayTotals& relay_totals() const { return relay_totals_; }

    // Runs until every VP called bsp_end (ENDOK sent) or the job failed.
    Outcome run();

    // The guard (bsprun --on-failure rollback across hosts, bsp/bsprun/
    // guard.hpp) connects over TCP (GUARD_HELLO) and waits; the hub never
    // reads from it, but a GuardFence ends this process if it goes silent
    // (fence.hpp). Whether it has connected:
    bool guarded() const { return static_cast<bool>(guard_); }
    // Accepts connections until the guard said GUARD_HELLO (true), or for
    // at most limit: run() must not end a job before its guard is there.
    bool wait_for_guard(std::chrono::milliseconds limit);
    // bsprun is in control to the end (the job ended, failed, or bsprun
    // rolls it back itself): GUARD_RELEASE tells the guard to exit, so that
    // the hub's end is not taken for bsprun's loss. True once the guard
    // closed its end in answer (within 5 s), false when that was not seen
    // (then it may roll the job back) or there was no guard. Idempotent.
    bool release_guard();

    std::uint64_t superstep() const { return superstep_; }

  private:
    enum class State { Absent, Running, AtSync, Detached, Ended, Gone };
    struct Vp {
        State state = State::Absent;
        pid_t pid = -1;
        wire::Link fd;
        SyncRequest sync;            // while AtSync
        std::vector<std::byte> held; // DELIVER kept while Detached
        bool relayed = false;        // connected through its host's relay
    };
    struct RelaySlot {
        std::string host, address;
        wire::Link link;
    };

    void accept_one();
    void accept_tcp();
    void hello(wire::Link link, bool tcp);
    void on_frame(int vp);
    void on_sync(int vp, Frame&& f);
    void on_end(int vp);
    void barrier();
    bool answer_gets(std::vector<std::vector<std::byte>>& replies);
    void checkpoint_all(std::vector<std::vector<std::byte>>& out);
    void wake(int vp);
    void detach_and_move(const std::vector<int>& moves, std::vector<std::vector<std::byte>>& out);
    void send_or_fail(int vp, wire::Type type, std::span<const std::byte> payload);
    // DELIVER, or through a relay DELIVER_RELAYED with the DATA count it
    // waits for (back: the relay returns it completed, for a VP to move).
    void deliver(int vp, std::span<const std::byte> payload, bool back = false);
    void relay_hello(wire::Link link, const Frame& f);
    void guard_hello(wire::Link link, const Frame& f);
    void on_relay_frame(std::size_t i);
    void send_directory();
    void reroute(int vp);
    void end_relays();
    int relay_index(const std::string& host) const;

    UniqueFd listen_;
    UniqueFd tcp_;
    std::optional<wire::TlsContext> tls_;
    std::function<void(int, pid_t)> killer_;
    std::string job_;
    int nprocs_;
    std::vector<Vp> vps_;
    BarrierHook* hook_ = nullptr;
    Mover* mover_ = nullptr;
    Checkpointer* checkpointer_ = nullptr;
    struct Watch {
        int fd;
        std::function<void()> cb;
    };
    std::vector<Watch> watches_;
    std::uint64_t superstep_ = 0;
    std::int64_t tagsize_ = 0;
    std::vector<RelaySlot> relays_;
    bool broadcast_ = true;
    std::function<std::string(int)> host_of_;
    std::vector<int> route_;              // vp -> relay index, as the relays were told
    std::vector<std::uint32_t> epoch_;    // vp -> its moves between hosts so far
    std::vector<std::uint32_t> expected_; // vp -> DATA frames of this barrier
    bool gets_relayed_ = false;           // this barrier's get replies go as DATA frames
    RelayTotals relay_totals_;
    bool done_ = false;
    Outcome outcome_;
    wire::Link guard_;
    bool guard_released_ = false;
    std::optional<GuardFence> fence_; // watches guard_ (ends before it)
};

} // namespace ghost::bsp
