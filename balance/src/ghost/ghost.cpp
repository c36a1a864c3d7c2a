// SPDX-License-Identifier: LGPL-2.1-or-later
// The ghost policy: the schedule of its calls, the acceptance of a plan and
// what its decisions carry.
#include "ghost.hpp"

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../toolkit.hpp"
#include "cost.hpp"
#include "plan.hpp"
#include "report.hpp"
#include "visible.hpp"
#include "window.hpp"

namespace ghost::balance::ghost_policy {

namespace {

class Ghost final : public Policy {
  public:
    Ghost(const Params& p, const Tuning& t)
        : params_(p), tuning_(t), visible_(t.decay), reports_(t.resend) {}

    std::string_view name() const override { return "ghost"; }
    Decision at_barrier(const Observation& obs) override;

  private:
    void call(const Observation& obs, Decision& d);

    Params params_;
    Tuning tuning_;
    std::vector<Window> windows_;
    std::size_t sets_ = 0;
    std::uint64_t next_call_ = 0; // superstep of the next call
    unsigned interval_ = 1;       // supersteps between calls while nothing is to be fixed
    double spent_ = 0.0;          // estimated seconds of the calls so far
    std::uint64_t calls_ = 0;
    Visibility visible_;
    Reports reports_;
    double last_now_ = 0.0;         // time of the previous barrier
    std::uint64_t migrated_at_ = 0; // superstep of the last batch carried out (0: none)
};

Decision Ghost::at_barrier(const Observation& obs) {
    if (obs.sets != sets_ || windows_.size() > obs.procs.size()) {
        windows_.clear(); // a different job: start afresh
        sets_ = obs.sets;
        next_call_ = 0;
        interval_ = 1;
        spent_ = 0.0;
        calls_ = 0;
        visible_ = Visibility(tuning_.decay);
        reports_ = Reports(tuning_.resend);
        last_now_ = 0.0;
        migrated_at_ = 0;
    }
    windows_.resize(obs.procs.size(), Window(tuning_.window, obs.sets));
    double slowest = 0.0;
    for (std::size_t i = 0; i < obs.procs.size(); ++i) {
        windows_[i].observe(obs.procs[i]);
        slowest = std::max(slowest, obs.procs[i].step_time);
    }
    // A superstep that began with migrations is no sample of the barrier.
    if (migrated_at_ == 0 || obs.superstep != migrated_at_ + 1)
        visible_.observe(slowest, obs.now - last_now_);
    last_now_ = obs.now;

    Decision d;
    d.cost = cost::bookkeeping(obs.sets);
    const bool due = obs.superstep >= next_call_;
    const bool within_budget = calls_ == 0 || spent_ <= tuning_.budget * obs.now;
    if (due && within_budget)
        call(obs, d);
    d.figures.insert(d.figures.begin(), {{"interval", static_cast<double>(interval_)},
                                         {"next call", static_cast<double>(next_call_)},
                                         {"spent", spent_},
                                         {"budget", tuning_.budget * obs.now},
                                         {"postponed", due && !within_budget ? 1.0 : 0.0}});
    return d;
}

void Ghost::call(const Observation& obs, Decision& d) {
    d.rescheduled = true;
    ++calls_;
    std::vector<Demand> demand(obs.procs.size());
    for (std::size_t i = 0; i < demand.size(); ++i) {
        demand[i].instructions = windows_[i].instructions();
        demand[i].bytes_from_set.resize(obs.sets);
        for (SetId j = 0; j < obs.sets; ++j)
            demand[i].bytes_from_set[j] = windows_[i].bytes_from(j);
    }
    const Reports::Heard heard = reports_.refresh(obs, demand);
    // A BSP job runs one program on every process: one that has not computed
    // yet (a wavefront not yet at its columns) is expected to compute as much
    // as those that have. Planning it as idle would leave it on a slow host
    // and fill the fast ones with processes about to finish.
    double started_work = 0.0;
    std::size_t started = 0;
    for (std::size_t i = 0; i < demand.size(); ++i)
        if (windows_[i].started()) {
            started_work += demand[i].instructions;
            ++started;
        }
    const double expected = started > 0 ? started_work / static_cast<double>(started) : 0.0;
    std::size_t imputed = 0;
    for (std::size_t i = 0; i < demand.size(); ++i)
        if (!windows_[i].started()) {
            demand[i].instructions = expected;
            imputed += expected > 0.0;
        }
    const Plan p = plan(obs, demand, tuning_.margin);
    // The supersteps the batch must pay back within: a share of those done so
    // far (the job's length is unknown; see Tuning::payback).
    const double horizon = std::min(tuning_.payback * static_cast<double>(obs.superstep),
                                    static_cast<double>(tuning_.horizon_cap));
    const double visible = visible_.slope();
    const double gain = (p.step_before - p.step_after) * visible;
    const double saving = gain * horizon;
    const bool accept = !p.moves.empty() && p.step_after < p.step_before * (1.0 - tuning_.margin) &&
                        saving > p.batch_seconds;

    cost::CallShape shape{obs.procs.size(), obs.hosts.size(), obs.sets,
                          p.examined,       p.tentative + 1,  accept ? p.moves.size() : 0,
                          heard.procs,      heard.hosts};
    const Cost c = cost::call(shape);
    d.cost.instructions += c.instructions;
    d.cost.messages += c.messages;
    d.cost.bytes += c.bytes;
    d.cost.rounds += c.rounds;
    double byte_time = 0.0;
    for (double t : obs.net.byte_time)
        byte_time = std::max(byte_time, t);
    const double decider = obs.procs.empty() || obs.hosts.empty()
                               ? 0.0
                               : kit::effective_speed(obs.hosts[obs.procs[0].host]);
    spent_ += cost::seconds(c, decider, byte_time);

    if (accept) {
        for (const PlannedMove& pm : p.moves) {
            Move m;
            m.proc = pm.proc;
            m.from = pm.from;
            m.to = pm.to;
            const std::string what =
                pm.makes_room_for
                    ? fmt::format("Process {} has stopped computing (no instruction and no byte "
                                  "over its window) and leaves host {} to process {}, taking its "
                                  "place on host {}",
                                  pm.proc, pm.from, *pm.makes_room_for, pm.to)
                    : fmt::format("Process {} would take {:.4g} s on host {} and {:.4g} s on "
                                  "host {}",
                                  pm.proc, pm.before, pm.from, pm.after, pm.to);
            m.why = what + fmt::format("; the moves cut the superstep from {:.4g} s to {:.4g} s "
                                       "({:.2g} of it visible), saving {:.4g} s over {:.4g} "
                                       "supersteps, more than the batch's {:.4g} s.",
                                       p.step_before, p.step_after, visible, saving, horizon,
                                       p.batch_seconds);
            m.figures = {{"swap", pm.makes_room_for ? 1.0 : 0.0},
                         {"before", pm.before},
                         {"after", pm.after},
                         {"Mem transfer", pm.mem_time},
                         {"step before", p.step_before},
                         {"step after", p.step_after}};
            kit::record(d, params_, std::move(m));
        }
        if (params_.migrate)
            migrated_at_ = obs.superstep;
        // Let the windows see the new placement before judging it.
        interval_ = 1;
        next_call_ = obs.superstep + tuning_.window;
    } else if (p.tentative == 0) {
        interval_ = std::min(interval_ * 2, std::max(1u, tuning_.max_interval));
        next_call_ = obs.superstep + interval_;
    } else {
        interval_ = 1;
        next_call_ = obs.superstep + 1;
    }
    d.figures.push_back({"step", p.step_before});
    d.figures.push_back({"step after", p.step_after});
    d.figures.push_back({"critical", static_cast<double>(p.critical)});
    d.figures.push_back({"visible", visible});
    d.figures.push_back({"horizon", horizon});
    d.figures.push_back({"saving", saving});
    d.figures.push_back({"batch", p.batch_seconds});
    d.figures.push_back({"planned", static_cast<double>(p.moves.size())});
    d.figures.push_back({"accepted", accept ? 1.0 : 0.0});
    d.figures.push_back({"imputed", static_cast<double>(imputed)});
    d.figures.push_back({"reports", static_cast<double>(heard.procs)});
}

} // namespace

Result<std::unique_ptr<Policy>> make(const Params& params, const Tuning& tuning) {
    auto bad = [](std::string what) {
        return Error::from_errno(EINVAL, "The ghost policy cannot run with " + what + ".");
    };
    if (tuning.window < 1)
        return bad("a window of 0 supersteps: a demand is a mean over at least one");
    if (!(tuning.margin >= 0.0 && tuning.margin < 1.0))
        return bad(fmt::format("margin {:g}: it must lie in [0, 1)", tuning.margin));
    if (!(tuning.budget > 0.0))
        return bad(
            fmt::format("budget {:g}: calls need a positive share of the time", tuning.budget));
    if (!(tuning.resend == 0.0 || (tuning.resend > 0.0 && tuning.resend < tuning.margin)))
        return bad(fmt::format("resend tolerance {:g}: it must be 0 or lie in (0, margin {:g})",
                               tuning.resend, tuning.margin));
    if (!(tuning.payback > 0.0))
        return bad(fmt::format("payback {:g}: a batch must pay back over a positive share of "
                               "the supersteps done",
                               tuning.payback));
    if (tuning.horizon_cap < 1)
        return bad("a horizon of 0 supersteps: no move could ever pay");
    return std::unique_ptr<Policy>(std::make_unique<Ghost>(params, tuning));
}

} // namespace ghost::balance::ghost_policy
