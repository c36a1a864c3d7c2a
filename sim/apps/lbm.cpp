// SPDX-License-Identifier: GPL-2.0
// Lattice Boltzmann as MigBSP models it (Righi et al. 2010, §5.1.1): a 2D
// lattice of 10^10 instructions per superstep and 10 MB of data, split in
// vertical blocks over the processes; every superstep each process computes
// its block, then passes 100 KB of boundary data to its right neighbour (the
// last block has none). Each image also holds 500 KB of other data: 10
// processes occupy 1.5 MB each, 25 occupy 900 KB (the paper's figures).
// Regular: the same work and messages at every superstep.
#include "../app.hpp"

namespace ghost::sim {

namespace {

constexpr double total_instructions = 1e10;
constexpr std::uint64_t lattice_bytes = 10'000'000;
constexpr std::uint64_t fixed_bytes = 500'000;
constexpr std::uint64_t boundary_bytes = 100'000;

class Lbm final : public App {
  public:
    Lbm(std::uint64_t supersteps, Proc procs) : supersteps_(supersteps), procs_(procs) {}
    std::string_view name() const override { return "lbm"; }
    Proc procs() const override { return procs_; }
    std::uint64_t supersteps() const override { return supersteps_; }
    Step step(std::uint64_t, Proc i) const override {
        Step st;
        st.instructions = total_instructions / procs_;
        if (i + 1 < procs_)
            st.sends.push_back({i, i + 1, boundary_bytes});
        st.recv_count = i > 0 ? 1 : 0;
        return st;
    }
    std::uint64_t memory_bytes(Proc) const override { return lattice_bytes / procs_ + fixed_bytes; }

  private:
    std::uint64_t supersteps_;
    Proc procs_;
};

} // namespace

std::unique_ptr<App> make_lbm(std::uint64_t supersteps, Proc procs) {
    return std::make_unique<Lbm>(supersteps, procs);
}

} // namespace ghost::sim
