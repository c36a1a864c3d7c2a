// SPDX-License-Identifier: LGPL-2.1-or-later
// Factories of PUB's four strategies (Bonorden 2007, §4), Hector's two
// allocation policies (Russ et al. 1998, §II.C, §III.C) and the Charm++
// GreedyLB/RefineLB baselines, for the registry in policy.cpp. Internal to
// balance/; Documentation/balance.md describes each rule.
#pragma once

#include <memory>

#include <ghost/balance/policy.hpp>

namespace ghost::balance {

std::unique_ptr<Policy> make_pub_global(const Params& params);
std::unique_ptr<Policy> make_pub_simple(const Params& params);
std::unique_ptr<Policy> make_pub_conservative(const Params& params);
std::unique_ptr<Policy> make_pub_prediction(const Params& params);
std::unique_ptr<Policy> make_hector_busy(const Params& params);
std::unique_ptr<Policy> make_hector_idle(const Params& params);
std::unique_ptr<Policy> make_greedy(const Params& params);
std::unique_ptr<Policy> make_refine(const Params& params);

} // namespace ghost::balance
