// SPDX-License-Identifier: GPL-2.0
// The shared helpers of the BSP applications (see common.hpp).
#include "common.hpp"

#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <bsp.h>

namespace bspapps {

std::uint64_t mix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

double unit(std::uint64_t key) {
    return double(mix64(key) >> 11) * 0x1.0p-53;
}

std::uint64_t Rng::next() {
    const std::uint64_t r = mix64(state_);
    state_ += 0x9e3779b97f4a7c15ULL;
    return r;
}

std::uint64_t Rng::below(std::uint64_t bound) {
    // Rejection keeps it uniform; bound is small in practice.
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    for (;;) {
        const std::uint64_t r = next();
        if (r < limit)
            return r % bound;
    }
}

std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t h) {
    for (std::byte b : bytes) {
        h ^= std::uint64_t(b);
        h *= 0x100000001b3ULL;
    }
    return h;
}

std::string hex64(std::uint64_t h) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
    return buf;
}

void describe(CLI::App& app, const Help& help) {
    app.name(std::string(help.name));
    app.description(std::string(help.summary) + "\n\nDESCRIPTION\n" +
                    std::string(help.description));
    app.footer("CHECK\n" + std::string(help.check) +
               "\n\nOUTPUT\n"
               "  Virtual processor 0 prints one line on standard output:\n"
               "    " +
               std::string(help.name) +
               ": value=VALUE [DETAILS] supersteps=S procs=P seconds=T\n"
               "  VALUE is " +
               std::string(help.value) +
               ";\n"
               "  it is the same whatever the number of processes and wherever they run.\n"
               "  S counts every bsp_sync, parameters, set-up and check included; T is\n"
               "  the time of"
               " the computation on VP 0 (bsp_time), the check excluded.\n"
               "\nEXIT STATUS\n"
               "  0 if the answer checked out, 1 if the check failed (VP 0 prints\n"
               "  \"" +
               std::string(help.name) +
               ": check failed: WHY\" on standard error and exits 1),\n"
               "  2 for a bad command line.\n"
               "\nNOTES\n"
               "  Uses only the BSPlib standard interface (bsp.h), structured as the\n"
               "  standard asks when the SPMD section is not the whole of main():\n"
               "  bsp_init() first, the arguments parsed by process 0, bsp_begin(\n"
               "  bsp_nprocs()) in the SPMD function, and process 0's parameters sent to\n"
               "  the others in the first superstep. Run it under bsprun -n P, or alone\n"
               "  (the runtime then starts as many processes as there are processors).\n"
               "\nEXAMPLE\n  " +
               std::string(help.example) + "\n");
}

std::optional<int> parse(CLI::App& app, int argc, char** argv) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "%s: %s\nRun with --help for the usage.\n", app.get_name().c_str(),
                     e.what());
        return 2;
    }
    return std::nullopt;
}

namespace {

// What process 0 sends every other process in superstep 1: whether to stop
// (an exit status, or -1 to run), then the parameters.
struct Header {
    int stop = -1;
};

} // namespace

int stop(int status) {
    bsp_begin(bsp_nprocs());
    const Header h{status};
    for (int p = 1; p < bsp_nprocs(); ++p)
        bsp_send(p, nullptr, &h, sizeof h);
    bsp_sync();
    bsp_end();
    return status;
}

Session::Session(std::string_view name, std::span<std::byte> params) : name_(name) {
    bsp_begin(bsp_nprocs());
    pid_ = bsp_pid();
    nprocs_ = bsp_nprocs();
    const int size = bsp_bytes(params.size(), "parameters");
    if (pid_ == 0) {
        std::vector<std::byte> message(sizeof(Header) + params.size());
        const Header h;
        std::memcpy(message.data(), &h, sizeof h);
        std::memcpy(message.data() + sizeof h, params.data(), params.size());
        for (int p = 1; p < nprocs_; ++p)
            bsp_send(p, nullptr, message.data(), int(message.size()));
    }
    sync();
    if (pid_ != 0) {
        int count = 0, bytes = 0, status = -1;
        bsp_qsize(&count, &bytes);
        char tag = 0; // the tag size is 0
        bsp_get_tag(&status, &tag);
        if (count != 1 || (status != int(sizeof(Header)) + size && status != int(sizeof(Header))))
            bsp_abort("%s: process %d: expected the parameters from process 0 (one message of "
                      "%d bytes), got %d messages, the first of %d bytes",
                      name_.c_str(), pid_, int(sizeof(Header)) + size, count, status);
        std::vector<std::byte> message(std::size_t(status), std::byte{0});
        bsp_move(message.data(), status);
        Header h;
        std::memcpy(&h, message.data(), sizeof h);
        if (h.stop >= 0) { // process 0 stopped at its command line
            bsp_end();
            std::exit(0); // only process 0 goes on after bsp_end
        }
        std::memcpy(params.data(), message.data() + sizeof h, params.size());
    }
    bsp_push_reg(&verdict_, sizeof verdict_);
    start_ = bsp_time();
}

void Session::sync() {
    bsp_sync();
    ++supersteps_;
}

void Session::start_clock() {
    start_ = bsp_time();
    stopped_ = -1.0;
}

void Session::stop_clock() {
    stopped_ = bsp_time();
}

double Session::seconds() const {
    return (stopped_ >= 0.0 ? stopped_ : bsp_time()) - start_;
}

int Session::finish(bool ok, std::string_view value, std::string_view details,
                    std::string_view why) {
    const double secs = seconds();
    if (pid_ == 0) {
        verdict_ = ok ? 1 : 2;
        for (int p = 1; p < nprocs_; ++p)
            bsp_put(p, &verdict_, &verdict_, 0, sizeof verdict_);
    }
    sync();
    if (verdict_ != 1 && verdict_ != 2)
        bsp_abort("%s: process %d received no verdict from process 0 (got %d)", name_.c_str(), pid_,
                  verdict_);
    if (pid_ == 0) {
        if (ok) {
            std::printf("%s: value=%.*s%s%.*s supersteps=%u procs=%d seconds=%.6f\n", name_.c_str(),
                        int(value.size()), value.data(), details.empty() ? "" : " ",
                        int(details.size()), details.data(), supersteps_, nprocs_, secs);
        } else {
            std::fprintf(stderr, "%s: check failed: %.*s\n", name_.c_str(), int(why.size()),
                         why.data());
        }
        std::fflush(stdout);
        std::fflush(stderr);
    }
    const int status = verdict_ == 1 ? 0 : 1;
    bsp_end(); // releases the registrations
    return status;
}

std::uint64_t block_size(std::uint64_t n, int p, int i) {
    const std::uint64_t q = n / std::uint64_t(p), r = n % std::uint64_t(p);
    return q + (std::uint64_t(i) < r ? 1 : 0);
}

std::uint64_t block_start(std::uint64_t n, int p, int i) {
    const std::uint64_t q = n / std::uint64_t(p), r = n % std::uint64_t(p);
    const std::uint64_t ui = std::uint64_t(i);
    return ui * q + (ui < r ? ui : r);
}

void add_fault_option(CLI::App& app, bool& flag) {
    app.add_flag("--inject-fault", flag,
                 "For tests of the check itself: change one element of the answer just "
                 "before it is checked; the check must then fail (exit status 1).");
}

int bsp_bytes(std::uint64_t nbytes, std::string_view what) {
    if (nbytes > std::uint64_t(INT_MAX))
        bsp_abort("%.*s: %" PRIu64 " bytes exceed what one BSPlib call carries (%d)",
                  int(what.size()), what.data(), nbytes, INT_MAX);
    return int(nbytes);
}

} // namespace bspapps
