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
    // User-mode instructions (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS).
    InstructionCounter() = default;
    // Another perf event of the same lifecycle (type and config as in
    // perf_event_attr): tests count a software event where no PMU exists.
    InstructionCounter(std::uint32_t type, std::uint64_t config) : type_(type), config_(config) {}
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

    // Whether a counter is open now (between start() and stop()).
    bool open() const { return fd_ >= 0; }

  private:
    std::uint32_t type_ = 0;   // PERF_TYPE_HARDWARE
    std::uint64_t config_ = 1; // PERF_COUNT_HW_INSTRUCTIONS
    int fd_ = -1;
    int refused_ = 0; // the first failure's errno: not tried again
};

} // namespace ghost::bsp::vp
