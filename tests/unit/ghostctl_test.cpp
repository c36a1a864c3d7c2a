// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ghost/image.hpp"
#include "subprocess.hpp"

namespace {

using testing_util::run;

TEST(Ghostctl, CheckWithoutModuleFailsWithOneLine) {
    const auto o =
        run({GHOSTCTL_PATH, "--engine", "kernel", "--device", "/nonexistent/ghost", "check"});
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
    const auto both = run(
        {GHOSTCTL_PATH, "checkpoint", "1", "-o", "/tmp/x", "--leave-running", "--leave-stopped"});
    EXPECT_EQ(both.status, 2) << both.err;
}

TEST(Ghostctl, CheckWithoutModuleNamesTheUserEngine) {
    const auto o = run({GHOSTCTL_PATH, "--device", "/nonexistent/ghost", "check"});
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_NE(o.out.find("user engine"), std::string::npos) << o.out;
}

TEST(Ghostctl, UnknownEngineIsRefusedWithTheChoices) {
    const auto o = run({GHOSTCTL_PATH, "--engine", "warp", "check"});
    EXPECT_EQ(o.status, 1);
    EXPECT_NE(o.err.find("auto, kernel or user"), std::string::npos) << o.err;
}

TEST(Ghostctl, CheckpointWithoutModuleLeavesNoFile) {
    const std::string out = testing::TempDir() + "ghostctl_nomodule.img";
    const auto o = run({GHOSTCTL_PATH, "--engine", "kernel", "--device", "/nonexistent/ghost",
                        "checkpoint", std::to_string(::getpid()), "-o", out});
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

TEST(Ghostctl, InspectDescribesARealImage) {
    const std::string img = std::string(GHOST_GOLDEN_DIR) + "/v1/counter.img";
    const auto o = run({GHOSTCTL_PATH, "inspect", img});
    ASSERT_EQ(o.status, 0) << o.err;
    for (const char* want :
         {"ghost-counter 50", "[heap]", "[stack]", "[vdso]", "libc.so.6", "descriptors", "signals"})
        EXPECT_NE(o.out.find(want), std::string::npos) << want << " in\n" << o.out;
}

// Both versions' DUP records name the descriptor they share: by pos in v1,
// by file id in v2; v2 lists its feature bits.
TEST(Ghostctl, InspectNamesSharedDescriptorsAndFeaturesInBothVersions) {
    for (const char* v : {"v1", "v2"}) {
        const std::string img =
            std::string(GHOST_GOLDEN_DIR) + "/" + v + "/user-workload-state.img";
        const auto o = run({GHOSTCTL_PATH, "inspect", img});
        ASSERT_EQ(o.status, 0) << o.err;
        EXPECT_NE(o.out.find("     2 dup      w         fd 1  /dev/null"), std::string::npos)
            << v << ":\n"
            << o.out;
        const bool v2 = std::string(v) == "v2";
        EXPECT_EQ(o.out.find("ghost image v2 (file ids, vDSO id)") != std::string::npos, v2)
            << o.out;
        const auto j = run({GHOSTCTL_PATH, "inspect", "--json", img});
        ASSERT_EQ(j.status, 0) << j.err;
        const auto doc = nlohmann::json::parse(j.out);
        EXPECT_EQ(doc["files"][2]["shares_fd"], 1);
        EXPECT_EQ(doc["features"], v2 ? 3 : 0);
        EXPECT_EQ(doc["vdso"]["size"] != 0, v2);
    }
}

TEST(Ghostctl, InspectJsonMatchesTheReader) {
    const std::string img = std::string(GHOST_GOLDEN_DIR) + "/v1/counter.img";
    const auto o = run({GHOSTCTL_PATH, "inspect", "--json", "--regs", img});
    ASSERT_EQ(o.status, 0) << o.err;
    const auto j = nlohmann::json::parse(o.out);

    std::ifstream f(img, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto decoded = ghost::image::read(std::as_bytes(std::span(raw)));
    ASSERT_TRUE(decoded) << decoded.error().what();
    EXPECT_EQ(j["bytes"], decoded->bytes);
    EXPECT_EQ(j["pages"], decoded->pages());
    ASSERT_EQ(j["vmas"].size(), decoded->vmas.size());
    for (std::size_t i = 0; i < decoded->vmas.size(); ++i) {
        EXPECT_EQ(j["vmas"][i]["start"], decoded->vmas[i].rec.start);
        EXPECT_EQ(j["vmas"][i]["pages"], decoded->vmas[i].rec.nr_pages);
        // data_offset points at the run's bytes in the file.
        for (const auto& r : j["vmas"][i]["runs"])
            EXPECT_EQ(r["data_offset"].get<std::uint64_t>() % 4096, 0u);
    }
    EXPECT_EQ(j["regs"]["rip"], decoded->regs.ip);
    EXPECT_EQ(j["files"].size(), decoded->files.size());
}

TEST(Ghostctl, InspectReadsCompressedImages) {
    const std::string img = std::string(GHOST_GOLDEN_DIR) + "/v1/counter.img";
    const std::string zst = testing::TempDir() + "ghostctl_counter.img.zst";
    ASSERT_EQ(std::system(("zstd -q -f -o " + zst + " " + img).c_str()), 0);
    const auto o = run({GHOSTCTL_PATH, "inspect", zst});
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_NE(o.out.find("(zstd,"), std::string::npos) << o.out;
    std::remove(zst.c_str());
}

} // namespace
