// SPDX-License-Identifier: GPL-2.0
// bsprun --policy: at every barrier, build the Observation (observe.hpp),
// call the balance/ policy, and plan each of its moves to the host it chose;
// also the placement at the first barrier and --migrate-every's forced
// moves (Documentation/bsp.md, "Balancing").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <ghost/balance/policy.hpp>

#include "hub.hpp"
#include "observe.hpp"

namespace ghost::bsp {

// Where VPs are and where their next move goes (HostsMover; a fake in tests).
class Placer {
  public:
    virtual ~Placer() = default;
    virtual const std::string& host_of(int vp) const = 0;
    // The destination host and the reason of the VP's next move.
    virtual void plan(int vp, std::string to, std::string why) = 0;
};

// What the policy itself cost bsprun: the time PolicyHook spent building
// observations and deciding (the policy's at_barrier and planning its moves)
// at the barriers where it called the policy. Every VP waits at the barrier
// meanwhile, so wall / the job's wall time is the policy's share of the job.
struct PolicyCost {
    std::uint64_t decisions = 0; // barriers at which the policy was called
    double wall = 0;             // seconds, CLOCK_MONOTONIC, at every decision
    std::uint64_t sampled = 0;   // decisions whose CPU time was read (samples_cpu)
    double sampled_wall = 0;     // their wall seconds
    double sampled_cpu = 0;      // their seconds of bsprun's CPU (CLOCK_THREAD_CPUTIME_ID)

    // The CPU time of all decisions, estimated as the wall time of all
    // times the sampled decisions' CPU per wall second (a ratio estimate:
    // the first, slower decisions weigh in both, so they do not inflate it).
    double cpu() const { return sampled_wall > 0 ? wall * sampled_cpu / sampled_wall : 0.0; }
};

// Whether the decision numbered `index` (from 0) has its CPU time read:
// the first 16, then one in 16.
constexpr bool samples_cpu(std::uint64_t index) {
    return index < 16 || index % 16 == 0;
}

// bsprun's summary line for --policy NAME:
//   "bsprun: policy NAME: N decisions took W s (CPU C s), X% of the job's J s"
std::string cost_summary(std::string_view policy, const PolicyCost& cost, double job_seconds);

class PolicyHook final : public BarrierHook {
  public:
    // hosts: the --hosts list (VP i is placed on hosts[i % n] at the first
    // barrier); policy: null for none; every: --migrate-every (0: never);
    // verbose: print each move's figures on standard error.
    PolicyHook(Placer& placer, std::vector<std::string> hosts,
               std::unique_ptr<balance::Policy> policy, unsigned every, int nprocs,
               bool verbose = false, ObserveOptions opt = {});
    std::vector<int> barrier(std::uint64_t superstep, std::span<const VpStats> stats) override;

    // --dry-run (MigBSP's scenario ii): the policy decides at every barrier
    // and its moves are printed as "would move", but none is carried out.
    void set_dry_run(bool on) { dry_run_ = on; }

    // What observing and deciding cost so far.
    const PolicyCost& cost() const { return cost_; }

    // The last observation given to the policy (for tests; none is built
    // without a policy).
    const balance::Observation& last() const { return last_; }

  private:
    static double cpu_clock_read_cost();
    void locate();
    // Whether VP v is on host h (by name: --hosts may list a host twice).
    bool on(int v, std::size_t h) const;
    // The name of VP v's host as planned so far in this barrier.
    const std::string& name_of(int v) const;

    Placer& placer_;
    std::vector<std::string> hosts_;
    std::unique_ptr<balance::Policy> policy_;
    unsigned every_;
    int nprocs_;
    bool verbose_;
    bool dry_run_ = false;
    Observer observer_;
    std::vector<std::size_t> at_; // each VP's host index (hosts_.size(): not listed)
    balance::Observation last_;
    double now_ = 0;
    PolicyCost cost_;
    // Seconds of CPU one thread-CPU-clock read adds (cpu_clock_read_cost);
    // measured only when there is a policy to time.
    double cpu_read_;
};

} // namespace ghost::bsp
