// SPDX-License-Identifier: GPL-2.0
// Small clusters for the ghost policy's tests, worked by hand: hosts of
// given speeds, processes of given work whose times are the model's
// (instructions over their host's speed, shared when they outnumber its
// processors), the policy with a payback of 1 unless told otherwise, and a
// figure of a Decision by name.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include <ghost/balance/policy.hpp>

#include "ghost/ghost.hpp"

namespace ghost_test {

using namespace ghost::balance;

inline Host host(SetId set, double cpu, unsigned processors = 1) {
    Host h;
    h.set = set;
    h.cpu_power = cpu;
    h.processors = processors;
    return h;
}

// Two Sets, 100 MB/s everywhere (T = 1e-8 s per byte), Mig = 0.5 s. Every
// process computes `instructions` and receives nothing; its times are those
// of the model (instructions over its host's speed).
struct Cluster {
    Observation obs;
    std::vector<double> work;

    Cluster(std::vector<Host> hosts, std::vector<HostId> where, std::vector<double> instructions,
            std::uint64_t memory = 10'000'000) {
        obs.sets = 2;
        obs.hosts = std::move(hosts);
        obs.net.byte_time = {1e-8, 1e-8, 1e-8, 1e-8};
        obs.net.migration_cost = 0.5;
        work = std::move(instructions);
        for (std::size_t i = 0; i < where.size(); ++i) {
            Process p;
            p.host = where[i];
            p.memory_bytes = memory;
            p.bytes_from_set = {0, 0};
            p.recv_time_from_set = {0, 0};
            obs.procs.push_back(p);
        }
    }

    // The next superstep as the model predicts it; returns its length.
    double step() {
        std::vector<unsigned> on(obs.hosts.size(), 0);
        for (const auto& p : obs.procs)
            ++on[p.host];
        double longest = 0.0;
        for (std::size_t i = 0; i < obs.procs.size(); ++i) {
            auto& p = obs.procs[i];
            const Host& h = obs.hosts[p.host];
            const double share = std::min(1.0, double(h.processors) / double(on[p.host]));
            p.instructions = work[i];
            p.comp_time = p.step_time = work[i] / (h.cpu_power * share);
            longest = std::max(longest, p.step_time);
        }
        ++obs.superstep;
        obs.now += longest;
        return longest;
    }

    void apply(const Decision& d) {
        for (const Move& m : d.moves)
            obs.procs[m.proc].host = m.to;
    }
};

// The clusters below were worked by hand with the saving counted over every
// superstep done so far (payback 1); the default, a third of them, has its
// own test (DefaultPaybackIsAThirdOfTheSuperstepsDone).
inline std::unique_ptr<Policy> make_ghost(bool migrate = true, double payback = 1.0) {
    Params p;
    p.migrate = migrate;
    ghost::balance::ghost_policy::Tuning t;
    t.payback = payback;
    auto r = ghost::balance::ghost_policy::make(p, t);
    EXPECT_TRUE(r.has_value());
    return std::move(*r);
}

inline double figure(const Decision& d, std::string_view name) {
    for (const auto& f : d.figures)
        if (f.name == name)
            return f.value;
    ADD_FAILURE() << "no figure " << name;
    return -1.0;
}

} // namespace ghost_test
