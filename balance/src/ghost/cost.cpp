// SPDX-License-Identifier: LGPL-2.1-or-later
#include "cost.hpp"

#include <cmath>

namespace ghost::balance::ghost_policy::cost {

namespace {

double n_log_n(std::size_t n) {
    const auto x = static_cast<double>(n);
    return n > 1 ? x * std::log2(x) : 0.0;
}

} // namespace

Cost bookkeeping(std::size_t sets) {
    Cost c;
    c.instructions = update * (1.0 + static_cast<double>(sets));
    return c;
}

Cost call(const CallShape& s) {
    Cost c;
    // Demands on the barrier messages, hosts' loads from the Set managers,
    // orders on the releases.
    c.messages = s.sets;
    c.bytes = s.reporting_procs * ((2 + s.sets) * number_bytes + id_bytes) +
              s.reporting_hosts * (number_bytes + id_bytes) + s.moves * 2 * id_bytes;
    c.rounds = 0;
    // The decider: every process's prediction, the queues of processes and
    // of free hosts, then each greedy step (a queue update and the examined
    // destinations).
    c.instructions = prediction * static_cast<double>(s.procs) +
                     update * (n_log_n(s.procs) + n_log_n(s.hosts)) +
                     prediction * static_cast<double>(s.examined) +
                     update * static_cast<double>(s.steps) * std::log2(2.0 + double(s.procs));
    return c;
}

double seconds(const Cost& c, double decider_speed, double byte_time) {
    double t = assumed_latency + static_cast<double>(c.bytes) * byte_time;
    if (decider_speed > 0.0)
        t += c.instructions / decider_speed;
    return t;
}

} // namespace ghost::balance::ghost_policy::cost
