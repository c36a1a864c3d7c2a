// SPDX-License-Identifier: GPL-2.0
// bsp-sw LEN_A LEN_B: the Smith-Waterman local alignment score of two DNA
// sequences, computed by anti-diagonal wavefronts as in MigBSP (Righi et al.
// 2010, §5.2; sim/apps/sw.cpp): the LEN_A x LEN_B matrix is cut into n x n
// tiles (n = --blocks, by default the number of processes: one column block
// per process as in the paper), column block y belongs to process y mod P,
// and superstep d (0 .. 2n-2) computes the tiles (x, y) with x + y = d. After
// computing a tile its owner sends the tile's last column (bsp_send) to the
// owner of column block y + 1, which needs it in superstep d + 1.
// The score is an integer; VP 0 checks it against a sequential run.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <bsp.h>

#include "common.hpp"

namespace {

using bspapps::Session;

constexpr int match = 3, mismatch = -3, gap = 2; // linear gap penalty

std::string sequence(std::uint64_t seed, std::uint64_t length) {
    bspapps::Rng rng(seed);
    std::string s(length, 'A');
    for (char& c : s)
        c = "ACGT"[rng.below(4)];
    return s;
}

int score(char a, char b) {
    return a == b ? match : mismatch;
}

// The sequential reference: two rows of the matrix.
int sequential(const std::string& a, const std::string& b) {
    std::vector<int> prev(b.size() + 1, 0), cur(b.size() + 1, 0);
    int best = 0;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = 0;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            cur[j] = std::max(
                {0, prev[j - 1] + score(a[i - 1], b[j - 1]), prev[j] - gap, cur[j - 1] - gap});
            best = std::max(best, cur[j]);
        }
        prev.swap(cur);
    }
    return best;
}

struct Tag {
    std::int32_t block;  // the column block the column is for
    std::int32_t xblock; // the row block it covers
};

// One column block owned by this process.
struct Column {
    std::uint64_t y = 0, start = 0, width = 0;
    std::vector<int> top;  // H(r - 1, start + j): the row above the next tile
    std::vector<int> left; // left[r + 1] = H(r, start - 1); left[0] = 0
};

class Sw {
  public:
    Sw(Session& s, std::string a, std::string b, std::uint64_t blocks)
        : s_(s), a_(std::move(a)), b_(std::move(b)), n_(blocks),
          best_all_(std::size_t(s.nprocs())) {
        for (std::uint64_t y = std::uint64_t(s.pid()); y < n_; y += std::uint64_t(s.nprocs())) {
            Column c;
            c.y = y;
            c.start = bspapps::block_start(b_.size(), int(n_), int(y));
            c.width = bspapps::block_size(b_.size(), int(n_), int(y));
            c.top.assign(c.width, 0);
            c.left.assign(a_.size() + 1, 0);
            cols_.push_back(std::move(c));
        }
        bsp_push_reg(best_all_.data(), int(best_all_.size() * sizeof(int)));
        int tag = sizeof(Tag);
        bsp_set_tagsize(&tag);
        s_.sync();
    }

    // The 2n - 1 wavefront supersteps; returns this process's best cell.
    void run() {
        for (std::uint64_t d = 0; d + 1 < 2 * n_; ++d) {
            receive();
            for (Column& c : cols_)
                if (d >= c.y && d - c.y < n_)
                    tile(d - c.y, c);
            s_.sync();
        }
    }

    // VP 0 gets every process's best and returns the maximum (others: -1).
    int gather() {
        bsp_put(0, &best_, best_all_.data(), int(std::size_t(s_.pid()) * sizeof(int)), sizeof(int));
        s_.sync();
        return s_.pid() == 0 ? *std::max_element(best_all_.begin(), best_all_.end()) : -1;
    }

  private:
    Column* find(std::uint64_t y) {
        for (Column& c : cols_)
            if (c.y == y)
                return &c;
        return nullptr;
    }

    // The last columns that the owners of the blocks on the left sent.
    void receive() {
        int count = 0, bytes = 0;
        bsp_qsize(&count, &bytes);
        for (int m = 0; m < count; ++m) {
            int size = 0;
            Tag t{};
            bsp_get_tag(&size, &t);
            Column* c = t.block >= 0 ? find(std::uint64_t(t.block)) : nullptr;
            const std::uint64_t xs = bspapps::block_start(a_.size(), int(n_), t.xblock);
            const std::uint64_t h = bspapps::block_size(a_.size(), int(n_), t.xblock);
            if (!c || t.xblock < 0 || std::uint64_t(t.xblock) >= n_ ||
                std::uint64_t(size) != h * sizeof(int))
                bsp_abort("bsp-sw: process %d: a column for block %d, row block %d, of %d "
                          "bytes is not for it",
                          s_.pid(), t.block, t.xblock, size);
            bsp_move(&c->left[xs + 1], size);
        }
    }

    // Computes tile (x, c.y) and passes its last column on.
    void tile(std::uint64_t x, Column& c) {
        const std::uint64_t xs = bspapps::block_start(a_.size(), int(n_), int(x));
        const std::uint64_t h = bspapps::block_size(a_.size(), int(n_), int(x));
        std::vector<int> last(h);
        for (std::uint64_t r = xs; r < xs + h; ++r) {
            int diag = c.left[r];     // H(r - 1, start - 1)
            int west = c.left[r + 1]; // H(r, start - 1)
            for (std::uint64_t j = 0; j < c.width; ++j) {
                const int north = c.top[j];
                const int v =
                    std::max({0, diag + score(a_[r], b_[c.start + j]), north - gap, west - gap});
                diag = north;
                c.top[j] = v;
                west = v;
                best_ = std::max(best_, v);
            }
            last[r - xs] = west;
        }
        if (c.y + 1 >= n_)
            return;
        const int owner = int((c.y + 1) % std::uint64_t(s_.nprocs()));
        if (owner == s_.pid()) {
            std::copy(last.begin(), last.end(),
                      find(c.y + 1)->left.begin() + std::ptrdiff_t(xs + 1));
        } else {
            const Tag t{std::int32_t(c.y + 1), std::int32_t(x)};
            bsp_send(owner, &t, last.data(), int(h * sizeof(int)));
        }
    }

    Session& s_;
    std::string a_, b_;
    std::uint64_t n_;
    std::vector<Column> cols_;
    std::vector<int> best_all_;
    int best_ = 0;
};

// The parameters: set by process 0's main(), sent to the others by Session.
struct Params {
    std::uint64_t len_a = 0, len_b = 0, seed = 1, blocks = 0;
    bool fault = false, no_reference = false;
};
Params params;
int exit_status = 0; // process 0's

// The SPMD part: every process.
void spmd() {
    Session s("bsp-sw", params);
    const auto [len_a, len_b, seed, blocks, fault, no_reference] = params;
    const std::uint64_t n = blocks ? blocks : std::uint64_t(s.nprocs());
    if (n > len_a || n > len_b) {
        if (s.pid() == 0)
            std::fprintf(stderr, "bsp-sw: %llu tiles per side do not fit a %llu x %llu matrix\n",
                         (unsigned long long)n, (unsigned long long)len_a,
                         (unsigned long long)len_b);
        exit_status = 2;
        bsp_end();
        return;
    }
    const std::string a = sequence(bspapps::mix64(seed), len_a);
    const std::string b = sequence(bspapps::mix64(seed + 1), len_b);
    Sw sw(s, a, b, n);
    s.start_clock();
    sw.run();
    int best = sw.gather();
    s.stop_clock();

    bool ok = true;
    std::string value, details, why;
    if (s.pid() == 0) {
        if (fault)
            best += 1;
        value = std::to_string(best);
        details = "len_a=" + std::to_string(len_a) + " len_b=" + std::to_string(len_b) +
                  " blocks=" + std::to_string(n);
        const int bound = match * int(std::min(len_a, len_b));
        if (best < 0 || best > bound) {
            ok = false;
            why = "score " + std::to_string(best) + " outside 0.." + std::to_string(bound);
        } else if (!no_reference) {
            const int ref = sequential(a, b);
            details += " reference=" + std::to_string(ref);
            if (ref != best) {
                ok = false;
                why = "score " + std::to_string(best) + ", the sequential run gives " +
                      std::to_string(ref);
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
                 "bsp-sw",
                 "Smith-Waterman local alignment score by wavefront supersteps (MigBSP's SW)",
                 "  Computes the best local alignment score of two random DNA sequences\n"
                 "  (A of LEN_A, B of LEN_B letters from SEED; match +3, mismatch -3, gap\n"
                 "  -2, linear). The LEN_A x LEN_B matrix is cut into n x n tiles, n =\n"
                 "  --blocks (default: the number of processes, one column block each as in\n"
                 "  the paper); column block y belongs to process y mod P. Superstep d =\n"
                 "  0 .. 2n-2 computes the anti-diagonal of tiles x + y = d: 2n-1 wavefront\n"
                 "  supersteps, the work rising then falling along them. A tile's last column\n"
                 "  goes to the owner of the next column block by bsp_send (tag: block and\n"
                 "  row block). 2n+3 supersteps in all (parameters, set-up, gather, verdict).",
                 "  VP 0 takes the maximum of the processes' best cells (bsp_put) and compares\n"
                 "  it with its own sequential run over the whole matrix (--no-reference\n"
                 "  skips it and checks nothing but the score's range).",
                 "the score (an integer)",
                 "bsprun -n 4 bsp-sw 2000 2000 --blocks 8",
             });
    app.add_option("LEN_A", params.len_a, "Length of the first sequence (rows).")
        ->required()
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 24));
    app.add_option("LEN_B", params.len_b, "Length of the second sequence (columns).")
        ->required()
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 24));
    app.add_option("--blocks", params.blocks,
                   "Tiles per side n (2n-1 wavefront supersteps); at most LEN_A and LEN_B. "
                   "Default: the number of processes.")
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 20));
    app.add_option("--seed", params.seed, "Seed of the sequences.")->capture_default_str();
    app.add_flag("--no-reference", params.no_reference, "Skip VP 0's sequential run.");
    bspapps::add_fault_option(app, params.fault);
    if (auto status = bspapps::parse(app, argc, argv))
        return bspapps::stop(*status);
    spmd();
    return exit_status;
}
