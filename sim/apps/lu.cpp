// SPDX-License-Identifier: GPL-2.0
// LU decomposition as MigBSP models it (Righi et al., "Applying Process
// Migration on a BSP-Based LU Decomposition Application", §4, Table 1): an
// n x n matrix over M x N processes P(s, t) with the square cyclic
// distribution (a(i, j) on P(i mod M, j mod N); process id s N + t), and
// 2n + 1 supersteps of three kinds:
//   1 (once, k = 0): the owner of a(k,k) passes it to the owners of a(i,k), i > k;
//   2 (stage k): the owners of a(i,k), i > k, compute them (one division each)
//     and pass them along their process row; the owners of a(k,j), j > k,
//     pass them along their process column;
//   3 (stage k): every a(i,j), i, j > k, is updated by its owner; k + 1; the
//     owner of the new a(k,k) passes it to the owners of a(i,k), i > k.
// A message carries 8 bytes per element; messages between the same two
// processes in one superstep are one message. The paper gives no
// instruction counts: one element update or division costs
// instructions_per_element (chosen so that scenario i of the paper's
// Table 2 is of the right magnitude on our platform; see
// Documentation/simulation.md). An image is 8 bytes per owned element plus
// 500 KB of other data.
#include "../app.hpp"

#include <cerrno>

namespace ghost::sim {

namespace {

constexpr double instructions_per_element = 1000.0;
constexpr std::uint64_t element_bytes = 8;
constexpr std::uint64_t other_bytes = 500'000;

// x in [lo, hi) with x mod m == r.
std::uint64_t congruent(std::uint64_t lo, std::uint64_t hi, std::uint64_t r, std::uint64_t m) {
    auto below = [&](std::uint64_t x) { return x > r ? (x - r + m - 1) / m : 0; };
    return hi > lo ? below(hi) - below(lo) : 0;
}

class Lu final : public App {
  public:
    Lu(std::uint64_t n, std::uint64_t m, std::uint64_t nn) : n_(n), m_(m), nn_(nn) {}
    std::string_view name() const override { return "lu"; }
    Proc procs() const override { return Proc(m_ * nn_); }
    std::uint64_t supersteps() const override { return 2 * n_ + 1; }

    Step step(std::uint64_t t, Proc p) const override {
        Step st;
        const std::uint64_t s = p / nn_, c = p % nn_;
        if (t == 1) {
            pass_pivot(st, 0, s, c);
        } else if (t % 2 == 0) {
            const std::uint64_t k = (t - 2) / 2;
            const std::uint64_t km = k % m_, kn = k % nn_;
            if (c == kn)
                st.instructions += instructions_per_element * rows(s, k);
            // 2.2: a(i,k) along the process row s.
            for (std::uint64_t c2 = 0; c2 < nn_; ++c2) {
                if (c2 == kn || rows(s, k) == 0 || cols(c2, k) == 0)
                    continue;
                if (c == kn)
                    st.sends.push_back({p, id(s, c2), element_bytes * rows(s, k)});
                if (c == c2)
                    ++st.recv_count;
            }
            // 2.3: a(k,j) along the process column c.
            for (std::uint64_t s2 = 0; s2 < m_; ++s2) {
                if (s2 == km || rows(s2, k) == 0 || cols(c, k) == 0)
                    continue;
                if (s == km)
                    st.sends.push_back({p, id(s2, c), element_bytes * cols(c, k)});
                if (s == s2)
                    ++st.recv_count;
            }
        } else {
            const std::uint64_t k = (t - 3) / 2;
            st.instructions += instructions_per_element * double(rows(s, k)) * double(cols(c, k));
            if (k + 1 < n_)
                pass_pivot(st, k + 1, s, c);
        }
        return st;
    }
    std::uint64_t memory_bytes(Proc p) const override {
        const std::uint64_t s = p / nn_, c = p % nn_;
        return element_bytes * congruent(0, n_, s, m_) * congruent(0, n_, c, nn_) + other_bytes;
    }

  private:
    Proc id(std::uint64_t s, std::uint64_t c) const { return Proc(s * nn_ + c); }
    // Rows i > k of process row s; columns j > k of process column c.
    std::uint64_t rows(std::uint64_t s, std::uint64_t k) const {
        return congruent(k + 1, n_, s, m_);
    }
    std::uint64_t cols(std::uint64_t c, std::uint64_t k) const {
        return congruent(k + 1, n_, c, nn_);
    }
    // a(k,k) from its owner to the owners of a(i,k), i > k.
    void pass_pivot(Step& st, std::uint64_t k, std::uint64_t s, std::uint64_t c) const {
        const std::uint64_t km = k % m_, kn = k % nn_;
        for (std::uint64_t s2 = 0; s2 < m_; ++s2) {
            if (s2 == km || rows(s2, k) == 0)
                continue;
            if (s == km && c == kn)
                st.sends.push_back({id(s, c), id(s2, kn), element_bytes});
            if (s == s2 && c == kn)
                ++st.recv_count;
        }
    }

    std::uint64_t n_, m_, nn_;
};

// The paper's grids, else the factorisation M x N (M >= N) closest to square.
void grid(Proc procs, std::uint64_t& m, std::uint64_t& n) {
    switch (procs) {
    case 25:
        m = 5, n = 5;
        return;
    case 50:
        m = 10, n = 5;
        return;
    case 100:
        m = 10, n = 10;
        return;
    case 200:
        m = 20, n = 10;
        return;
    default:
        break;
    }
    n = 1;
    for (std::uint64_t d = 1; d * d <= procs; ++d)
        if (procs % d == 0)
            n = d;
    m = procs / n;
}

} // namespace

Result<std::unique_ptr<App>> make_lu(std::uint64_t order, Proc procs) {
    std::uint64_t m = 0, n = 0;
    grid(procs, m, n);
    if (order < m || order < n)
        return Error::from_errno(EINVAL, "the LU matrix order " + std::to_string(order) +
                                             " is smaller than the process grid " +
                                             std::to_string(m) + " x " + std::to_string(n) + ".");
    return std::unique_ptr<App>(std::make_unique<Lu>(order, m, n));
}

} // namespace ghost::sim
