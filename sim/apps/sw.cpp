// SPDX-License-Identifier: GPL-2.0
// Smith-Waterman as MigBSP models it (Righi et al. 2010, §5.2.1): an n x n
// matrix computed by anti-diagonal wavefronts, one superstep per wavefront
// (2n - 1 supersteps), columns mapped to processes (column y to process
// y mod P; the paper runs n processes). Every cell of superstep t costs
// I_t = 10^6 + (t - 1) (10^9 - 10^6) / (2n - 2) instructions, rising
// uniformly from 10^6 to 10^9 (for n = 10 this gives the paper's
// I_2 = 565 10^5). Cell (x, y) needs (x, y - 1): after computing it, the
// owner of column y sends the cell's data to the owner of column y + 1.
// A cell communicates 5 MB / n (500 KB for n = 10, 200 KB for n = 25) and an
// image is 700 KB plus that (1.2 MB and 900 KB in the paper).
#include "../app.hpp"

#include <algorithm>

namespace ghost::sim {

namespace {

constexpr double first_load = 1e6;
constexpr double last_load = 1e9;
constexpr std::uint64_t cell_bytes_times_order = 5'000'000;
constexpr std::uint64_t other_bytes = 700'000;

class SmithWaterman final : public App {
  public:
    SmithWaterman(std::uint64_t n, Proc procs) : n_(n), procs_(procs) {}
    std::string_view name() const override { return "sw"; }
    Proc procs() const override { return procs_; }
    std::uint64_t supersteps() const override { return 2 * n_ - 1; }

    Step step(std::uint64_t t, Proc i) const override {
        Step st;
        const double per_cell =
            n_ > 1 ? first_load + double(t - 1) * (last_load - first_load) / double(2 * n_ - 2)
                   : first_load;
        const std::uint64_t d = t - 1; // anti-diagonal x + y = d
        const std::uint64_t bytes = cell_bytes_times_order / n_;
        // Columns y of process i active on diagonal d: 0 <= d - y < n.
        const std::uint64_t ylo = d >= n_ ? d - n_ + 1 : 0;
        const std::uint64_t yhi = std::min<std::uint64_t>(d, n_ - 1);
        for (std::uint64_t y = i; y < n_; y += procs_) {
            if (y < ylo || y > yhi)
                continue;
            st.instructions += per_cell;
            if (y + 1 < n_ && owner(y + 1) != i)
                st.sends.push_back({i, owner(y + 1), bytes});
        }
        // Messages arriving in superstep t come from cells (x, y - 1) of
        // diagonal d whose successor column y belongs to i.
        for (std::uint64_t y = i; y < n_; y += procs_) {
            if (y == 0 || y - 1 < ylo || y - 1 > yhi)
                continue;
            if (owner(y - 1) != i)
                ++st.recv_count;
        }
        return st;
    }
    std::uint64_t memory_bytes(Proc) const override {
        return other_bytes + cell_bytes_times_order / n_;
    }

  private:
    Proc owner(std::uint64_t column) const { return Proc(column % procs_); }
    std::uint64_t n_;
    Proc procs_;
};

} // namespace

std::unique_ptr<App> make_sw(std::uint64_t order, Proc procs) {
    return std::make_unique<SmithWaterman>(order, procs);
}

} // namespace ghost::sim
