// SPDX-License-Identifier: GPL-2.0
// bsp-lu N: LU decomposition (no pivoting) of a diagonally dominant N x N
// matrix, modelled as in Righi et al., "Applying Process Migration on a
// BSP-Based LU Decomposition Application" (MigBSP, §4): the square cyclic
// distribution over an M x N' process grid (a(i,j) on P(i mod M, j mod N'),
// process number s N' + t) and three kinds of supersteps:
//   1 (once, k = 0): the owner of a(k,k) passes it to the owners of a(i,k);
//   2 (stage k): the owners of a(i,k), i > k, divide them by a(k,k) and pass
//     them along their process row; the owners of a(k,j), j > k, pass them
//     along their process column;
//   3 (stage k): every a(i,j), i, j > k, becomes a(i,j) - a(i,k) a(k,j); k + 1;
//     the owner of the new a(k,k) passes it to the owners of a(i,k).
// 2N + 1 supersteps in all, as in the paper (sim/apps/lu.cpp models the same).
// Every element sees the same operations in the same order whatever the grid,
// so the factors are bit-identical for any number of processes. VP 0 gathers
// them (one bsp_send per process) and checks ||LU - A||_F / ||A||_F.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <bsp.h>

#include "common.hpp"

namespace {

using bspapps::Session;

// The process grid of the paper (25 -> 5 x 5, 50 -> 10 x 5, 100 -> 10 x 10,
// 200 -> 20 x 10); otherwise M x N' with M >= N' and N' the largest divisor
// of p not above its square root (4 -> 2 x 2, 6 -> 3 x 2, 7 -> 7 x 1).
struct Grid {
    int m = 1, n = 1;
};

Grid grid_for(int p) {
    switch (p) {
    case 25:
        return {5, 5};
    case 50:
        return {10, 5};
    case 100:
        return {10, 10};
    case 200:
        return {20, 10};
    default:
        break;
    }
    int n = 1;
    for (int d = 1; d * d <= p; ++d)
        if (p % d == 0)
            n = d;
    return {p / n, n};
}

// Indices x in [0, total) with x mod m == r.
std::uint64_t congruent(std::uint64_t total, std::uint64_t r, std::uint64_t m) {
    return total > r ? (total - r + m - 1) / m : 0;
}

// a(i,j) of the input: uniform in [-1, 1), plus N on the diagonal (strictly
// diagonally dominant, so no pivoting is needed).
double input(std::uint64_t seed, std::uint64_t n, std::uint64_t i, std::uint64_t j) {
    const double v = 2.0 * bspapps::unit(bspapps::mix64(seed) ^ (i * n + j)) - 1.0;
    return i == j ? v + double(n) : v;
}

// ||LU - A||_F / ||A||_F with L unit lower and U upper triangular, both in lu.
double residual(const std::vector<double>& lu, std::uint64_t n, std::uint64_t seed) {
    double diff = 0.0, norm = 0.0;
    for (std::uint64_t i = 0; i < n; ++i)
        for (std::uint64_t j = 0; j < n; ++j) {
            const std::uint64_t kmax = i < j ? i : j;
            double s = 0.0;
            for (std::uint64_t k = 0; k < kmax; ++k)
                s += lu[i * n + k] * lu[k * n + j];
            s += i <= j ? lu[i * n + j] : lu[i * n + j] * lu[j * n + j];
            const double a = input(seed, n, i, j);
            diff += (s - a) * (s - a);
            norm += a * a;
        }
    return std::sqrt(diff) / std::sqrt(norm);
}

class Lu {
  public:
    Lu(Session& s, std::uint64_t n, std::uint64_t seed)
        : s_(s), n_(n), seed_(seed), grid_(grid_for(s.nprocs())), row_(s.pid() / grid_.n),
          col_(s.pid() % grid_.n), lr_(congruent(n, row_, grid_.m)),
          lc_(congruent(n, col_, grid_.n)), a_(lr_ * lc_), colk_(lr_), rowk_(lc_) {
        for (std::uint64_t li = 0; li < lr_; ++li)
            for (std::uint64_t lj = 0; lj < lc_; ++lj)
                a_[li * lc_ + lj] = input(seed_, n_, gi(li), gj(lj));
        bsp_push_reg(&pivot_, sizeof pivot_);
        bsp_push_reg(colk_.data(), bspapps::bsp_bytes(lr_ * sizeof(double), "bsp-lu column"));
        bsp_push_reg(rowk_.data(), bspapps::bsp_bytes(lc_ * sizeof(double), "bsp-lu row"));
        int tag = sizeof(int);
        bsp_set_tagsize(&tag);
        s_.sync(); // registrations and the tag size take effect
    }

    Grid grid() const { return grid_; }

    void factor() {
        pass_pivot(0); // superstep of the first kind
        s_.sync();
        for (std::uint64_t k = 0; k < n_; ++k) {
            divide_and_pass(k); // second kind
            s_.sync();
            update(k); // third kind
            if (k + 1 < n_)
                pass_pivot(k + 1);
            s_.sync();
        }
    }

    // VP 0 receives every block (one message per process) and returns the
    // whole factored matrix, row-major; the others return an empty vector.
    std::vector<double> gather() {
        const int me = s_.pid();
        if (me != 0)
            bsp_send(0, &me, a_.data(),
                     bspapps::bsp_bytes(a_.size() * sizeof(double), "bsp-lu block"));
        s_.sync();
        if (me != 0)
            return {};
        std::vector<double> lu(n_ * n_);
        scatter(lu, 0, a_);
        int count = 0, bytes = 0;
        bsp_qsize(&count, &bytes);
        for (int m = 0; m < count; ++m) {
            int size = 0, from = -1;
            bsp_get_tag(&size, &from);
            const Grid g = grid_;
            const std::uint64_t r = std::uint64_t(from / g.n), c = std::uint64_t(from % g.n);
            const std::uint64_t expect =
                congruent(n_, r, std::uint64_t(g.m)) * congruent(n_, c, std::uint64_t(g.n));
            if (from <= 0 || from >= s_.nprocs() || std::uint64_t(size) != expect * sizeof(double))
                bsp_abort("bsp-lu: gather: message %d of %d has tag %d and %d bytes (expected a "
                          "process 1..%d and %llu bytes)",
                          m, count, from, size, s_.nprocs() - 1,
                          (unsigned long long)(expect * sizeof(double)));
            std::vector<double> block(expect);
            bsp_move(block.data(), size);
            scatter(lu, from, block);
        }
        if (count != s_.nprocs() - 1)
            bsp_abort("bsp-lu: gather: %d blocks arrived, expected %d", count, s_.nprocs() - 1);
        return lu;
    }

  private:
    std::uint64_t gi(std::uint64_t li) const { return li * std::uint64_t(grid_.m) + row_; }
    std::uint64_t gj(std::uint64_t lj) const { return lj * std::uint64_t(grid_.n) + col_; }
    int pid_of(int r, int c) const { return r * grid_.n + c; }
    std::uint64_t owner_row(std::uint64_t i) const { return i % std::uint64_t(grid_.m); }
    std::uint64_t owner_col(std::uint64_t j) const { return j % std::uint64_t(grid_.n); }

    // The owner of a(k,k) passes it to the processes of column k mod N'.
    void pass_pivot(std::uint64_t k) {
        if (owner_row(k) != row_ || owner_col(k) != col_)
            return;
        pivot_ = a_[(k / std::uint64_t(grid_.m)) * lc_ + k / std::uint64_t(grid_.n)];
        for (int r = 0; r < grid_.m; ++r)
            if (std::uint64_t(r) != row_)
                bsp_put(pid_of(r, int(col_)), &pivot_, &pivot_, 0, sizeof pivot_);
    }

    void divide_and_pass(std::uint64_t k) {
        const int me = s_.pid();
        if (owner_col(k) == col_) {
            const std::uint64_t lj = k / std::uint64_t(grid_.n);
            for (std::uint64_t li = 0; li < lr_; ++li) {
                if (gi(li) <= k)
                    continue;
                a_[li * lc_ + lj] /= pivot_;
                colk_[li] = a_[li * lc_ + lj];
            }
            for (int c = 0; c < grid_.n; ++c)
                if (pid_of(int(row_), c) != me)
                    bsp_put(pid_of(int(row_), c), colk_.data(), colk_.data(), 0,
                            int(lr_ * sizeof(double)));
        }
        if (owner_row(k) == row_) {
            const std::uint64_t li = k / std::uint64_t(grid_.m);
            for (std::uint64_t lj = 0; lj < lc_; ++lj)
                if (gj(lj) > k)
                    rowk_[lj] = a_[li * lc_ + lj];
            for (int r = 0; r < grid_.m; ++r)
                if (pid_of(r, int(col_)) != me)
                    bsp_put(pid_of(r, int(col_)), rowk_.data(), rowk_.data(), 0,
                            int(lc_ * sizeof(double)));
        }
    }

    void update(std::uint64_t k) {
        for (std::uint64_t li = 0; li < lr_; ++li) {
            if (gi(li) <= k)
                continue;
            const double l = colk_[li];
            for (std::uint64_t lj = 0; lj < lc_; ++lj)
                if (gj(lj) > k)
                    a_[li * lc_ + lj] -= l * rowk_[lj];
        }
    }

    // Places process p's block into the whole matrix.
    void scatter(std::vector<double>& lu, int p, const std::vector<double>& block) const {
        const std::uint64_t r = std::uint64_t(p / grid_.n), c = std::uint64_t(p % grid_.n);
        const std::uint64_t m = std::uint64_t(grid_.m), nn = std::uint64_t(grid_.n);
        const std::uint64_t lr = congruent(n_, r, m), lc = congruent(n_, c, nn);
        for (std::uint64_t li = 0; li < lr; ++li)
            for (std::uint64_t lj = 0; lj < lc; ++lj)
                lu[(li * m + r) * n_ + lj * nn + c] = block[li * lc + lj];
    }

    Session& s_;
    std::uint64_t n_, seed_;
    Grid grid_;
    std::uint64_t row_, col_; // this process is P(row_, col_)
    std::uint64_t lr_, lc_;   // its rows and columns
    std::vector<double> a_;   // its elements, lr_ x lc_, row-major
    std::vector<double> colk_, rowk_;
    double pivot_ = 0.0;
};

// The parameters: set by process 0's main(), sent to the others by Session.
struct Params {
    std::uint64_t n = 0, seed = 1;
    bool fault = false;
};
Params params;
int exit_status = 0; // process 0's

// The SPMD part: every process.
void spmd() {
    Session s("bsp-lu", params);
    const auto [n, seed, fault] = params;
    const Grid g = grid_for(s.nprocs());
    if (n < std::uint64_t(g.m)) {
        if (s.pid() == 0)
            std::fprintf(stderr, "bsp-lu: N = %llu is smaller than the %d x %d process grid\n",
                         (unsigned long long)n, g.m, g.n);
        exit_status = 2;
        bsp_end();
        return;
    }
    Lu lu(s, n, seed);
    s.start_clock();
    lu.factor();
    std::vector<double> whole = lu.gather();
    s.stop_clock();

    bool ok = true;
    std::string value, details, why;
    if (s.pid() == 0) {
        if (fault)
            whole[(n / 2) * n + n / 3] += 1e-6;
        const double res = residual(whole, n, seed);
        const double bound = 64.0 * double(n) * DBL_EPSILON;
        char buf[160];
        std::snprintf(buf, sizeof buf, "n=%llu grid=%dx%d residual=%.3e", (unsigned long long)n,
                      g.m, g.n, res);
        details = buf;
        value = bspapps::hex64(bspapps::fnv1a(std::as_bytes(std::span(whole))));
        ok = res < bound; // false for NaN too
        std::snprintf(buf, sizeof buf, "||LU - A||_F / ||A||_F = %.3e is not below %.3e", res,
                      bound);
        why = buf;
    }
    exit_status = s.finish(ok, value, details, why);
}

} // namespace

int main(int argc, char** argv) {
    bsp_init(spmd, argc, argv);
    CLI::App app;
    bspapps::describe(
        app, {
                 "bsp-lu",
                 "LU decomposition on a cyclic M x N' process grid (MigBSP's LU model)",
                 "  Factors A = LU (L unit lower, U upper triangular, no pivoting) for an\n"
                 "  N x N matrix with entries uniform in [-1, 1) from SEED and N added on\n"
                 "  the diagonal (strictly diagonally dominant). a(i,j) lives on process\n"
                 "  P(i mod M, j mod N') = s N' + t of an M x N' grid: 25, 50, 100 and 200\n"
                 "  processes give the paper's 5x5, 10x5, 10x10 and 20x10, any other P the\n"
                 "  grid M x N' with M >= N' closest to square (4: 2x2, 6: 3x2, 7: 7x1).\n"
                 "  2N+1 supersteps of three kinds: (1) the owner of a(k,k) passes it down\n"
                 "  its process column; (2) the owners of a(i,k), i > k, divide them by\n"
                 "  a(k,k) and put them along their process row, the owners of a(k,j)\n"
                 "  put them along their process column; (3) every a(i,j), i,j > k, is\n"
                 "  updated and the next a(k,k) is passed. Communication is bsp_put into\n"
                 "  registered areas; N must be at least M.",
                 "  VP 0 gathers the factors (one bsp_send per process) and computes\n"
                 "  ||LU - A||_F / ||A||_F in O(N^3); it must be below 64 N DBL_EPSILON.",
                 "the FNV-1a hash (16 hex digits) of the factors, row-major doubles:\n"
                 "  the factors are bit-identical for any number of processes",
                 "bsprun -n 4 bsp-lu 200",
             });
    app.add_option("N", params.n, "Order of the matrix (at least the grid's M).")
        ->required()
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(20000)));
    app.add_option("--seed", params.seed, "Seed of the matrix's entries.")->capture_default_str();
    bspapps::add_fault_option(app, params.fault);
    if (auto status = bspapps::parse(app, argc, argv))
        return bspapps::stop(*status);
    spmd();
    return exit_status;
}
