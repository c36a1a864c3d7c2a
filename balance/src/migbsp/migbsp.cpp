// SPDX-License-Identifier: LGPL-2.1-or-later
// The MigBSP policy: it keeps each process's history every superstep and,
// when the window of alpha supersteps closes, makes a rescheduling call:
// PM for every process, the candidates, their destinations, then the
// adaptations of alpha (Fig. 2) and D (Fig. 3).
#include "migbsp.hpp"

#include <array>
#include <cerrno>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "adaptation.hpp"
#include "cost.hpp"
#include "destination.hpp"
#include "metrics.hpp"
#include "patterns.hpp"
#include "sets.hpp"

namespace ghost::balance::migbsp {

namespace {

class MigBsp final : public Policy {
  public:
    explicit MigBsp(const Params& p)
        : params_(p), interval_(p.alpha), distance_(p.distance, p.omega) {}

    std::string_view name() const override { return "migbsp"; }
    Decision at_barrier(const Observation& obs) override;

  private:
    void call(const Observation& obs, Decision& d);
    Move move_for(const Observation& obs, const Potential& c, const Verdict& v,
                  double max_pm) const;

    Params params_;
    Interval interval_;
    Distance distance_;
    std::vector<History> history_;
    std::vector<double> times_; // this barrier's step times (scratch)
    std::size_t sets_ = 0;
    unsigned position_ = 0; // supersteps of the current window seen so far
};

Decision MigBsp::at_barrier(const Observation& obs) {
    if (obs.sets != sets_ || history_.size() > obs.procs.size()) {
        history_.clear(); // a different job: start afresh
        sets_ = obs.sets;
    }
    history_.resize(obs.procs.size(), History(obs.sets));

    const bool first = position_ == 0;
    times_.clear(); // kept between barriers: no allocation once the job's size is reached
    for (std::size_t i = 0; i < obs.procs.size(); ++i) {
        history_[i].observe(obs.procs[i], first, interval_.alpha(), {params_.delta, params_.beta});
        times_.push_back(obs.procs[i].step_time);
    }
    interval_.observe(balanced(times_, distance_.value()));

    Decision d;
    d.figures.reserve(6); // the state's four and a call's two: one allocation
    d.cost = cost::bookkeeping(obs.sets);
    if (++position_ >= interval_.alpha()) {
        call(obs, d);
        interval_.call();
        position_ = 0;
    }
    // The state after this barrier first, then the call's counts.
    const std::array<Figure, 4> state = {{{"alpha", static_cast<double>(interval_.alpha())},
                                          {"alpha'", static_cast<double>(interval_.alpha_next())},
                                          {"D", distance_.value()},
                                          {"gamma", static_cast<double>(distance_.gamma())}}};
    d.figures.insert(d.figures.begin(), state.begin(), state.end());
    return d;
}

void MigBsp::call(const Observation& obs, Decision& d) {
    d.rescheduled = true;
    const auto sets = set_views(obs);
    // Without T for every pair of Sets no Mem can be computed: no candidate.
    const bool network_ok = obs.net.byte_time.size() == obs.sets * obs.sets;

    std::vector<Potential> best;
    cost::CallShape shape;
    shape.window = interval_.alpha();
    shape.positives.assign(obs.sets, 0);
    for (const SetView& s : sets) {
        shape.hosts.push_back(s.hosts.size());
        shape.procs.push_back(s.procs.size());
    }
    if (network_ok)
        for (const SetView& s : sets)
            for (ProcId i : s.procs) {
                best.push_back(best_potential(obs, sets, i, history_[i]));
                if (best.back().pm > 0.0)
                    ++shape.positives[set_of(obs, obs.procs[i])];
            }

    const auto chosen = candidates(std::move(best), params_.top_one, params_.x);
    const double max_pm = chosen.empty() ? 0.0 : chosen.front().pm;
    Placement placement(obs);
    std::vector<Move> moves;
    unsigned refused = 0;
    for (const Potential& c : chosen) {
        const Process& p = obs.procs[c.proc];
        if (c.set == set_of(obs, p))
            ++shape.local_requests;
        else
            ++shape.remote_requests;
        shape.searched.push_back(sets[c.set].hosts.size());
        const Verdict v = destination(obs, sets, placement, c, history_[c.proc].last_bytes(c.set),
                                      history_[c.proc].last_instructions());
        if (!v.migrate) {
            ++refused;
            continue;
        }
        placement.move(p.host, v.to, history_[c.proc].last_instructions());
        moves.push_back(move_for(obs, c, v, max_pm));
    }

    const bool migrated = params_.migrate && !moves.empty();
    (params_.migrate ? d.moves : d.withheld) = std::move(moves);
    distance_.call(migrated);

    const Cost call_cost = cost::call(shape);
    d.cost.instructions += call_cost.instructions;
    d.cost.messages += call_cost.messages;
    d.cost.bytes += call_cost.bytes;
    d.cost.rounds += call_cost.rounds;
    d.figures.push_back({"candidates", static_cast<double>(chosen.size())});
    d.figures.push_back({"refused", static_cast<double>(refused)});
}

Move MigBsp::move_for(const Observation& obs, const Potential& c, const Verdict& v,
                      double max_pm) const {
    const Process& p = obs.procs[c.proc];
    Move m;
    m.proc = c.proc;
    m.from = p.host;
    m.to = v.to;
    const std::string rule =
        params_.top_one || c.pm >= max_pm
            ? std::string("the highest PM")
            : fmt::format("above {:g}% of the highest PM {:.4g}", params_.x * 100, max_pm);
    m.why = fmt::format("PM({}, Set {}) = {:.4g} is {}, and on host {} t1 = {:.4g} s is below "
                        "t2 = {:.4g} s on host {}.",
                        c.proc, c.set, c.pm, rule, v.to, v.t1, v.t2, p.host);
    m.figures = {{"PM", c.pm},          {"Comp", c.comp},        {"Comm", c.comm},
                 {"Mem", c.mem},        {"ISet", c.iset},        {"set", double(c.set)},
                 {"time(p)", v.time_p}, {"time(p')", v.time_p0}, {"t1", v.t1},
                 {"t2", v.t2},          {"max PM", max_pm}};
    return m;
}

} // namespace

Result<std::unique_ptr<Policy>> make(const Params& p) {
    auto bad = [](std::string what) {
        return Error::from_errno(EINVAL, "MigBSP cannot run with " + what + ".");
    };
    if (p.alpha < 1)
        return bad("alpha 0: the interval between calls is at least one superstep");
    if (p.omega < 1)
        return bad("omega 0: D grows after at least one call without migration");
    if (!(p.distance > 0.0 && p.distance < 1.0))
        return bad(
            fmt::format("D = {:g}: the distance must lie strictly between 0 and 1", p.distance));
    if (!(p.delta >= 0.0) || !(p.beta >= 0.0))
        return bad(fmt::format("delta = {:g} and beta = {:g}: tolerances cannot be negative",
                               p.delta, p.beta));
    if (!(p.x >= 0.0 && p.x <= 1.0))
        return bad(fmt::format("x = {:g}: the share of the highest PM must lie in [0, 1]", p.x));
    return std::unique_ptr<Policy>(std::make_unique<MigBsp>(p));
}

} // namespace ghost::balance::migbsp
