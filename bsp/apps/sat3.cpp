// SPDX-License-Identifier: GPL-2.0
// bsp-sat3 VARS CLAUSES SEED: PUB's divide-and-conquer 3-SAT solver (Bonorden
// 2007, §5; sim/apps/sat3.cpp). A random 3-SAT instance with a planted
// solution (satisfiable by construction) is searched depth first, branching
// on the variables in order (false before true) and cutting a branch as soon
// as a clause has all three variables set and false. In superstep 1 process 0
// expands the tree level by level until at least 4 P subproblems exist and
// deals them out cyclically (bsp_send); every process then searches its own
// in order, STEPS divide steps per superstep, and at each barrier all
// processes exchange (bsp_put) the lowest subproblem in which they found a
// solution and the lowest one they have not finished. The search ends when
// every subproblem below the lowest solution is exhausted, so the answer is
// the first solution in depth-first order whatever the number of processes.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <bsp.h>

#include "common.hpp"

namespace {

using bspapps::Session;
constexpr std::uint64_t none = std::numeric_limits<std::uint64_t>::max();

struct Formula {
    std::uint32_t vars = 0;
    std::vector<std::array<std::int32_t, 3>> clauses; // literal: +(v + 1) or -(v + 1)
    std::vector<std::vector<std::uint32_t>> by_last;  // clauses whose largest variable is v
};

Formula generate(std::uint32_t vars, std::uint32_t count, std::uint64_t seed) {
    bspapps::Rng rng(bspapps::mix64(seed));
    std::vector<std::uint8_t> planted(vars);
    for (auto& v : planted)
        v = std::uint8_t(rng.below(2));
    Formula f;
    f.vars = vars;
    f.by_last.resize(vars);
    while (f.clauses.size() < count) {
        std::array<std::int32_t, 3> c{};
        std::uint32_t v[3];
        v[0] = std::uint32_t(rng.below(vars));
        do
            v[1] = std::uint32_t(rng.below(vars));
        while (v[1] == v[0]);
        do
            v[2] = std::uint32_t(rng.below(vars));
        while (v[2] == v[0] || v[2] == v[1]);
        bool satisfied = false;
        for (int k = 0; k < 3; ++k) {
            const bool positive = rng.below(2) != 0;
            c[std::size_t(k)] = positive ? std::int32_t(v[k] + 1) : -std::int32_t(v[k] + 1);
            satisfied |= (planted[v[k]] != 0) == positive;
        }
        if (!satisfied)
            continue; // keeps the planted assignment a solution
        f.by_last[std::max({v[0], v[1], v[2]})].push_back(std::uint32_t(f.clauses.size()));
        f.clauses.push_back(c);
    }
    return f;
}

bool literal_true(std::int32_t lit, const std::vector<std::uint8_t>& a) {
    const std::uint32_t v = std::uint32_t(lit > 0 ? lit : -lit) - 1;
    return (a[v] != 0) == (lit > 0);
}

// True if setting variable a.size() - 1 made a clause false.
bool conflict(const Formula& f, const std::vector<std::uint8_t>& a) {
    for (std::uint32_t c : f.by_last[a.size() - 1]) {
        const auto& cl = f.clauses[c];
        if (!literal_true(cl[0], a) && !literal_true(cl[1], a) && !literal_true(cl[2], a))
            return true;
    }
    return false;
}

// A resumable depth-first search below a prefix; one divide step sets one
// variable.
class Search {
  public:
    Search(const Formula& f, std::vector<std::uint8_t> prefix)
        : f_(&f), base_(prefix.size()), path_(std::move(prefix)), next_(f.vars + 1, 0) {}

    enum class State { running, solved, exhausted };
    // Runs at most budget divide steps (budget 0: no limit).
    State run(std::uint64_t budget, std::uint64_t& steps) {
        for (;;) {
            const std::size_t d = path_.size();
            if (d == f_->vars)
                return State::solved;
            if (next_[d] == 2) { // both values tried below this node
                if (d == base_)
                    return State::exhausted;
                path_.pop_back();
                continue;
            }
            if (budget && steps >= budget)
                return State::running;
            ++steps;
            path_.push_back(next_[d]++);
            if (conflict(*f_, path_))
                path_.pop_back();
            else
                next_[d + 1] = 0;
        }
    }
    const std::vector<std::uint8_t>& assignment() const { return path_; }

  private:
    const Formula* f_;
    std::size_t base_;
    std::vector<std::uint8_t> path_;
    std::vector<std::uint8_t> next_; // next value to try at each depth (2: none)
};

// Process 0's first superstep: the level of the tree with at least want
// live nodes (or the last level), in depth-first order.
std::vector<std::vector<std::uint8_t>> split(const Formula& f, std::size_t want) {
    std::vector<std::vector<std::uint8_t>> level(1);
    for (std::uint32_t d = 0; d < f.vars && !level.empty() && level.size() < want; ++d) {
        std::vector<std::vector<std::uint8_t>> next;
        for (const auto& node : level)
            for (std::uint8_t v = 0; v < 2; ++v) {
                auto child = node;
                child.push_back(v);
                if (!conflict(f, child))
                    next.push_back(std::move(child));
            }
        level = std::move(next);
    }
    return level;
}

struct Status {
    std::uint64_t solved = none; // lowest subproblem with a solution found here
    std::uint64_t open = none;   // lowest subproblem not finished here
};

class Solver {
  public:
    Solver(Session& s, const Formula& f)
        : s_(s), f_(f), status_(std::size_t(s.nprocs())), answer_(f.vars) {
        bsp_push_reg(status_.data(), int(status_.size() * sizeof(Status)));
        bsp_push_reg(answer_.data(), int(answer_.size()));
        int tag = sizeof(std::uint64_t);
        bsp_set_tagsize(&tag);
        s_.sync();
    }

    // Superstep 1: process 0 splits and deals; everybody takes its share.
    void distribute() {
        const int p = s_.nprocs();
        if (s_.pid() == 0) {
            auto level = split(f_, 4 * std::size_t(p));
            subproblems_ = level.size();
            for (std::uint64_t j = 0; j < level.size(); ++j) {
                if (j % std::uint64_t(p) == 0)
                    mine_.push_back({j, Search(f_, level[j])});
                else
                    bsp_send(int(j % std::uint64_t(p)), &j, level[j].data(), int(level[j].size()));
            }
        }
        s_.sync();
        int count = 0, bytes = 0;
        bsp_qsize(&count, &bytes);
        for (int m = 0; m < count; ++m) {
            int size = 0;
            std::uint64_t j = 0;
            bsp_get_tag(&size, &j);
            if (size < 0 || std::uint64_t(size) > f_.vars)
                bsp_abort("bsp-sat3: process %d: subproblem %llu has %d variables (of %u)",
                          s_.pid(), (unsigned long long)j, size, f_.vars);
            std::vector<std::uint8_t> prefix(static_cast<std::size_t>(size));
            bsp_move(prefix.data(), size);
            mine_.push_back({j, Search(f_, std::move(prefix))});
        }
        std::sort(mine_.begin(), mine_.end(),
                  [](const Task& x, const Task& y) { return x.index < y.index; });
    }

    // Search supersteps until the lowest solution is known; then its owner
    // puts it into process 0's answer. Returns the subproblem (none if the
    // instance was found unsatisfiable).
    std::uint64_t search(std::uint64_t budget) {
        std::uint64_t best = none;
        for (;;) {
            Status me;
            std::uint64_t steps = 0;
            for (Task& t : mine_) {
                if (t.index >= best || t.done)
                    continue;
                auto st = t.search.run(budget, steps);
                if (st == Search::State::solved) {
                    me.solved = t.index;
                    found_ = &t;
                    break;
                }
                if (st == Search::State::exhausted) {
                    t.done = true;
                    continue;
                }
                me.open = t.index; // budget spent
                break;
            }
            if (found_)
                me.solved = found_->index, me.open = none;
            for (int q = 0; q < s_.nprocs(); ++q)
                if (q == s_.pid())
                    status_[std::size_t(q)] = me;
                else
                    bsp_put(q, &me, status_.data(), int(std::size_t(s_.pid()) * sizeof(Status)),
                            sizeof(Status));
            s_.sync();
            ++rounds_;
            for (const Status& st : status_)
                best = std::min(best, st.solved);
            bool done = true;
            for (const Status& st : status_)
                done = done && st.open >= best;
            if (done)
                break;
        }
        if (best != none && found_ && found_->index == best) {
            if (s_.pid() == 0)
                answer_ = found_->search.assignment();
            else
                bsp_put(0, found_->search.assignment().data(), answer_.data(), 0,
                        int(answer_.size()));
        }
        s_.sync();
        return best;
    }

    std::vector<std::uint8_t>& answer() { return answer_; }
    std::uint64_t subproblems() const { return subproblems_; }
    std::uint64_t rounds() const { return rounds_; }

  private:
    struct Task {
        std::uint64_t index;
        Search search;
        bool done = false;
    };
    Session& s_;
    const Formula& f_;
    std::vector<Status> status_;
    std::vector<std::uint8_t> answer_;
    std::vector<Task> mine_;
    Task* found_ = nullptr;
    std::uint64_t subproblems_ = 0, rounds_ = 0;
};

// The parameters: set by process 0's main(), sent to the others by Session.
struct Params {
    std::uint32_t vars = 0, clauses = 0;
    std::uint64_t seed = 0, budget = 10000;
    bool fault = false, no_reference = false;
};
Params params;
int exit_status = 0; // process 0's

// The SPMD part: every process.
void spmd() {
    Session s("bsp-sat3", params);
    const auto [vars, clauses, seed, budget, fault, no_reference] = params;
    const Formula f = generate(vars, clauses, seed);
    Solver solver(s, f);
    s.start_clock();
    solver.distribute();
    const std::uint64_t found = solver.search(budget);
    s.stop_clock();

    bool ok = true;
    std::string value, details, why;
    if (s.pid() == 0) {
        auto& a = solver.answer();
        if (fault) // make clause 0 false
            for (std::int32_t lit : f.clauses[0])
                a[std::uint32_t(lit > 0 ? lit : -lit) - 1] = lit > 0 ? 0 : 1;
        value = bspapps::hex64(bspapps::fnv1a(std::as_bytes(std::span(a))));
        details = "vars=" + std::to_string(vars) + " clauses=" + std::to_string(clauses) +
                  " subproblems=" + std::to_string(solver.subproblems()) +
                  " solution_in=" + (found == none ? std::string("none") : std::to_string(found)) +
                  " search_supersteps=" + std::to_string(solver.rounds());
        if (found == none) {
            ok = false;
            why = "no satisfying assignment found, but the instance has a planted one";
        }
        for (std::size_t c = 0; c < f.clauses.size() && ok; ++c) {
            const auto& cl = f.clauses[c];
            if (!literal_true(cl[0], a) && !literal_true(cl[1], a) && !literal_true(cl[2], a)) {
                ok = false;
                why = "the assignment found (subproblem " + std::to_string(found) +
                      ") makes clause " + std::to_string(c) + " false";
            }
        }
        if (ok && !no_reference) {
            Search seq(f, {});
            std::uint64_t steps = 0;
            if (seq.run(0, steps) != Search::State::solved || seq.assignment() != a) {
                ok = false;
                why = "the assignment found is not the first solution of the sequential "
                      "depth-first search";
            }
        }
    }
    exit_status = s.finish(ok, value, details, why);
}

} // namespace

int main(int argc, char** argv) {
    bsp_init(spmd, argc, argv);
    CLI::App app;
    bspapps::describe(
        app, {
                 "bsp-sat3",
                 "3-SAT by divide and conquer over the processes (PUB's 3-SAT solver)",
                 "  Generates CLAUSES random 3-literal clauses over VARS variables from SEED,\n"
                 "  keeping only clauses that a random planted assignment satisfies, so the\n"
                 "  instance is satisfiable. The search branches on variables 0, 1, ... in\n"
                 "  order (false first) and cuts a branch when a clause has all its\n"
                 "  variables set and is false. Superstep 1: process 0 expands the tree level\n"
                 "  by level until at least 4 P subproblems exist (PUB's c p, c = 4) and\n"
                 "  sends subproblem j to process j mod P (bsp_send). Then every process\n"
                 "  searches its subproblems in order, --steps divide steps per superstep\n"
                 "  (PUB: 10000), and puts (bsp_put) to everyone the lowest subproblem in\n"
                 "  which it found a solution and the lowest it has not finished. When no\n"
                 "  subproblem below the lowest solution is left, the owner puts that\n"
                 "  solution into process 0's area: the first solution in depth-first\n"
                 "  order, whatever the number of processes.",
                 "  VP 0 checks that the assignment satisfies every clause and (unless\n"
                 "  --no-reference) that it equals the first solution of its own sequential\n"
                 "  depth-first search.",
                 "the FNV-1a hash (16 hex digits) of the assignment, one byte (0 or 1)\n"
                 "  per variable",
                 "bsprun -n 8 bsp-sat3 60 250 7",
             });
    app.add_option("VARS", params.vars, "Variables (at least 3).")
        ->required()
        ->check(CLI::Range(std::uint32_t(3), std::uint32_t(1) << 20));
    app.add_option("CLAUSES", params.clauses, "Clauses (4.26 VARS is the hard ratio).")
        ->required()
        ->check(CLI::Range(std::uint32_t(1), std::uint32_t(1) << 24));
    app.add_option("SEED", params.seed, "Seed of the instance.")->required();
    app.add_option("--steps", params.budget, "Divide steps per process and superstep.")
        ->capture_default_str()
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 40));
    app.add_flag("--no-reference", params.no_reference,
                 "Skip VP 0's sequential search (the clauses are still checked).");
    bspapps::add_fault_option(app, params.fault);
    if (auto status = bspapps::parse(app, argc, argv))
        return bspapps::stop(*status);
    spmd();
    return exit_status;
}
