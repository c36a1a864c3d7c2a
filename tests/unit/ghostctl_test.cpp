#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

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

TEST(Ghostctl, EveryCommandHasHelp) {
    for (const char* cmd : {"check", "checkpoint", "restart", "dup", "inspect", "monitor"}) {
        const auto o = run({GHOSTCTL_PATH, cmd, "--help"});
        EXPECT_EQ(o.status, 0) << cmd;
        EXPECT_NE(o.out.find("Usage"), std::string::npos) << cmd << ": " << o.out;
    }
}

TEST(Ghostctl, CheckpointNeedsPidAndOutput) {
    EXPECT_EQ(run({GHOSTCTL_PATH, "checkpoint"}).status, 2);
    EXPECT_EQ(run({GHOSTCTL_PATH, "checkpoint", "123"}).status, 2);
    EXPECT_EQ(run({GHOSTCTL_PATH, "checkpoint", "-5", "-o", "x"}).status, 2);
    const auto both = run({GHOSTCTL_PATH, "checkpoint", "1", "-o", "/tmp/x", "--leave-running",
                           "--leave-stopped"});
    EXPECT_EQ(both.status, 2) << both.err;
}

TEST(Ghostctl, UnknownEngineIsRefusedWithTheChoices) {
    const auto o = run({GHOSTCTL_PATH, "--engine", "warp", "check"});
    EXPECT_EQ(o.status, 1);
    EXPECT_NE(o.err.find("auto or kernel"), std::string::npos) << o.err;
}

TEST(Ghostctl, CheckpointWithoutModuleLeavesNoFile) {
    const std::string out = testing::TempDir() + "ghostctl_nomodule.img";
    const auto o = run({GHOSTCTL_PATH, "--device", "/nonexistent/ghost", "checkpoint",
                        std::to_string(::getpid()), "-o", out});
    EXPECT_EQ(o.status, 1);
    EXPECT_NE(o.err.find("not loaded"), std::string::npos) << o.err;
    EXPECT_NE(::access(out.c_str(), F_OK), 0);
}

TEST(Ghostctl, InspectMissingFile) {
    const auto o = run({GHOSTCTL_PATH, "inspect", "/nonexistent/image"});
    EXPECT_EQ(o.status, 1);
    EXPECT_NE(o.err.find("cannot open /nonexistent/image"), std::string::npos) << o.err;
}

TEST(Ghostctl, InspectRefusesWhatIsNotAnImage) {
    const std::string path = testing::TempDir() + "ghostctl_garbage.img";
    {
        std::ofstream f(path, std::ios::binary);
        f << std::string(10000, 'x');
    }
    const auto o = run({GHOSTCTL_PATH, "inspect", path});
    EXPECT_EQ(o.status, 1);
    EXPECT_NE(o.err.find("not a ghost image"), std::string::npos) << o.err;
    std::remove(path.c_str());
}

TEST(Ghostctl, InspectRefusesATruncatedCompressedStream) {
    // A zstd frame header and nothing after it.
    const std::string path = testing::TempDir() + "ghostctl_trunc.zst";
    {
        std::ofstream f(path, std::ios::binary);
        f << std::string("\x28\xb5\x2f\xfd\x04\x58", 6);
    }
    const auto o = run({GHOSTCTL_PATH, "inspect", path});
    EXPECT_EQ(o.status, 1);
    EXPECT_EQ(o.err.rfind("ghostctl: ", 0), 0u) << o.err;
    std::remove(path.c_str());
}

} // namespace
