// SPDX-License-Identifier: GPL-2.0
// What /proc says of a process, for tests: its state letter, stat fields,
// start time and children.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
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

// Field n (from 3, the state) of /proc/PID/stat; empty if unreadable.
inline std::string stat_field(pid_t pid, int n) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string s;
    std::getline(f, s);
    const auto paren = s.rfind(')');
    if (paren == std::string::npos)
        return {};
    std::istringstream rest(s.substr(paren + 2)); // from field 3, the state
    std::string field;
    for (int i = 3; i <= n && rest >> field; ++i)
        if (i == n)
            return field;
    return {};
}

// Its start time, /proc/PID/stat field 22 (clock ticks after boot); 0 if
// unreadable.
inline std::uint64_t start_time_of(pid_t pid) {
    return std::strtoull(stat_field(pid, 22).c_str(), nullptr, 10);
}

// Its children's pids as /proc/PID/task/PID/children lists them ("" if none).
inline std::string children_of(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
    std::string s;
    std::getline(f, s);
    return s;
}

} // namespace testing_util
