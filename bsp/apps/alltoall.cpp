// SPDX-License-Identifier: GPL-2.0
// bsp-alltoall BYTES ROUNDS: total exchange, PUB's second application
// (Bonorden 2007, §5; sim/apps/alltoall.cpp). In every round (one superstep)
// every ordered pair of processes exchanges BYTES bytes three ways: the
// sender's bsp_put into a registered inbox (at its own slot), its bsp_send
// (tag: sender and round), and the receiver's bsp_get from the sender's
// registered outbox; with --hp, bsp_hpput, bsp_hpget and bsp_hpmove. Each
// copy is a pattern of sender, receiver, round, kind and position. Inbox and
// outbox have a half for even and one for odd rounds, so that unbuffered
// transfers, which may happen at any time up to the end of the sync, never
// touch what is being read or written in the same superstep. After the
// barrier every receiver checks every byte; VP 0 adds up the wrong bytes.
#include <cstdint>
#include <cstdio>
#include <cstring>
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

// What `from` sends `to` in `round` (kind 0: put, 1: send, 2: got by get).
void pattern(int from, int to, std::uint64_t round, int kind, std::uint8_t* out,
             std::uint64_t size) {
    const std::uint64_t key =
        bspapps::mix64((std::uint64_t(from) << 40) ^ (std::uint64_t(to) << 20) ^ (round << 1) ^
                       std::uint64_t(kind));
    for (std::uint64_t k = 0; k < size; k += 8) {
        const std::uint64_t word = bspapps::mix64(key + k);
        for (std::uint64_t b = 0; b < 8 && k + b < size; ++b)
            out[k + b] = std::uint8_t(word >> (8 * b));
    }
}

struct Counts {
    std::uint64_t wrong = 0, checked = 0;
};

class Exchange {
  public:
    Exchange(Session& s, std::uint64_t bytes, bool hp)
        : s_(s), bytes_(bytes), hp_(hp), p_(std::uint64_t(s.nprocs())), inbox_(2 * p_ * bytes),
          outbox_(2 * p_ * bytes), staged_(p_ * bytes), fetched_(p_ * bytes),
          counts_(std::size_t(p_)) {
        bsp_push_reg(inbox_.data(), bspapps::bsp_bytes(inbox_.size(), "bsp-alltoall inbox"));
        bsp_push_reg(outbox_.data(), bspapps::bsp_bytes(outbox_.size(), "bsp-alltoall outbox"));
        bsp_push_reg(counts_.data(), int(counts_.size() * sizeof(Counts)));
        int tag = sizeof(Tag);
        bsp_set_tagsize(&tag);
        offer(0);
        s_.sync();
    }

    void run(std::uint64_t rounds, bool fault) {
        const int p = s_.nprocs(), me = s_.pid();
        const int n = bspapps::bsp_bytes(bytes_, "bsp-alltoall message");
        std::vector<std::uint8_t> out(bytes_);
        for (std::uint64_t r = 0; r < rounds; ++r) {
            const std::uint64_t half = (r % 2) * p_ * bytes_; // this round's half
            for (int d = 0; d < p; ++d) {
                if (d == me)
                    continue;
                const int slot = bspapps::bsp_bytes(half + std::uint64_t(me) * bytes_, "offset");
                std::uint8_t* src = out.data();
                if (hp_) // hpput reads its source up to the end of the sync
                    src = &staged_[std::size_t(d) * bytes_];
                pattern(me, d, r, 0, src, bytes_);
                if (hp_)
                    bsp_hpput(d, src, inbox_.data(), slot, n);
                else
                    bsp_put(d, src, inbox_.data(), slot, n);
                pattern(me, d, r, 1, out.data(), bytes_); // bsp_send copies it
                const Tag t{me, std::int32_t(r)};
                bsp_send(d, &t, out.data(), n);
                std::uint8_t* dst = &fetched_[std::size_t(d) * bytes_];
                if (hp_)
                    bsp_hpget(d, outbox_.data(), slot, dst, n);
                else
                    bsp_get(d, outbox_.data(), slot, dst, n);
            }
            if (r + 1 < rounds)
                offer(r + 1); // the other half: nobody reads it in this superstep
            s_.sync();
            if (fault && r + 1 == rounds && me == p - 1 && p > 1)
                inbox_[half + bytes_ / 2] ^= 0x01; // a byte from process 0
            for (int from = 0; from < p; ++from) {
                if (from == me)
                    continue;
                check(from, r, 0, &inbox_[half + std::size_t(from) * bytes_]);
                check(from, r, 2, &fetched_[std::size_t(from) * bytes_]);
            }
            receive(r);
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
    // Writes into outbox half (r mod 2), slot d, what process d gets in round r.
    void offer(std::uint64_t r) {
        const int me = s_.pid();
        for (std::uint64_t d = 0; d < p_; ++d)
            if (d != std::uint64_t(me))
                pattern(me, int(d), r, 2, &outbox_[((r % 2) * p_ + d) * bytes_], bytes_);
    }

    void check(int from, std::uint64_t r, int kind, const std::uint8_t* got) {
        want_.resize(bytes_);
        pattern(from, s_.pid(), r, kind, want_.data(), bytes_);
        for (std::uint64_t k = 0; k < bytes_; ++k)
            wrong_ += got[k] != want_[k];
        checked_ += bytes_;
    }

    // The messages of round r: one from every other process, right tag and size.
    void receive(std::uint64_t r) {
        const int p = s_.nprocs(), me = s_.pid();
        std::vector<bool> seen(std::size_t(p), false);
        int count = 0, total = 0;
        bsp_qsize(&count, &total);
        if (count != p - 1)
            bsp_abort("bsp-alltoall: process %d, round %llu: %d messages arrived, expected %d", me,
                      (unsigned long long)r, count, p - 1);
        std::vector<std::uint8_t> got(bytes_);
        for (int m = 0; m < count; ++m) {
            int size = 0;
            Tag t{};
            const std::uint8_t* payload = got.data();
            if (hp_) {
                void *tp = nullptr, *pp = nullptr;
                size = bsp_hpmove(&tp, &pp);
                if (size >= 0)
                    std::memcpy(&t, tp, sizeof t);
                payload = static_cast<const std::uint8_t*>(pp);
            } else {
                bsp_get_tag(&size, &t);
            }
            if (t.from < 0 || t.from >= p || t.from == me || seen[std::size_t(t.from)] ||
                t.round != std::int32_t(r) || std::uint64_t(size) != bytes_)
                bsp_abort("bsp-alltoall: process %d, round %llu: unexpected message from "
                          "%d, round %d, %d bytes",
                          me, (unsigned long long)r, t.from, t.round, size);
            seen[std::size_t(t.from)] = true;
            if (!hp_)
                bsp_move(got.data(), size);
            check(t.from, r, 1, payload);
        }
    }

    Session& s_;
    std::uint64_t bytes_;
    bool hp_;
    std::uint64_t p_;
    // inbox_ and outbox_ have two halves, for even and odd rounds; slot i of
    // a half is for process i.
    std::vector<std::uint8_t> inbox_;   // what process i put here
    std::vector<std::uint8_t> outbox_;  // what process i gets from here
    std::vector<std::uint8_t> staged_;  // the sources of this round's hpputs
    std::vector<std::uint8_t> fetched_; // slot i: what this process got from i
    std::vector<std::uint8_t> want_;
    std::vector<Counts> counts_; // VP 0: every process's
    std::uint64_t wrong_ = 0, checked_ = 0;
};

// The parameters: set by process 0's main(), sent to the others by Session.
struct Params {
    std::uint64_t bytes = 0, rounds = 0;
    bool fault = false, hp = false;
};
Params params;
int exit_status = 0; // process 0's

// The SPMD part: every process.
void spmd() {
    Session s("bsp-alltoall", params);
    const auto [bytes, rounds, fault, hp] = params;
    Exchange x(s, bytes, hp);
    s.start_clock();
    x.run(rounds, fault);
    const Counts sum = x.gather();
    s.stop_clock();
    // Three copies from each of the P - 1 others, every round, on every process.
    const std::uint64_t p = std::uint64_t(s.nprocs());
    const std::uint64_t expected = 3 * bytes * rounds * p * (p - 1);
    const std::string details = "bytes=" + std::to_string(bytes) +
                                " rounds=" + std::to_string(rounds) +
                                " checked=" + std::to_string(sum.checked);
    std::string why = std::to_string(sum.wrong) + " bytes received differ from what was sent";
    if (sum.checked != expected)
        why = std::to_string(sum.checked) + " bytes were checked instead of " +
              std::to_string(expected);
    exit_status = s.finish(sum.wrong == 0 && sum.checked == expected, std::to_string(sum.wrong),
                           details, why);
}

} // namespace

int main(int argc, char** argv) {
    bsp_init(spmd, argc, argv);
    CLI::App app;
    bspapps::describe(
        app, {
                 "bsp-alltoall",
                 "total exchange by put, send and get, every byte checked",
                 "  ROUNDS supersteps in which every ordered pair of processes exchanges\n"
                 "  BYTES bytes three ways: the sender's bsp_put into slot pid of the\n"
                 "  receiver's registered inbox, its bsp_send with the tag (sender, round),\n"
                 "  and the receiver's bsp_get from slot pid of the sender's registered\n"
                 "  outbox (with --hp: bsp_hpput, bsp_hpget, and bsp_hpmove to read the\n"
                 "  messages). Inbox and outbox have a half for even and one for odd\n"
                 "  rounds (2 x P x BYTES bytes each), so unbuffered transfers never touch\n"
                 "  what is read or written in the same superstep. Each copy carries its\n"
                 "  own pattern, a function of sender, receiver, round, kind and position,\n"
                 "  so a byte that is lost, stale, misplaced or delivered to the wrong\n"
                 "  process is seen. ROUNDS + 4 supersteps in all (parameters, set-up, gather, "
                 "verdict).",
                 "  Every receiver compares every byte of the three copies with the pattern\n"
                 "  and checks that each other process's message came exactly once with the\n"
                 "  right tag and size (a violation aborts the job naming it); VP 0 adds up\n"
                 "  the wrong bytes, which must be 0, and the bytes checked, which must be\n"
                 "  3 x BYTES x ROUNDS x P x (P - 1).",
                 "the number of wrong bytes (0)",
                 "bsprun -n 8 bsp-alltoall 65536 100",
             });
    app.add_option("BYTES", params.bytes, "Bytes per message.")
        ->required()
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 28));
    app.add_option("ROUNDS", params.rounds, "Rounds (one superstep each).")
        ->required()
        ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 30));
    app.add_flag("--hp", params.hp,
                 "Unbuffered transfers: bsp_hpput from a buffer per destination, bsp_hpget, "
                 "and messages read with bsp_hpmove.");
    bspapps::add_fault_option(app, params.fault);
    if (auto status = bspapps::parse(app, argc, argv))
        return bspapps::stop(*status);
    spmd();
    return exit_status;
}
