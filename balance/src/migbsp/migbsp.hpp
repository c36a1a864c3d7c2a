// SPDX-License-Identifier: LGPL-2.1-or-later
// MigBSP (Righi et al. 2010, §3): the policy named "migbsp".
#pragma once

#include <memory>

#include <ghost/balance/policy.hpp>
#include <ghost/result.hpp>

namespace ghost::balance::migbsp {

// The policy, or an error naming the parameter out of range (alpha and
// omega at least 1, D in (0, 1), delta and beta at least 0, x in [0, 1]).
Result<std::unique_ptr<Policy>> make(const Params& params);

} // namespace ghost::balance::migbsp
