// SPDX-License-Identifier: GPL-2.0
// The credential rules both engines share (common/ghost_creds.h).
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

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

// An image restored for its owner (migd's GHOST_IMPORT_OWNER) runs as
// that user and as nothing more: no capability of any set, inheritable
// included (raised on the exec of a file with inheritable capabilities,
// which no process of the user's could give itself).
TEST(CredsRules, AnOwnersImageHasNoCapabilityOfAnySet) {
    constexpr __u32 kUser = 1000;
    ghost_creds who{};
    who.uid = who.euid = who.suid = who.fsuid = kUser;
    who.gid = who.egid = who.sgid = who.fsgid = kUser;
    ghost_creds img = who;
    char reason[GHOST_REASON_LEN] = "";
    EXPECT_EQ(ghost_creds_of_owner(&img, nullptr, kUser, &who, nullptr, reason, sizeof(reason)), 0)
        << reason;
    for (__u64 ghost_creds::*set : {&ghost_creds::cap_permitted, &ghost_creds::cap_effective,
                                    &ghost_creds::cap_ambient, &ghost_creds::cap_inheritable}) {
        ghost_creds with = img;
        with.*set = 1ULL << 21; // CAP_SYS_ADMIN
        reason[0] = 0;
        EXPECT_EQ(
            ghost_creds_of_owner(&with, nullptr, kUser, &who, nullptr, reason, sizeof(reason)),
            -EPERM);
        EXPECT_NE(std::string(reason).find("capabilities"), std::string::npos) << reason;
    }
}

} // namespace
