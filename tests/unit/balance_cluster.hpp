// SPDX-License-Identifier: GPL-2.0
// Small hand-made clusters for the balance/ policy tests: hosts with given
// load averages, powers and external loads, and managed processes placed on
// them, plus helpers that read a Decision back.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include <ghost/balance/policy.hpp>

namespace balance_test {

using namespace ghost::balance;

// Hosts with load averages `loads` (power 1, no external load, one Set) and
// procs[h] managed processes on host h, numbered host by host; each
// process's step_time is 1 + its rank on the host / 10 (the first process
// of a host reaches the barrier first) and it executed 1 instruction.
inline Observation cluster(const std::vector<double>& loads, const std::vector<unsigned>& procs) {
    Observation obs;
    obs.superstep = 1;
    for (std::size_t h = 0; h < loads.size(); ++h) {
        Host host;
        host.load_average = loads[h];
        host.managed = h < procs.size() ? procs[h] : 0;
        obs.hosts.push_back(host);
        for (unsigned i = 0; i < host.managed; ++i) {
            Process p;
            p.host = static_cast<HostId>(h);
            p.step_time = 1.0 + i / 10.0;
            p.instructions = 1.0;
            obs.procs.push_back(p);
        }
    }
    return obs;
}

inline std::unique_ptr<Policy> policy(std::string_view name, const Params& params = {}) {
    auto made = make_policy(name, params);
    EXPECT_TRUE(made.has_value()) << name;
    return std::move(made.value());
}

// (proc, from, to) of every move, in order: what a seed's run chose.
inline std::vector<std::tuple<ProcId, HostId, HostId>> moves_of(const std::vector<Move>& moves) {
    std::vector<std::tuple<ProcId, HostId, HostId>> out;
    for (const auto& m : moves)
        out.emplace_back(m.proc, m.from, m.to);
    return out;
}

// The value of the figure called `name`; a test failure when it is missing.
inline double figure(const std::vector<Figure>& figs, std::string_view name) {
    for (const auto& f : figs)
        if (f.name == name)
            return f.value;
    ADD_FAILURE() << "no figure named " << name;
    return -1.0;
}

} // namespace balance_test
