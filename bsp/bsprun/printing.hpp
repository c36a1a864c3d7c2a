// SPDX-License-Identifier: GPL-2.0
// bsprun's printing wrappers: a one-host mover that prints every move
// (--migrate-every), and a barrier hook that prints every barrier's
// statistics (--verbose) before the inner hook decides.
#pragma once

#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hub.hpp"
#include "migrate.hpp"

namespace ghost::bsp {

// "N instructions", or why they were not counted.
inline std::string instructions_text(const VpStats& s) {
    if (s.instructions_errno == 0)
        return fmt::format("{} instructions", s.instructions);
    return fmt::format("instructions not counted: perf_event_open: {}",
                       std::strerror(s.instructions_errno));
}

class PrintingMover final : public Mover {
  public:
    PrintingMover(LocalMover& m, unsigned every) : m_(m), every_(every) {}
    Result<pid_t> move(int vp, pid_t pid, std::uint64_t superstep) override {
        auto r = m_.move(vp, pid, superstep);
        if (r)
            std::fprintf(stderr,
                         "bsprun: end of superstep %llu: vp %d moved, pid %d -> %d "
                         "(forced: --migrate-every %u)\n",
                         static_cast<unsigned long long>(superstep), vp, pid, *r, every_);
        else
            std::fprintf(stderr,
                         "bsprun: end of superstep %llu: moving vp %d (pid %d) failed: %s; it "
                         "continues where it is\n",
                         static_cast<unsigned long long>(superstep), vp, pid,
                         r.error().what().c_str());
        return r;
    }

  private:
    LocalMover& m_;
    unsigned every_;
};

// --verbose: every barrier's statistics, then the moves of the inner hook.
class VerboseHook final : public BarrierHook {
  public:
    VerboseHook(BarrierHook& inner, bool verbose) : inner_(inner), verbose_(verbose) {}
    std::vector<int> barrier(std::uint64_t superstep, std::span<const VpStats> stats) override {
        if (verbose_)
            for (const auto& s : stats)
                std::fprintf(stderr,
                             "bsprun: superstep %llu: vp %d pid %d computed %.6f s "
                             "(cpu %.6f s, %s), sent %llu bytes, resident %s\n",
                             static_cast<unsigned long long>(superstep), s.vp, s.pid, s.comp_wall,
                             s.comp_cpu, instructions_text(s).c_str(),
                             static_cast<unsigned long long>(s.bytes_sent),
                             s.memory_bytes ? fmt::format("{} bytes", s.memory_bytes).c_str()
                                            : "unknown");
        return inner_.barrier(superstep, stats);
    }

  private:
    BarrierHook& inner_;
    bool verbose_;
};

} // namespace ghost::bsp
