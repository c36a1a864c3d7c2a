// SPDX-License-Identifier: GPL-2.0
// bsp-alltoall BYTES ROUNDS: total exchange, PUB's second application
// (Bonorden 2007, §5; sim/apps/alltoall.cpp). In every round (one superstep)
// each process sends every other process BYTES bytes twice: once with
// bsp_put into a registered area (at its own slot) and once with bsp_send
// (tag: sender and round), each copy a pattern that depends on sender,
// receiver, round, kind and position. After the barrier every receiver checks
// every byte of both; VP 0 adds up the wrong bytes of all processes.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <bsp.h>

#include "common.hpp"

namespace {

using bspapps::Session;

struct Tag {
    std::int32_t from;
    std::int32_t round;
};

// Byte k of what `from` sends `to` in `round` (kind 0: put, 1: send).
void pattern(int from, int to, std::uint64_t round, int kind, std::vector<std::uint8_t>& out) {
    const std::uint64_t key =
        bspapps::mix64((std::uint64_t(from) << 40) ^ (std::uint64_t(to) << 20) ^ (round << 1) ^
                       std::uint64_t(kind));
    for (std::size_t k = 0; k < out.size(); k += 8) {
        const std::uint64_t word = bspapps::mix64(key + k);
        for (std::size_t b = 0; b < 8 && k + b < out.size(); ++b)
            out[k + b] = std::uint8_t(word >> (8 * b));
    }
}

std::uint64_t wrong_bytes(const std::uint8_t* got, const std::vector<std::uint8_t>& want) {
    std::uint64_t wrong = 0;
    for (std::size_t k = 0; k < want.size(); ++k)
        wrong += got[k] != want[k];
    return wrong;
}

struct Counts {
    std::uint64_t wrong = 0, checked = 0;
};

class Exchange {
  public:
    Exchange(Session& s, std::uint64_t bytes)
        : s_(s), bytes_(bytes), area_(bytes * std::uint64_t(s.nprocs())),
          counts_(std::size_t(s.nprocs())) {
        bsp_push_reg(area_.data(), bspapps::bsp_bytes(area_.size(), "bsp-alltoall area"));
        bsp_push_reg(counts_.data(), int(counts_.size() * sizeof(Counts)));
        int tag = sizeof(Tag);
        bsp_set_tagsize(&tag);
        s_.sync();
    }

    void run(std::uint64_t rounds, bool fault) {
        const int p = s_.nprocs(), me = s_.pid();
        const int n = bspapps::bsp_bytes(bytes_, "bsp-alltoall message");
        std::vector<std::uint8_t> out(bytes_), want(bytes_), got(bytes_);
        for (std::uint64_t r = 0; r < rounds; ++r) {
            for (int d = 0; d < p; ++d) {
                if (d == me)
                    continue;
                pattern(me, d, r, 0, out);
                bsp_put(d, out.data(), area_.data(), int(std::uint64_t(me) * bytes_), n);
                pattern(me, d, r, 1, out); // bsp_put copied it already
                const Tag t{me, std::int32_t(r)};
                bsp_send(d, &t, out.data(), n);
            }
            s_.sync();
            if (fault && r + 1 == rounds && me == p - 1 && p > 1 && bytes_ > 0)
                area_[bytes_ / 2] ^= 0x01; // a byte from process 0
            for (int from = 0; from < p; ++from) {
                if (from == me)
                    continue;
                pattern(from, me, r, 0, want);
                wrong_ += wrong_bytes(&area_[std::size_t(from) * bytes_], want);
                checked_ += bytes_;
            }
            std::vector<bool> seen(std::size_t(p), false);
            int count = 0, total = 0;
            bsp_qsize(&count, &total);
            if (count != p - 1)
                bsp_abort("bsp-alltoall: process %d, round %llu: %d messages arrived, expected "
                          "%d",
                          me, (unsigned long long)r, count, p - 1);
            for (int m = 0; m < count; ++m) {
                int size = 0;
                Tag t{};
                bsp_get_tag(&size, &t);
                if (t.from < 0 || t.from >= p || t.from == me || seen[std::size_t(t.from)] ||
                    t.round != std::int32_t(r) || size != n)
                    bsp_abort("bsp-alltoall: process %d, round %llu: unexpected message from "
                              "%d, round %d, %d bytes",
                              me, (unsigned long long)r, t.from, t.round, size);
                seen[std::size_t(t.from)] = true;
                bsp_move(got.data(), n);
                pattern(t.from, me, r, 1, want);
                wrong_ += wrong_bytes(got.data(), want);
                checked_ += bytes_;
            }
        }
    }

    // VP 0 gets every process's count of wrong and checked bytes and adds
    // them up.
    Counts gather() {
        const Counts mine{wrong_, checked_};
        bsp_put(0, &mine, counts_.data(), int(std::size_t(s_.pid()) * sizeof(Counts)),
                sizeof(Counts));
        s_.sync();
        Counts sum;
        for (const Counts& c : counts_)
            sum.wrong += c.wrong, sum.checked += c.checked;
        return sum;
    }

  private:
    Session& s_;
    std::uint64_t bytes_;
    std::vector<std::uint8_t> area_; // slot i: what process i put here
    std::vector<Counts> counts_;     // VP 0: every process's
    std::uint64_t wrong_ = 0, checked_ = 0;
};

} // namespace

int main(int argc, char** argv) {
    std::uint64_t bytes = 0, rounds = 0;
    bool fault = false;
    CLI::App app;
    bspapps::describe(
        app, {
                 "bsp-alltoall",
                 "total exchange with bsp_put and bsp_send, every byte checked",
                 "  ROUNDS supersteps in which every process sends every other process\n"
                 "  BYTES bytes twice: by bsp_put into slot pid of a registered area of\n"
                 "  P x BYTES bytes on the receiver, and by bsp_send with the tag (sender,\n"
                 "  round). Each copy carries its own pattern, a function of sender,\n"
                 "  receiver, round, kind and position, so a byte that is lost, stale,\n"
                 "  misplaced or delivered to the wrong process is seen. ROUNDS + 3\n"
                 "  supersteps in all (set-up, gather, verdict).",
                 "  Every receiver compares every byte of both copies with the pattern and\n"
                 "  checks that each other process's message came exactly once with the\n"
                 "  right tag and size (a violation aborts the job naming it); VP 0 adds up\n"
                 "  the wrong bytes, which must be 0.",
                 "the number of wrong bytes (0)",
                 "bsprun -n 8 bsp-alltoall 65536 100",
             });
    app.add_option("BYTES", bytes, "Bytes per message.")
        ->required()
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 28));
    app.add_option("ROUNDS", rounds, "Rounds (one superstep each).")
        ->required()
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 30));
    bspapps::add_fault_option(app, fault);
    if (auto status = bspapps::parse(app, argc, argv))
        return *status;

    Session s("bsp-alltoall");
    Exchange x(s, bytes);
    s.start_clock();
    x.run(rounds, fault);
    const Counts sum = x.gather();
    s.stop_clock();
    // Both copies from each of the P - 1 others, every round, on every process.
    const std::uint64_t p = std::uint64_t(s.nprocs());
    const std::uint64_t expected = 2 * bytes * rounds * p * (p - 1);
    const std::string details = "bytes=" + std::to_string(bytes) +
                                " rounds=" + std::to_string(rounds) +
                                " checked=" + std::to_string(sum.checked);
    std::string why = std::to_string(sum.wrong) + " bytes received differ from what was sent";
    if (sum.checked != expected)
        why = std::to_string(sum.checked) + " bytes were checked instead of " +
              std::to_string(expected);
    return s.finish(sum.wrong == 0 && sum.checked == expected, std::to_string(sum.wrong), details,
                    why);
}
