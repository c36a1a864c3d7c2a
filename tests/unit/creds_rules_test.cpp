// SPDX-License-Identifier: GPL-2.0
// The credential rules both engines share (common/ghost_creds.h).
#include <gtest/gtest.h>

#include <linux/ghost.h>

#include "ghost_creds.h"

namespace {

// Supplementary groups compare as sets both ways: a list that names one
// group twice is not a caller's list that has another group instead (it
// would pass for "the same" and keep the caller's groups).
TEST(CredsRules, GroupListsAreTheSameOnlyAsSetsBothWays) {
    const __u32 twice[] = {4, 4}, four_six[] = {4, 6}, six_four[] = {6, 4};
    EXPECT_FALSE(ghost_creds_same_groups(twice, 2, four_six, 2));
    EXPECT_FALSE(ghost_creds_same_groups(four_six, 2, twice, 2));
    EXPECT_TRUE(ghost_creds_same_groups(four_six, 2, six_four, 2));
    EXPECT_FALSE(ghost_creds_same_groups(four_six, 2, six_four, 1));
    EXPECT_TRUE(ghost_creds_same_groups(nullptr, 0, nullptr, 0));
}

} // namespace
