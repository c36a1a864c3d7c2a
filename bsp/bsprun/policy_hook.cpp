// SPDX-License-Identifier: GPL-2.0
// PolicyHook: placement, the policy's moves, --migrate-every.
#include "policy_hook.hpp"

#include <time.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "migrate.hpp"

namespace ghost::bsp {

namespace {

double clock_seconds(clockid_t id) {
    timespec ts{};
    ::clock_gettime(id, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

} // namespace

std::string cost_summary(std::string_view policy, const PolicyCost& cost, double job_seconds) {
    const double share = job_seconds > 0 ? 100.0 * cost.wall / job_seconds : 0.0;
    return fmt::format("bsprun: policy {}: {} decisions took {:.6f} s (CPU {:.6f} s), {:.4f}% of "
                       "the job's {:.3f} s",
                       policy, cost.decisions, cost.wall, cost.cpu, share, job_seconds);
}

PolicyHook::PolicyHook(Placer& placer, std::vector<std::string> hosts,
                       std::unique_ptr<balance::Policy> policy, unsigned every, int nprocs,
                       bool verbose, ObserveOptions opt)
    : placer_(placer), hosts_(std::move(hosts)), policy_(std::move(policy)), every_(every),
      nprocs_(nprocs), verbose_(verbose), observer_(hosts_, opt) {}

std::vector<int> PolicyHook::barrier(std::uint64_t superstep, std::span<const VpStats> stats) {
    // The CPU clock is a system call (the monotonic one is not): read it
    // outside the wall-time interval.
    const double cpu0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    const double wall0 = clock_seconds(CLOCK_MONOTONIC);
    const auto n = hosts_.size();
    std::vector<int> out;
    std::vector<std::string> dest(static_cast<std::size_t>(nprocs_));
    std::vector<std::size_t> where(static_cast<std::size_t>(nprocs_));
    for (int v = 0; v < nprocs_; ++v) {
        dest[static_cast<std::size_t>(v)] = placer_.host_of(v);
        where[static_cast<std::size_t>(v)] = observer_.index(dest[static_cast<std::size_t>(v)]);
    }
    const auto plan = [&](int v, const std::string& to, std::string why) {
        dest[static_cast<std::size_t>(v)] = to;
        placer_.plan(v, to, std::move(why));
        if (std::find(out.begin(), out.end(), v) == out.end())
            out.push_back(v);
    };
    // The barrier's duration is the slowest VP's computation: the clock the
    // policies see advances by it (no wall clock: policies are pure).
    double step = 0;
    for (const auto& s : stats)
        step = std::max(step, s.comp_wall);
    now_ += step;
    last_ = observer_.observe(superstep, now_, stats, where);
    if (superstep == 0) {
        for (int v = 0; v < nprocs_; ++v) {
            const std::string& h = hosts_[static_cast<std::size_t>(v) % n];
            if (h != dest[static_cast<std::size_t>(v)])
                plan(v, h, "placement: --hosts");
        }
    } else if (policy_) {
        const balance::Decision d = policy_->at_barrier(last_);
        for (const auto& m : d.moves) {
            const int v = static_cast<int>(m.proc);
            if (v < 0 || v >= nprocs_ || m.to >= n ||
                hosts_[m.to] == dest[static_cast<std::size_t>(v)])
                continue;
            // Some policies already name themselves ("pub-simple: host 0 ...").
            const std::string head = fmt::format("{}: ", policy_->name());
            std::string why = m.why.starts_with(head) ? m.why : head + m.why;
            if (dry_run_) {
                std::fprintf(stderr,
                             "bsprun: end of superstep %llu: vp %d would move from %s to %s (%s; "
                             "--dry-run)\n",
                             static_cast<unsigned long long>(superstep), v,
                             dest[static_cast<std::size_t>(v)].c_str(), hosts_[m.to].c_str(),
                             why.c_str());
                continue;
            }
            plan(v, hosts_[m.to], std::move(why));
            if (verbose_) {
                std::string figs;
                for (const auto& f : m.figures)
                    figs += fmt::format("{}{} = {:.6g}", figs.empty() ? "" : ", ", f.name, f.value);
                std::fprintf(stderr, "bsprun: superstep %llu: vp %d to %s: %s\n",
                             static_cast<unsigned long long>(superstep), v, hosts_[m.to].c_str(),
                             figs.c_str());
            }
        }
        ++cost_.decisions;
        cost_.wall += clock_seconds(CLOCK_MONOTONIC) - wall0;
        cost_.cpu += clock_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    }
    if (const auto forced = forced_vp(superstep, every_, nprocs_)) {
        const int v = *forced;
        const std::string& cur = dest[static_cast<std::size_t>(v)];
        const auto it = std::find(hosts_.begin(), hosts_.end(), cur);
        const std::string next =
            it == hosts_.end() ? hosts_[0]
                               : hosts_[static_cast<std::size_t>(it - hosts_.begin() + 1) % n];
        if (next != placer_.host_of(v))
            plan(v, next, fmt::format("forced: --migrate-every {}", every_));
    }
    return out;
}

} // namespace ghost::bsp
