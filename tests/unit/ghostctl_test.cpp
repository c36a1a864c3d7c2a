#include <gtest/gtest.h>

#include <algorithm>

#include "subprocess.hpp"

namespace {

using testing_util::run;

TEST(Ghostctl, CheckWithoutModuleFailsWithOneLine) {
    const auto o = run({GHOSTCTL_PATH, "--device", "/nonexistent/ghost", "check"});
    EXPECT_EQ(o.status, 1);
    EXPECT_TRUE(o.out.empty()) << o.out;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(o.err.rfind("ghostctl: ", 0), 0u) << o.err;
    EXPECT_NE(o.err.find("not loaded"), std::string::npos) << o.err;
}

TEST(Ghostctl, UnknownCommandIsUsageError) {
    const auto o = run({GHOSTCTL_PATH, "frobnicate"});
    EXPECT_EQ(o.status, 2);
    EXPECT_NE(o.err.find("--help"), std::string::npos) << o.err;
}

TEST(Ghostctl, HelpDescribesCheck) {
    const auto o = run({GHOSTCTL_PATH, "--help"});
    EXPECT_EQ(o.status, 0);
    EXPECT_NE(o.out.find("check"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("Exit status"), std::string::npos) << o.out;
}

} // namespace
