// SPDX-License-Identifier: GPL-2.0
// A BSP application as the MigBSP and PUB papers model it: for every
// superstep and process, the instructions it computes, the messages it sends
// (destination and bytes) and how many it receives; and the memory image of
// each process (what a migration carries). Generators are deterministic and
// lazy: nothing of size processes x supersteps is ever held.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <ghost/result.hpp>

namespace ghost::sim {

using Proc = std::uint32_t;

struct Message {
    Proc from = 0;
    Proc to = 0;
    std::uint64_t bytes = 0;
};

// What process i does in one superstep: compute, then send, then receive
// recv_count messages, then the barrier.
struct Step {
    double instructions = 0.0;
    std::vector<Message> sends;
    std::uint32_t recv_count = 0;
};

class App {
  public:
    virtual ~App() = default;
    App() = default;
    App(const App&) = delete;
    App& operator=(const App&) = delete;

    virtual std::string_view name() const = 0;
    virtual Proc procs() const = 0;
    virtual std::uint64_t supersteps() const = 0;
    // Superstep s counts from 1, as in the papers.
    virtual Step step(std::uint64_t s, Proc i) const = 0;
    virtual std::uint64_t memory_bytes(Proc i) const = 0;
};

struct AppParams {
    std::string name;       // lu, lbm, sw, sat3, alltoall
    std::uint64_t size = 0; // lu, sw: matrix order; lbm, sat3, alltoall: supersteps
    Proc procs = 0;
    std::uint64_t seed = 1;  // sat3's irregular work
    std::string replay = {}; // replay: the file bsprun --record wrote
};

Result<std::unique_ptr<App>> make_app(const AppParams& p);

// The names make_app() accepts.
const std::vector<std::string>& app_names();

// The application generators, one per file in sim/apps/.
std::unique_ptr<App> make_lbm(std::uint64_t supersteps, Proc procs);
std::unique_ptr<App> make_sw(std::uint64_t order, Proc procs);
Result<std::unique_ptr<App>> make_lu(std::uint64_t order, Proc procs);
std::unique_ptr<App> make_sat3(std::uint64_t supersteps, Proc procs, std::uint64_t seed);
std::unique_ptr<App> make_alltoall(std::uint64_t supersteps, Proc procs);
// A real job as bsprun --record saw it (replay.cpp); procs 0: the file's.
Result<std::unique_ptr<App>> make_replay(const std::string& path, Proc procs);
// A recorded CPU second counts as this many instructions: bsprun's
// nominal power (bsp/bsprun/observe.hpp), so that a policy sees the same
// figures in the simulation as in the job.
inline constexpr double kReplayPower = 1e9;

} // namespace ghost::sim
