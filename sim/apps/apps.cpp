// SPDX-License-Identifier: GPL-2.0
// make_app(): the application generator named on the command line.
#include "../app.hpp"

#include <cerrno>

namespace ghost::sim {

const std::vector<std::string>& app_names() {
    static const std::vector<std::string> names = {"lu", "lbm", "sw", "sat3", "alltoall", "replay"};
    return names;
}

Result<std::unique_ptr<App>> make_app(const AppParams& p) {
    if (p.name == "replay")
        return make_replay(p.replay, p.procs);
    if (p.procs == 0)
        return Error::from_errno(EINVAL, "an application needs at least one process.");
    if (p.size == 0)
        return Error::from_errno(EINVAL, "the application size must be at least 1.");
    if (p.name == "lu")
        return make_lu(p.size, p.procs);
    if (p.name == "lbm")
        return make_lbm(p.size, p.procs);
    if (p.name == "sw")
        return make_sw(p.size, p.procs);
    if (p.name == "sat3")
        return make_sat3(p.size, p.procs, p.seed);
    if (p.name == "alltoall")
        return make_alltoall(p.size, p.procs);
    std::string known;
    for (const auto& n : app_names())
        known += (known.empty() ? "" : ", ") + n;
    return Error::from_errno(EINVAL,
                             "unknown application '" + p.name + "' (known: " + known + ").");
}

} // namespace ghost::sim
