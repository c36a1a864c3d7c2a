// SPDX-License-Identifier: GPL-2.0
// bsprun --record FILE: what every VP reported at every barrier, one JSON
// object per line, for ghost-sim to replay the job on a simulated platform
// (sim/apps/replay.cpp; bench/bsp_cluster_bench --sim):
//   {"superstep":S,"cpu":[...],"wall":[...],"memory":[...],"from":[[...],...]}
// per VP its CPU and wall seconds of computation, its resident bytes (0:
// not sampled at this barrier) and from[v][u], the bytes VP v received
// from VP u at this barrier.
#pragma once

#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ghost/result.hpp"
#include "hub.hpp"

namespace ghost::bsp {

class RecordHook final : public BarrierHook {
  public:
    // Creates (truncates) path, before the job starts.
    static Result<RecordHook> open(const std::string& path);
    // inner decides what moves, as without the recording.
    void wrap(BarrierHook& inner) { inner_ = &inner; }
    RecordHook(RecordHook&&) = default;
    RecordHook& operator=(RecordHook&&) = delete;
    std::vector<int> barrier(std::uint64_t superstep, std::span<const VpStats> stats) override;
    // Flushes the file: false (and a message) if something was not written.
    bool close();
    ~RecordHook() override { close(); }

  private:
    struct FileClose {
        void operator()(std::FILE* f) const { std::fclose(f); }
    };
    RecordHook(std::unique_ptr<std::FILE, FileClose> f, std::string path)
        : file_(std::move(f)), path_(std::move(path)) {}
    std::unique_ptr<std::FILE, FileClose> file_;
    std::string path_;
    BarrierHook* inner_ = nullptr;
    std::string line_; // reused
};

} // namespace ghost::bsp
