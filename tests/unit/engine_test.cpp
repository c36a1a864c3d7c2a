#include <gtest/gtest.h>

#include <cerrno>

#include <linux/ghost.h>

#include "ghost/engine.hpp"
#include "ghost/kernel_engine.hpp"

namespace {

TEST(KernelEngine, MissingDeviceSaysModuleNotLoaded) {
    auto e = ghost::KernelEngine::open("/nonexistent/ghost");
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, std::errc::no_such_file_or_directory);
    EXPECT_NE(e.error().what().find("not loaded"), std::string::npos) << e.error().what();
}

TEST(KernelEngine, NonGhostDeviceIsRecognised) {
    // /dev/null opens but does not answer the version ioctl.
    auto e = ghost::KernelEngine::open("/dev/null");
    ASSERT_TRUE(e) << e.error().what();
    auto info = e->info();
    ASSERT_FALSE(info);
    EXPECT_EQ(info.error().code.value(), ENOTTY);
    EXPECT_NE(info.error().what().find("not a ghost device"), std::string::npos);
}

TEST(Engine, AutoFailsCleanlyWithoutModule) {
    auto e = ghost::Engine::open(ghost::EngineKind::Auto, "/nonexistent/ghost");
    ASSERT_FALSE(e);
    EXPECT_FALSE(e.error().what().empty());
}

TEST(Features, NamesKnownBitsInOrder) {
    const auto names =
        ghost::feature_names(GHOST_FEAT_EXPORT | GHOST_FEAT_BACKEND_FILE | GHOST_FEAT_EVENTS);
    EXPECT_EQ(names, (std::vector<std::string>{"export", "backend-file", "events"}));
}

TEST(Features, NamesUnknownBits) {
    const auto names = ghost::feature_names(GHOST_FEAT_IMPORT | (1ULL << 63));
    EXPECT_EQ(names, (std::vector<std::string>{"import", "unknown-bit-63"}));
}

TEST(Features, NoneIsEmpty) { EXPECT_TRUE(ghost::feature_names(0).empty()); }

TEST(Uapi, VersionStructLayoutIsStable) {
    // The published size and field offsets are ABI.
    EXPECT_EQ(sizeof(ghost_version), GHOST_VERSION_SIZE_VER0);
    EXPECT_EQ(offsetof(ghost_version, features), 24u);
    EXPECT_EQ(offsetof(ghost_version, resv), 32u);
}

} // namespace
