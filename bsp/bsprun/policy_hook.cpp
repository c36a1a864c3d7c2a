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
                       policy, cost.decisions, cost.wall, cost.cpu(), share, job_seconds);
}

PolicyHook::PolicyHook(Placer& placer, std::vector<std::string> hosts,
                       std::unique_ptr<balance::Policy> policy, unsigned every, int nprocs,
                       bool verbose, ObserveOptions opt)
    : placer_(placer), hosts_(std::move(hosts)), policy_(std::move(policy)), every_(every),
      nprocs_(nprocs), verbose_(verbose), observer_(hosts_, opt),
      cpu_read_(policy_ ? cpu_clock_read_cost() : 0.0) {}

// The CPU time one reading of the thread CPU clock adds to an interval it
// closes: the least difference of back-to-back reads. Each sampled
// decision's CPU time is corrected by it; uncorrected, the reads put the
// CPU time of a 2 us decision a third above its wall time.
double PolicyHook::cpu_clock_read_cost() {
    double least = 1.0;
    for (int i = 0; i < 8; ++i) {
        const double a = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
        least = std::min(least, clock_seconds(CLOCK_THREAD_CPUTIME_ID) - a);
    }
    return std::max(least, 0.0);
}

const std::string& PolicyHook::name_of(int v) const {
    const std::size_t a = at_[static_cast<std::size_t>(v)];
    return a < hosts_.size() ? hosts_[a] : placer_.host_of(v);
}

// Each VP's host as an index into hosts_ (hosts_.size(): a host not
// listed). A VP's entry is looked up again only when the placer's name for
// it no longer matches it: one short string comparison per VP and barrier.
void PolicyHook::locate() {
    const std::size_t n = hosts_.size();
    at_.resize(static_cast<std::size_t>(nprocs_), n);
    for (int v = 0; v < nprocs_; ++v) {
        std::size_t& h = at_[static_cast<std::size_t>(v)];
        const std::string& name = placer_.host_of(v);
        if (h < n && hosts_[h] == name)
            continue;
        h = observer_.index(name);
    }
}

bool PolicyHook::on(int v, std::size_t h) const {
    const std::size_t a = at_[static_cast<std::size_t>(v)];
    return a == h || (a < hosts_.size() && hosts_[a] == hosts_[h]);
}

std::vector<int> PolicyHook::barrier(std::uint64_t superstep, std::span<const VpStats> stats) {
    // The CPU clock is a system call of about half a microsecond here (the
    // monotonic one is read in user space): it is read outside the
    // wall-time interval, and only at sampled decisions, since reading it
    // at every one cost more than the decision itself.
    const bool deciding = policy_ && superstep > 0;
    const bool sample = deciding && samples_cpu(cost_.decisions);
    const double cpu0 = sample ? clock_seconds(CLOCK_THREAD_CPUTIME_ID) : 0;
    const double wall0 = deciding ? clock_seconds(CLOCK_MONOTONIC) : 0;
    const auto n = hosts_.size();
    std::vector<int> out;
    locate();
    const auto plan = [&](int v, std::size_t to, std::string why) {
        at_[static_cast<std::size_t>(v)] = to;
        placer_.plan(v, hosts_[to], std::move(why));
        if (std::find(out.begin(), out.end(), v) == out.end())
            out.push_back(v);
    };
    // The barrier's duration is the slowest VP's computation: the clock the
    // policies see advances by it (no wall clock: policies are pure).
    double step = 0;
    for (const auto& s : stats)
        step = std::max(step, s.comp_wall);
    now_ += step;
    // Without a policy nothing reads the observation: --policy none pays
    // none of it.
    if (policy_)
        observer_.observe(superstep, now_, stats, at_, last_);
    if (superstep == 0) {
        for (int v = 0; v < nprocs_; ++v) {
            const std::size_t h = static_cast<std::size_t>(v) % n;
            if (!on(v, h))
                plan(v, h, "placement: --hosts");
        }
    } else if (policy_) {
        const balance::Decision d = policy_->at_barrier(last_);
        for (const auto& m : d.moves) {
            const int v = static_cast<int>(m.proc);
            if (v < 0 || v >= nprocs_ || m.to >= n || on(v, m.to))
                continue;
            // Some policies already name themselves ("pub-simple: host 0 ...").
            const std::string head = fmt::format("{}: ", policy_->name());
            std::string why = m.why.starts_with(head) ? m.why : head + m.why;
            if (dry_run_) {
                std::fprintf(stderr,
                             "bsprun: end of superstep %llu: vp %d would move from %s to %s (%s; "
                             "--dry-run)\n",
                             static_cast<unsigned long long>(superstep), v, name_of(v).c_str(),
                             hosts_[m.to].c_str(), why.c_str());
                continue;
            }
            plan(v, m.to, std::move(why));
            if (verbose_) {
                std::string figs;
                for (const auto& f : m.figures)
                    figs += fmt::format("{}{} = {:.6g}", figs.empty() ? "" : ", ", f.name, f.value);
                std::fprintf(stderr, "bsprun: superstep %llu: vp %d to %s: %s\n",
                             static_cast<unsigned long long>(superstep), v, hosts_[m.to].c_str(),
                             figs.c_str());
            }
        }
    }
    if (deciding) {
        ++cost_.decisions;
        const double wall = clock_seconds(CLOCK_MONOTONIC) - wall0;
        cost_.wall += wall;
        if (sample) {
            ++cost_.sampled;
            cost_.sampled_wall += wall;
            cost_.sampled_cpu +=
                std::max(clock_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0 - cpu_read_, 0.0);
        }
    }
    if (const auto forced = forced_vp(superstep, every_, nprocs_)) {
        const int v = *forced;
        // The next listed host after the VP's (the first one when its host
        // is not listed).
        const std::size_t cur = at_[static_cast<std::size_t>(v)];
        const std::size_t next = cur < n ? (cur + 1) % n : 0;
        if (hosts_[next] != placer_.host_of(v))
            plan(v, next, fmt::format("forced: --migrate-every {}", every_));
    }
    return out;
}

} // namespace ghost::bsp
