// SPDX-License-Identifier: GPL-2.0
// Parsing and evaluating external load schedules.
#include "load.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>

namespace ghost::sim {

namespace {

Result<double> number(std::string_view text, std::string_view what) {
    double v = 0.0;
    const auto* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || ptr != end || text.empty())
        return Error::from_errno(EINVAL, std::string(what) + " '" + std::string(text) +
                                             "' is not a number.");
    return v;
}

} // namespace

Result<void> LoadSchedule::add(std::string_view spec, const PlatformSpec& platform) {
    const auto eq = spec.find('=');
    if (eq == std::string_view::npos)
        return Error::from_errno(EINVAL, "the load '" + std::string(spec) +
                                             "' has no '=': write TARGET=F[@T][,F@T...].");
    const std::string_view target = spec.substr(0, eq);
    std::vector<std::size_t> hosts;
    std::size_t first = 0;
    for (const auto& set : platform.sets) {
        if (target == set.name || target == "all")
            for (unsigned h = 0; h < set.nodes; ++h)
                hosts.push_back(first + h);
        first += set.nodes;
    }
    if (hosts.empty()) {
        auto host = number(target, "the load target");
        if (!host || *host < 0 || *host >= double(changes_.size()) || *host != int(*host))
            return Error::from_errno(EINVAL, "the load target '" + std::string(target) +
                                                 "' is neither a Set name, 'all' nor a host "
                                                 "number below " +
                                                 std::to_string(changes_.size()) + ".");
        hosts.push_back(std::size_t(*host));
    }
    std::vector<LoadChange> changes;
    std::string_view rest = spec.substr(eq + 1);
    while (!rest.empty()) {
        const auto comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        const auto at = item.find('@');
        auto f = number(item.substr(0, at), "the load fraction");
        if (!f)
            return f.error();
        if (*f < 0.0 || *f >= 1.0)
            return Error::from_errno(EINVAL, "the load fraction " + std::to_string(*f) +
                                                 " is outside [0, 1).");
        double t = 0.0;
        std::uint64_t step = 0;
        if (at != std::string_view::npos && item.substr(at + 1).starts_with('s')) {
            auto n = number(item.substr(at + 2), "the load superstep");
            if (!n)
                return n.error();
            if (*n < 1 || *n != double(std::uint64_t(*n)))
                return Error::from_errno(EINVAL, "the load superstep '" +
                                                     std::string(item.substr(at + 2)) +
                                                     "' is not a superstep number (from 1).");
            step = std::uint64_t(*n);
        } else if (at != std::string_view::npos) {
            auto tt = number(item.substr(at + 1), "the load time");
            if (!tt)
                return tt.error();
            t = *tt;
        }
        changes.push_back({t, *f, step});
    }
    if (changes.empty())
        return Error::from_errno(EINVAL, "the load '" + std::string(spec) + "' gives no fraction.");
    const bool steps = changes.front().superstep > 0;
    for (const auto& c : changes)
        if ((c.superstep > 0) != steps)
            return Error::from_errno(EINVAL, "the load '" + std::string(spec) +
                                                 "' mixes seconds and supersteps (@sN): give "
                                                 "each item in the same unit.");
    for (auto h : hosts)
        set(h, changes);
    return {};
}

void LoadSchedule::set(std::size_t host, std::vector<LoadChange> changes) {
    std::stable_sort(changes.begin(), changes.end(), [](const LoadChange& a, const LoadChange& b) {
        return a.superstep != b.superstep ? a.superstep < b.superstep : a.time < b.time;
    });
    changes_[host] = std::move(changes);
}

double LoadSchedule::at(std::size_t host, double time) const {
    double f = 0.0;
    for (const auto& c : changes_[host])
        if (c.superstep == 0 && c.time <= time)
            f = c.fraction;
    return f;
}

double LoadSchedule::at_step(std::size_t host, std::uint64_t s) const {
    double f = 0.0;
    for (const auto& c : changes_[host])
        if (c.superstep > 0 && c.superstep <= s)
            f = c.fraction;
    return f;
}

bool LoadSchedule::by_superstep(std::size_t host) const {
    return std::any_of(changes_[host].begin(), changes_[host].end(),
                       [](const LoadChange& c) { return c.superstep > 0; });
}

} // namespace ghost::sim
