// SPDX-License-Identifier: GPL-2.0
// What the BSP applications of bsp/apps/ share: command-line parsing with a
// man-page --help, a deterministic random-number generator, an FNV-1a hash of
// results, and the Session that starts the SPMD section, counts supersteps,
// and ends the job with one result line from VP 0 and the exit status of the
// application's own check on every process. Only bsp.h (standard BSPlib) is
// used, so the applications run on any BSPlib.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include <CLI/CLI.hpp>

namespace bspapps {

// --- deterministic numbers ---------------------------------------------------

// SplitMix64's finaliser: a good 64-bit mix of x.
std::uint64_t mix64(std::uint64_t x);

// A value in [0, 1) that depends only on key (53 random bits).
double unit(std::uint64_t key);

// A small sequential generator (SplitMix64).
class Rng {
  public:
    explicit Rng(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next();
    // Uniform in [0, bound), bound > 0.
    std::uint64_t below(std::uint64_t bound);

  private:
    std::uint64_t state_;
};

// FNV-1a (64 bit) over bytes, continued from h.
std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t h = 0xcbf29ce484222325ULL);
// The hash as 16 hex digits.
std::string hex64(std::uint64_t h);

// --- command line -----------------------------------------------------------

// A CLI11 parser for the application NAME with the usual sections of a manual
// page in its --help: DESCRIPTION (what it computes and how it is
// distributed), CHECK (how it checks its answer), and the result line and exit
// status that all applications share.
struct Help {
    std::string_view name;        // bsp-lu
    std::string_view summary;     // one line
    std::string_view description; // how it works, the BSP structure
    std::string_view check;       // what the self-check compares
    std::string_view value;       // what value= in the result line is
    std::string_view example;     // a command line with bsprun
};
void describe(CLI::App& app, const Help& help);

// Parses argv on process 0 (in main(), after bsp_init()). Returns the exit
// status when the program must stop here (--help: 0; a bad argument: 2,
// message on stderr): main() then returns stop(status).
std::optional<int> parse(CLI::App& app, int argc, char** argv);

// Process 0 ends the job before it started: it tells the other processes
// (which wait in Session's constructor) to end too, and returns status.
int stop(int status);

// --- the SPMD section -------------------------------------------------------

// The standard's program structure: main() calls bsp_init(spmd, argc, argv)
// first, parses its arguments into a plain struct, then calls spmd(); the
// other processes start in spmd() (with no arguments). spmd() constructs a
// Session, which starts the SPMD section on every processor available
// (bsp_begin), gives every process process 0's parameters (one bsp_send
// each: superstep 1), and keeps the count of supersteps and the time. The
// application then registers its areas, sets its tag size and calls sync().
class Session {
  public:
    Session(std::string_view name, std::span<std::byte> params);
    template <class Params>
    Session(std::string_view name, Params& params)
        : Session(name, std::as_writable_bytes(std::span(&params, 1))) {
        static_assert(std::is_trivially_copyable_v<Params>);
    }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    ~Session() = default;

    int pid() const { return pid_; }
    int nprocs() const { return nprocs_; }
    std::string_view name() const { return name_; }

    // bsp_sync(), counted.
    void sync();
    unsigned supersteps() const { return supersteps_; }

    // Starts (or restarts) the clock of the computation (after set-up).
    void start_clock();
    // Stops it (before the check); seconds() then stays put.
    void stop_clock();
    // Seconds since start_clock() (bsp_time on this process), up to
    // stop_clock() if it was called.
    double seconds() const;

    // Ends the job (collective). VP 0's verdict is broadcast (every process
    // returns the same status, whatever the BSPlib lets it do after
    // bsp_end): if ok, VP 0 prints
    //   NAME: value=VALUE DETAILS supersteps=S procs=P seconds=T
    // on stdout; otherwise it prints "NAME: check failed: WHY" on stderr.
    // Calls bsp_end(); returns the exit status for main (0 or 1). Only VP 0's
    // arguments are used.
    int finish(bool ok, std::string_view value, std::string_view details, std::string_view why);

  private:
    std::string name_;
    int pid_ = 0;
    int nprocs_ = 1;
    unsigned supersteps_ = 0;
    double start_ = 0.0;
    double stopped_ = -1.0;
    int verdict_ = 0; // registered: 1 = the check passed, 2 = it failed
};

// The size of a block when n items are split over p processes as evenly as
// possible (the first n mod p get one more), and where block i starts.
std::uint64_t block_size(std::uint64_t n, int p, int i);
std::uint64_t block_start(std::uint64_t n, int p, int i);

// The option every application has for its test: --inject-fault changes one
// element of the answer just before the check, which must then fail.
void add_fault_option(CLI::App& app, bool& flag);

// nbytes as the int that bsp.h takes; aborts the job (bsp_abort) naming what
// if it does not fit.
int bsp_bytes(std::uint64_t nbytes, std::string_view what);

} // namespace bspapps
