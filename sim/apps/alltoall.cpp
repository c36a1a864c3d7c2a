// SPDX-License-Identifier: GPL-2.0
// PUB's total exchange benchmark (Bonorden 2007, §5), as we model it (the
// paper gives no sizes): every superstep each process computes
// local_instructions, then sends message_bytes to every other process. The
// network is the bottleneck; images are 1 MB.
#include "../app.hpp"

namespace ghost::sim {

namespace {

constexpr double local_instructions = 1e7;
constexpr std::uint64_t message_bytes = 100'000;
constexpr std::uint64_t image_bytes = 1'000'000;

class AllToAll final : public App {
  public:
    AllToAll(std::uint64_t supersteps, Proc procs) : supersteps_(supersteps), procs_(procs) {}
    std::string_view name() const override { return "alltoall"; }
    Proc procs() const override { return procs_; }
    std::uint64_t supersteps() const override { return supersteps_; }
    Step step(std::uint64_t, Proc i) const override {
        Step st;
        st.instructions = local_instructions;
        for (Proc j = 0; j < procs_; ++j)
            if (j != i)
                st.sends.push_back({i, j, message_bytes});
        st.recv_count = procs_ - 1;
        return st;
    }
    std::uint64_t memory_bytes(Proc) const override { return image_bytes; }

  private:
    std::uint64_t supersteps_;
    Proc procs_;
};

} // namespace

std::unique_ptr<App> make_alltoall(std::uint64_t supersteps, Proc procs) {
    return std::make_unique<AllToAll>(supersteps, procs);
}

} // namespace ghost::sim
