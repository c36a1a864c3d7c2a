// SPDX-License-Identifier: LGPL-2.1-or-later
// The registry of policies: make_policy() and policy_names().
#include <ghost/balance/policy.hpp>

#include "pubhector.hpp"

#include <array>
#include <cerrno>
#include <string>
#include <utility>

#include "ghost/ghost.hpp"
#include "migbsp/migbsp.hpp"

namespace ghost::balance {

namespace {

// Never reschedules: scenario i of the MigBSP evaluation.
class NonePolicy final : public Policy {
  public:
    std::string_view name() const override { return "none"; }
    Decision at_barrier(const Observation&) override { return {}; }
};

constexpr std::array<std::string_view, 11> names = {
    "none", "migbsp",
    // ours (ghost/)
    "ghost",
    // PUB, Hector and the Charm++ baselines (pub.cpp, pub_prediction.cpp, hector.cpp, charm.cpp)
    "pub-global", "pub-simple", "pub-conservative", "pub-prediction", "hector-busy", "hector-idle",
    "greedy", "refine"};

using Factory = std::unique_ptr<Policy> (*)(const Params&);
constexpr std::array<std::pair<std::string_view, Factory>, 8> pub_hector = {{
    {"pub-global", make_pub_global},
    {"pub-simple", make_pub_simple},
    {"pub-conservative", make_pub_conservative},
    {"pub-prediction", make_pub_prediction},
    {"hector-busy", make_hector_busy},
    {"hector-idle", make_hector_idle},
    {"greedy", make_greedy},
    {"refine", make_refine},
}};

} // namespace

std::span<const std::string_view> policy_names() {
    return names;
}

Result<std::unique_ptr<Policy>> make_policy(std::string_view name, const Params& params) {
    if (name == "none")
        return std::unique_ptr<Policy>(std::make_unique<NonePolicy>());
    if (name == "migbsp")
        return migbsp::make(params);
    if (name == "ghost")
        return ghost_policy::make(params);
    for (const auto& [n, make] : pub_hector)
        if (name == n)
            return make(params);
    std::string known;
    for (auto n : names)
        known += (known.empty() ? "" : ", ") + std::string(n);
    return Error::from_errno(EINVAL, "unknown balancing policy '" + std::string(name) +
                                         "' (known: " + known + ")");
}

} // namespace ghost::balance
