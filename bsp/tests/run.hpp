// SPDX-License-Identifier: GPL-2.0
// Runs a command with its stdout and stderr captured, for the bsp tests.
#pragma once

#include <string>
#include <vector>

namespace bsptest {

struct Run {
    int code = -1; // exit status, or 128 + signal
    std::string out, err;
};

// env: extra NAME=VALUE entries.
Run run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});

} // namespace bsptest
