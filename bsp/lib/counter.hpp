// SPDX-License-Identifier: GPL-2.0
// The instructions a virtual processor executes in user mode during a
// superstep's computation, counted with perf_event_open(2) where the kernel
// and the machine allow it (a hardware counter, perf_event_paranoid), for
// the balancing policies' P_comp. Where they do not (no PMU in a VM,
// paranoid 3), the hub falls back to CPU time; the reason is sent along.
//
// The counter is open only while the VP computes: bsp_sync reads and closes
// it before anything else, so a VP that is migrated or checkpointed inside
// bsp_sync holds no perf descriptor (the engines do not carry one), and
// opens a new one when the sync returns.
#pragma once

#include <cstdint>

namespace ghost::bsp::vp {

class InstructionCounter {
  public:
    InstructionCounter() = default;
    InstructionCounter(const InstructionCounter&) = delete;
    InstructionCounter& operator=(const InstructionCounter&) = delete;
    ~InstructionCounter();

    // Starts counting from zero (nothing once the kernel refused).
    void start();
    // What was counted since start(), and closes the counter.
    struct Count {
        std::uint64_t instructions = 0;
        int error = 0; // the errno perf_event_open (or read) failed with; 0: counted
    };
    Count stop();

  private:
    int fd_ = -1;
    int refused_ = 0; // the first failure's errno: not tried again
};

} // namespace ghost::bsp::vp
