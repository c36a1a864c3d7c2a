// SPDX-License-Identifier: GPL-2.0
// What /proc says of a process, for tests: its state letter and its children.
#pragma once

#include <sys/types.h>

#include <fstream>
#include <string>

namespace testing_util {

// The state letter of /proc/PID/stat (R, S, T, Z...), '?' if unreadable.
inline char state_of(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string s;
    std::getline(f, s);
    const auto paren = s.rfind(')');
    return paren == std::string::npos || paren + 2 >= s.size() ? '?' : s[paren + 2];
}

// Its children's pids as /proc/PID/task/PID/children lists them ("" if none).
inline std::string children_of(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
    std::string s;
    std::getline(f, s);
    return s;
}

} // namespace testing_util
