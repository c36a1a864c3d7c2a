// SPDX-License-Identifier: GPL-2.0
// bsp_time across a move (bsp/lib/clock.hpp): the elapsed time continues on
// a machine whose monotonic clock is far ahead or behind, adds the time the
// VP was detached, and never goes back.
#include <gtest/gtest.h>

#include "clock.hpp"

using ghost::bsp::vp::continued_t0;
using ghost::bsp::vp::Moment;

namespace {

// bsp_time at `at` after a move: at.mono - the new t0.
double elapsed(double t0, Moment before, Moment after, double at) {
    return at - continued_t0(t0, before, after);
}

} // namespace

TEST(BspClock, SameMachineKeepsTheStart) {
    // 50 s after bsp_begin (t0 = 100), detached for 2 s on one machine.
    EXPECT_DOUBLE_EQ(continued_t0(100, {150, 1e9}, {152, 1e9 + 2}), 100);
}

TEST(BspClock, AMachineBootedLongerAgoDoesNotAddItsUptime) {
    // Moved to a machine up for 5000 s: 50 s elapsed + 2 s detached.
    EXPECT_DOUBLE_EQ(elapsed(100, {150, 1e9}, {5000, 1e9 + 2}, 5000), 52);
    EXPECT_DOUBLE_EQ(elapsed(100, {150, 1e9}, {5000, 1e9 + 2}, 5010), 62);
}

TEST(BspClock, AMachineBootedLaterDoesNotGoBack) {
    // The new machine's monotonic clock reads 3 s: less than t0 was.
    EXPECT_DOUBLE_EQ(elapsed(100, {150, 1e9}, {3, 1e9 + 0.5}, 3), 50.5);
}

TEST(BspClock, AWallClockSetBackCountsAsNoTime) {
    EXPECT_DOUBLE_EQ(elapsed(100, {150, 1e9}, {7, 1e9 - 30}, 7), 50);
}
