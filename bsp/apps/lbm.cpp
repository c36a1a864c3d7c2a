// SPDX-License-Identifier: GPL-2.0
// bsp-lbm NX NY STEPS: 2-D Lattice Boltzmann (D2Q9, BGK collision, periodic in
// both directions) with the NY rows split in contiguous blocks over the
// processes, as MigBSP's Lattice Boltzmann application (Righi et al. 2010,
// §5.1; sim/apps/lbm.cpp). One superstep per time step: every process
// collides its rows, puts its first and last rows (after collision) into
// the halo rows of its two neighbours (bsp_put into registered areas), and
// after the barrier streams (pull scheme) into its second buffer.
// Every cell sees the same floating-point operations in the same order
// whatever the number of processes, so VP 0's sequential reference run
// gives a bit-identical lattice, and the total mass is conserved to rounding.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <bsp.h>

#include "common.hpp"

namespace {

using bspapps::Session;

constexpr int Q = 9;
// D2Q9 velocities and weights: rest, the four axes, the four diagonals.
constexpr int cx[Q] = {0, 1, 0, -1, 0, 1, -1, -1, 1};
constexpr int cy[Q] = {0, 0, 1, 0, -1, 1, 1, -1, -1};
constexpr double weight[Q] = {4.0 / 9,  1.0 / 9,  1.0 / 9,  1.0 / 9, 1.0 / 9,
                              1.0 / 36, 1.0 / 36, 1.0 / 36, 1.0 / 36};
constexpr double omega = 1.0 / 0.6; // 1 / relaxation time

void equilibrium(double rho, double ux, double uy, double* f) {
    const double usq = 1.5 * (ux * ux + uy * uy);
    for (int i = 0; i < Q; ++i) {
        const double cu = 3.0 * (cx[i] * ux + cy[i] * uy);
        f[i] = weight[i] * rho * (1.0 + cu + 0.5 * cu * cu - usq);
    }
}

// The initial state of row y: a density bump from SEED and a shear wave.
void initial_row(std::uint64_t seed, std::uint64_t nx, std::uint64_t ny, std::uint64_t y,
                 double* row) {
    const double pi = 3.14159265358979323846;
    for (std::uint64_t x = 0; x < nx; ++x) {
        const double rho = 1.0 + 0.05 * (bspapps::unit(bspapps::mix64(seed) ^ (y * nx + x)) - 0.5);
        const double ux = 0.05 * std::sin(2.0 * pi * double(y) / double(ny));
        const double uy = 0.02 * std::cos(2.0 * pi * double(x) / double(nx));
        equilibrium(rho, ux, uy, row + x * Q);
    }
}

// BGK collision of one row, in place.
void collide_row(std::uint64_t nx, double* row) {
    double feq[Q];
    for (std::uint64_t x = 0; x < nx; ++x) {
        double* f = row + x * Q;
        double rho = 0.0;
        for (int i = 0; i < Q; ++i)
            rho += f[i];
        const double ux = (f[1] - f[3] + f[5] - f[6] - f[7] + f[8]) / rho;
        const double uy = (f[2] - f[4] + f[5] + f[6] - f[7] - f[8]) / rho;
        equilibrium(rho, ux, uy, feq);
        for (int i = 0; i < Q; ++i)
            f[i] += omega * (feq[i] - f[i]);
    }
}

// Streaming (pull): out(x, i) = the post-collision value of (x - cx, y - cy).
void stream_row(std::uint64_t nx, const double* below, const double* row, const double* above,
                double* out) {
    const double* src[3] = {below, row, above}; // indexed by 1 - cy
    for (std::uint64_t x = 0; x < nx; ++x)
        for (int i = 0; i < Q; ++i) {
            const std::uint64_t xs = (x + nx + 1 - std::uint64_t(cx[i] + 1)) % nx; // x - cx
            out[x * Q + i] = src[1 - cy[i]][xs * Q + i];
        }
}

// Total mass of rows, summed row by row in order.
double mass(std::uint64_t nx, std::uint64_t rows, const double* f) {
    double m = 0.0;
    for (std::uint64_t y = 0; y < rows; ++y) {
        double r = 0.0;
        for (std::uint64_t k = 0; k < nx * Q; ++k)
            r += f[y * nx * Q + k];
        m += r;
    }
    return m;
}

// The sequential reference: the same kernels on the whole lattice.
std::vector<double> reference(std::uint64_t nx, std::uint64_t ny, std::uint64_t steps,
                              std::uint64_t seed) {
    const std::uint64_t w = nx * Q;
    std::vector<double> f(ny * w), g(ny * w);
    for (std::uint64_t y = 0; y < ny; ++y)
        initial_row(seed, nx, ny, y, &f[y * w]);
    for (std::uint64_t t = 0; t < steps; ++t) {
        for (std::uint64_t y = 0; y < ny; ++y)
            collide_row(nx, &f[y * w]);
        for (std::uint64_t y = 0; y < ny; ++y)
            stream_row(nx, &f[((y + ny - 1) % ny) * w], &f[y * w], &f[((y + 1) % ny) * w],
                       &g[y * w]);
        f.swap(g);
    }
    return f;
}

class Lbm {
  public:
    Lbm(Session& s, std::uint64_t nx, std::uint64_t ny, std::uint64_t seed)
        : s_(s), nx_(nx), ny_(ny), w_(nx * Q), y0_(bspapps::block_start(ny, s.nprocs(), s.pid())),
          rows_(bspapps::block_size(ny, s.nprocs(), s.pid())) {
        // Row 0 and row rows_ + 1 are the halos (global rows y0 - 1 and y0 + rows).
        for (auto& b : buf_) {
            b.assign((rows_ + 2) * w_, 0.0);
            bsp_push_reg(b.data(), bspapps::bsp_bytes(b.size() * sizeof(double), "bsp-lbm rows"));
        }
        for (std::uint64_t r = 0; r < rows_; ++r)
            initial_row(seed, nx_, ny_, y0_ + r, row(0, r + 1));
        int tag = sizeof(std::uint64_t);
        bsp_set_tagsize(&tag);
        s_.sync();
    }

    void run(std::uint64_t steps) {
        const int p = s_.nprocs(), me = s_.pid();
        const int up = (me + 1) % p, down = (me + p - 1) % p;
        const int rowbytes = bspapps::bsp_bytes(w_ * sizeof(double), "bsp-lbm row");
        const std::uint64_t down_rows = bspapps::block_size(ny_, p, down);
        for (std::uint64_t t = 0; t < steps; ++t) {
            const int cur = int(t % 2);
            for (std::uint64_t r = 1; r <= rows_; ++r)
                collide_row(nx_, row(cur, r));
            // My first row is the row above down's block; my last, the row below up's.
            bsp_put(down, row(cur, 1), buf_[cur].data(),
                    bspapps::bsp_bytes((down_rows + 1) * w_ * sizeof(double), "bsp-lbm offset"),
                    rowbytes);
            bsp_put(up, row(cur, rows_), buf_[cur].data(), 0, rowbytes);
            s_.sync();
            for (std::uint64_t r = 1; r <= rows_; ++r)
                stream_row(nx_, row(cur, r - 1), row(cur, r), row(cur, r + 1), row(1 - cur, r));
        }
        last_ = int(steps % 2);
    }

    // VP 0 receives every block and returns the whole lattice.
    std::vector<double> gather() {
        const double* mine = row(last_, 1);
        if (s_.pid() != 0)
            bsp_send(0, &y0_, mine, bspapps::bsp_bytes(rows_ * w_ * sizeof(double), "bsp-lbm"));
        s_.sync();
        if (s_.pid() != 0)
            return {};
        std::vector<double> all(ny_ * w_);
        std::memcpy(all.data(), mine, rows_ * w_ * sizeof(double));
        int count = 0, bytes = 0;
        bsp_qsize(&count, &bytes);
        if (count != s_.nprocs() - 1)
            bsp_abort("bsp-lbm: gather: %d blocks arrived, expected %d", count, s_.nprocs() - 1);
        for (int m = 0; m < count; ++m) {
            int size = 0;
            std::uint64_t y = 0;
            bsp_get_tag(&size, &y);
            if (size < 0 || y >= ny_ || std::uint64_t(size) > (ny_ - y) * w_ * sizeof(double) ||
                std::uint64_t(size) % (w_ * sizeof(double)) != 0)
                bsp_abort("bsp-lbm: gather: a block of %d bytes for row %llu does not fit "
                          "the %llu x %llu lattice",
                          size, (unsigned long long)y, (unsigned long long)nx_,
                          (unsigned long long)ny_);
            bsp_move(&all[y * w_], size);
        }
        return all;
    }

  private:
    double* row(int b, std::uint64_t r) { return buf_[b].data() + r * w_; }

    Session& s_;
    std::uint64_t nx_, ny_, w_, y0_, rows_;
    std::vector<double> buf_[2];
    int last_ = 0;
};

// The parameters: set by process 0's main(), sent to the others by Session.
struct Params {
    std::uint64_t nx = 0, ny = 0, steps = 0, seed = 1;
    bool fault = false, no_reference = false;
};
Params params;
int exit_status = 0; // process 0's

// The SPMD part: every process.
void spmd() {
    Session s("bsp-lbm", params);
    const auto [nx, ny, steps, seed, fault, no_reference] = params;
    if (ny < std::uint64_t(s.nprocs())) {
        if (s.pid() == 0)
            std::fprintf(stderr, "bsp-lbm: NY = %llu rows cannot be split over %d processes\n",
                         (unsigned long long)ny, s.nprocs());
        exit_status = 2;
        bsp_end();
        return;
    }
    Lbm lbm(s, nx, ny, seed);
    s.start_clock();
    lbm.run(steps);
    std::vector<double> all = lbm.gather();
    s.stop_clock();

    bool ok = true;
    std::string value, details, why;
    if (s.pid() == 0) {
        std::vector<double> initial(ny * nx * Q);
        for (std::uint64_t y = 0; y < ny; ++y)
            initial_row(seed, nx, ny, y, &initial[y * nx * Q]);
        if (fault)
            all[(ny / 2) * nx * Q + (nx / 2) * Q + 4] *= 1.0 + 1e-9;
        const double m0 = mass(nx, ny, initial.data()), m1 = mass(nx, ny, all.data());
        const double drift = std::fabs(m1 - m0) / m0;
        char buf[200];
        std::snprintf(buf, sizeof buf, "nx=%llu ny=%llu steps=%llu mass=%.17g drift=%.2e%s",
                      (unsigned long long)nx, (unsigned long long)ny, (unsigned long long)steps, m1,
                      drift, no_reference ? "" : " reference=identical");
        details = buf;
        value = bspapps::hex64(bspapps::fnv1a(std::as_bytes(std::span(all))));
        if (!(drift <= 1e-12)) {
            ok = false;
            std::snprintf(buf, sizeof buf,
                          "mass %.17g after %llu steps, %.17g at the start "
                          "(relative drift %.2e > 1e-12)",
                          m1, (unsigned long long)steps, m0, drift);
            why = buf;
        } else if (!no_reference) {
            const std::vector<double> ref = reference(nx, ny, steps, seed);
            for (std::uint64_t k = 0; k < ref.size() && ok; ++k)
                if (std::memcmp(&ref[k], &all[k], sizeof(double)) != 0) {
                    ok = false;
                    const std::uint64_t cell = k / Q;
                    std::snprintf(buf, sizeof buf,
                                  "f[%llu] of cell (x=%llu, y=%llu) is %.17g, the sequential run "
                                  "gives %.17g",
                                  (unsigned long long)(k % Q), (unsigned long long)(cell % nx),
                                  (unsigned long long)(cell / nx), all[k], ref[k]);
                    why = buf;
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
                 "bsp-lbm",
                 "2-D Lattice Boltzmann (D2Q9, BGK) with rows distributed and halo exchange",
                 "  Runs STEPS time steps of the D2Q9 lattice Boltzmann method with BGK\n"
                 "  collision (relaxation time 0.6) on an NX x NY lattice, periodic in both\n"
                 "  directions, from a density bump (from SEED) and a shear wave. The NY rows\n"
                 "  are split in contiguous blocks over the P processes (NY >= P). Each time\n"
                 "  step is one superstep: collide the own rows, bsp_put the first and last\n"
                 "  rows into the halo rows of the neighbours below and above (registered\n"
                 "  areas, two buffers alternating), sync, stream (pull) into the other\n"
                 "  buffer. STEPS + 4 supersteps in all (parameters, set-up, gather, verdict).",
                 "  VP 0 gathers the lattice (one bsp_send per process) and checks that the\n"
                 "  total mass equals the initial mass to 1e-12 (relative) and that the\n"
                 "  lattice is bit-identical to its own sequential run of the same steps\n"
                 "  (skipped with --no-reference).",
                 "the FNV-1a hash (16 hex digits) of the final lattice (doubles, row by\n"
                 "  row, nine directions per cell)",
                 "bsprun -n 4 bsp-lbm 256 128 100",
             });
    app.add_option("NX", params.nx, "Columns of the lattice.")
        ->required()
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 20));
    app.add_option("NY", params.ny, "Rows of the lattice (split over the processes; at least P).")
        ->required()
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 20));
    app.add_option("STEPS", params.steps, "Time steps (one superstep each).")
        ->required()
        ->check(CLI::Range(std::uint64_t(0), std::uint64_t(1) << 30));
    app.add_option("--seed", params.seed, "Seed of the initial density.")->capture_default_str();
    app.add_flag("--no-reference", params.no_reference,
                 "Skip VP 0's sequential reference run (the mass is still checked).");
    bspapps::add_fault_option(app, params.fault);
    if (auto status = bspapps::parse(app, argc, argv))
        return bspapps::stop(*status);
    spmd();
    return exit_status;
}
