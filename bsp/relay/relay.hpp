// SPDX-License-Identifier: GPL-2.0
// A BSP job's relay on one host (PUB's per-host process with its link
// table; Documentation/bsp.md, "Routing through relays"). It owns the job's
// abstract socket there, so the host's VPs connect to it with no change;
// it passes each VP's control frames to the hub on an upstream of its own,
// and carries the VP's puts and messages straight to the relay of the
// target's host as DATA frames, which the target's relay splices into the
// target's DELIVER. A link-table entry that is out of date forwards; data
// for a VP that is not here yet waits.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "data.hpp"
#include "link.hpp"

namespace ghost::bsp::relay {

struct Config {
    std::string job;         // the job id: the abstract socket's name
    std::string host;        // this host's migd name, as the hub knows it
    std::string hub_address; // the hub's TLS listener, "addr:port"
    std::string address;     // where to listen for other relays ("" : the default)
    wire::Key key{};
};

class Relay {
  public:
    // Listens (abstract socket, TCP), connects to the hub and says
    // RELAY_HELLO. The error names what failed.
    static Result<std::unique_ptr<Relay>> start(Config c);
    explicit Relay(Config c) : c_(std::move(c)) {} // then start()'s work
    // Serves until the hub says END (0) or the hub is lost (1).
    int run();

  private:
    struct Peer { // what goes to another host's relay (its writer thread's)
        std::string address;
        std::deque<DataFrame> queue;
        std::condition_variable cv; // its writer waits here, alone
    };

    // Control: frames from the hub.
    void on_directory(const wire::Frame& f);
    void on_route(const wire::Frame& f);
    // A local VP's DATA frames (from its SYNC or its GETDATA): counted, routed.
    void originate(std::vector<DataFrame> frames);
    // A DATA frame from a local VP's SYNC (from_peer false) or another
    // relay: kept here for its target, or sent on by the link table.
    void route(DataFrame f, bool from_peer);
    // With mu_ held: keep f, let it wait, or forward it (route()'s work).
    // again: it waited here already (and was counted held).
    void place(DataFrame f, bool from_peer, bool again = false);
    // With mu_ held: hand f to the relay of host h.
    void send_to(int h, DataFrame f);
    // The DATA frames of (target, superstep), once n have arrived.
    std::vector<DataFrame> take(std::uint32_t target, std::uint64_t superstep, std::uint32_t n);

    void session(UniqueFd vp);     // a local VP, on a thread of its own
    void peer_reader(UniqueFd fd); // another relay's DATA frames
    void peer_writer(int h);       // sends what send_to() queued for host h
    [[noreturn]] void fatal(const std::string& why);

    Config c_;
    UniqueFd local_, tcp_;
    std::unique_ptr<wire::TlsContext> client_, server_;
    wire::Link hub_;
    std::string my_address_;

    // One lock, and one condition per kind of waiter, so that a frame
    // wakes only who can use it: on hosts where a wake-up costs tens of
    // microseconds, waking every writer and session for every frame cost
    // more than routing it.
    std::mutex mu_;
    std::condition_variable ready_cv_; // the DIRECTORY has come (ready_)
    std::condition_variable store_cv_; // store_ grew, or a session ended
    bool ready_ = false;
    int me_ = -1;
    std::vector<std::string> hosts_, addresses_;
    struct Entry {
        int host = -1;
        std::uint32_t epoch = 0; // the VP's moves the hub had told of
    };
    std::vector<Entry> table_; // vp -> host: the link table
    // Frames stamped with a newer epoch than our entry: until its ROUTE.
    std::map<std::uint32_t, std::vector<DataFrame>> waiting_;
    // VPs connected to this relay now, once per session: a VP that says
    // HELLO again (after a checkpoint) may do so before its old session
    // has seen its socket close.
    std::multiset<std::uint32_t> here_;
    std::map<std::pair<std::uint32_t, std::uint64_t>, std::vector<DataFrame>> store_;
    std::vector<std::unique_ptr<Peer>> peers_;
    Counters n_;
    int sessions_ = 0;
};

} // namespace ghost::bsp::relay
