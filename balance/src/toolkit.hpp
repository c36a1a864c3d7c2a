// SPDX-License-Identifier: LGPL-2.1-or-later
// What PUB's, Hector's and the Charm++ baselines' policies share: a seeded
// random generator whose draws do not depend on the standard library's
// distributions, PUB's round load ("load average + 1 per expected task"),
// the choice of the process that leaves a host, and the bookkeeping of a
// Decision (moves or withheld moves, costs). Internal to balance/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ghost/balance/decision.hpp>
#include <ghost/balance/observation.hpp>
#include <ghost/balance/policy.hpp>

namespace ghost::balance::kit {

// splitmix64: small, fast, and the same sequence on every platform (the
// std:: distributions are not), so a seed names one run everywhere.
class Rng {
  public:
    explicit Rng(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next();
    // Uniform in [0, n), n > 0, without modulo bias.
    std::uint64_t below(std::uint64_t n);
    // Fisher-Yates with below(): a permutation drawn from this generator.
    template <class T> void shuffle(std::vector<T>& v) {
        for (std::size_t i = v.size(); i > 1; --i)
            std::swap(v[i - 1], v[below(i)]);
    }
    // `count` distinct members of `pool` other than `self` (all of them
    // when there are fewer), in the order drawn. `pool` is sorted and has no
    // duplicates. Small draws from large pools are rejection-sampled (no
    // copy of the pool, so n nodes drawing c peers each cost O(n c), not
    // O(n^2)); large ones use a partial Fisher-Yates on a copy.
    std::vector<HostId> sample(const std::vector<HostId>& pool, HostId self, std::size_t count);

  private:
    std::uint64_t state_;
};

// The load PUB compares: the host's 1-minute load average plus one for each
// process already chosen to move there in this round, so that an idle host
// is not picked by every node at the same barrier.
class RoundLoads {
  public:
    explicit RoundLoads(const Observation& obs);
    double load(HostId h) const { return obs_.hosts[h].load_average + expected_[h]; }
    unsigned expected(HostId h) const { return expected_[h]; }
    void expect(HostId h) { ++expected_[h]; }

  private:
    const Observation& obs_;
    std::vector<unsigned> expected_;
};

// Which managed processes run on each host (ProcId order).
std::vector<std::vector<ProcId>> procs_by_host(const Observation& obs);

// PUB's choice of the process that leaves `host` (the first to reach the
// barrier): the smallest step_time among those not already `taken` this
// round; ties go to the lowest ProcId. Returns false when none is left.
bool first_at_barrier(const Observation& obs, const std::vector<ProcId>& on_host,
                      const std::vector<bool>& taken, ProcId& out);

// The speed a host offers its managed processes: (1 - external_load) *
// cpu_power, never below zero.
double effective_speed(const Host& h);

// cpu_power relative to the fastest host of the observation (fastest = 1).
std::vector<double> relative_power(const Observation& obs);

// Records a chosen move: in moves, or in withheld when params.migrate is
// false (the decision is computed as usual either way).
void record(Decision& d, const Params& params, Move m);

// Sizes the cost model uses: one load report (a load and a power, two
// doubles, plus the host id), one request or order (ids), and the
// instructions to compare one entry of a load table.
inline constexpr std::uint64_t report_bytes = 24;
inline constexpr std::uint64_t request_bytes = 8;
inline constexpr std::uint64_t order_bytes = 16;
inline constexpr double instructions_per_entry = 20.0;

} // namespace ghost::balance::kit
