// SPDX-License-Identifier: GPL-2.0
// PUB's divide-and-conquer 3-SAT solver (Bonorden 2007, §5), as we model it
// (the paper gives no instruction counts): in superstep 1 process 0 expands
// the search tree until c p subproblems exist (c = 4; divide_instructions
// per subproblem) and sends c of them (subproblem_bytes each) to every other
// process. From superstep 2 on, every process runs 10,000 divide steps per
// superstep (step_instructions each) until its own subproblems are
// exhausted: process i has work for a fraction u_i of the remaining
// supersteps, u_i drawn uniformly in (0, 1] from the seed. The irregularity
// is that work, not the messages. Images are small (1 MB), as in PUB.
#include "../app.hpp"

#include <algorithm>

namespace ghost::sim {

namespace {

constexpr unsigned subproblems_per_proc = 4;
constexpr double divide_instructions = 1e6;
constexpr double step_instructions = 1e4;
constexpr double steps_per_superstep = 10'000;
constexpr std::uint64_t subproblem_bytes = 1'000;
constexpr std::uint64_t image_bytes = 1'000'000;

std::uint64_t splitmix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

class Sat3 final : public App {
  public:
    Sat3(std::uint64_t supersteps, Proc procs, std::uint64_t seed)
        : supersteps_(std::max<std::uint64_t>(supersteps, 1)), procs_(procs), seed_(seed) {}
    std::string_view name() const override { return "sat3"; }
    Proc procs() const override { return procs_; }
    std::uint64_t supersteps() const override { return supersteps_; }

    Step step(std::uint64_t t, Proc i) const override {
        Step st;
        if (t == 1) {
            if (i == 0) {
                st.instructions = divide_instructions * subproblems_per_proc * procs_;
                for (Proc j = 1; j < procs_; ++j)
                    st.sends.push_back({0, j, subproblem_bytes * subproblems_per_proc});
            } else {
                st.recv_count = 1;
            }
            return st;
        }
        const double full = step_instructions * steps_per_superstep;
        const double left = work(i) - full * double(t - 2);
        st.instructions = std::clamp(left, 0.0, full);
        return st;
    }
    std::uint64_t memory_bytes(Proc) const override { return image_bytes; }

    // Instructions of process i after superstep 1.
    double work(Proc i) const {
        const double u = double((splitmix(seed_ * 0x100000001b3ULL + i) >> 11) + 1) * 0x1.0p-53;
        return u * step_instructions * steps_per_superstep * double(supersteps_ - 1);
    }

  private:
    std::uint64_t supersteps_;
    Proc procs_;
    std::uint64_t seed_;
};

} // namespace

std::unique_ptr<App> make_sat3(std::uint64_t supersteps, Proc procs, std::uint64_t seed) {
    return std::make_unique<Sat3>(supersteps, procs, seed);
}

} // namespace ghost::sim
