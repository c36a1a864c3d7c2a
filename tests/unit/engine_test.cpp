// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include <cerrno>

#include <linux/ghost.h>

#include "ghost/engine.hpp"
#include "ghost/kernel_engine.hpp"
#include "ghost/process.hpp"

#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <vector>

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

TEST(Engine, AutoPicksTheUserEngineWithoutModule) {
    auto e = ghost::Engine::open(ghost::EngineKind::Auto, "/nonexistent/ghost");
    ASSERT_TRUE(e) << e.error().what();
    EXPECT_EQ((*e)->name(), "user");
}

TEST(Engine, KernelWithoutModuleFailsCleanly) {
    auto e = ghost::Engine::open(ghost::EngineKind::Kernel, "/nonexistent/ghost");
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().what().find("not loaded"), std::string::npos) << e.error().what();
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

TEST(Features, NoneIsEmpty) {
    EXPECT_TRUE(ghost::feature_names(0).empty());
}

TEST(Uapi, VersionStructLayoutIsStable) {
    // The published size and field offsets are ABI.
    EXPECT_EQ(sizeof(ghost_version), GHOST_VERSION_SIZE_VER0);
    EXPECT_EQ(offsetof(ghost_version, features), 24u);
    EXPECT_EQ(offsetof(ghost_version, resv), 32u);
}

TEST(Engine, ParsesKinds) {
    EXPECT_EQ(*ghost::parse_engine_kind("auto"), ghost::EngineKind::Auto);
    EXPECT_EQ(*ghost::parse_engine_kind("kernel"), ghost::EngineKind::Kernel);
    EXPECT_EQ(*ghost::parse_engine_kind("user"), ghost::EngineKind::User);
    auto bad = ghost::parse_engine_kind("Kernel");
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code, std::errc::invalid_argument);
}

TEST(Process, EstimateCoversOwnAnonymousMemory) {
    std::vector<char> big(8 << 20, 1); // touched: anonymous memory
    EXPECT_GE(ghost::estimate_image_bytes(::getpid()), big.size());
    EXPECT_EQ(ghost::estimate_image_bytes(-1), 0u);
}

std::vector<std::byte> pattern_bytes(std::size_t n) {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
    return v;
}

// Everything a source yields until its end.
ghost::Result<std::vector<std::byte>> drain(ghost::image::Source& s) {
    std::vector<std::byte> out;
    std::vector<std::byte> buf(3000); // odd size: many partial reads
    for (;;) {
        auto n = s.read(buf);
        if (!n)
            return n.error();
        if (*n == 0)
            return out;
        out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
    }
}

ghost::UniqueFd file_with(std::span<const std::byte> data) {
    FILE* f = std::tmpfile();
    ghost::UniqueFd fd(::dup(::fileno(f)));
    std::fclose(f);
    EXPECT_EQ(::pwrite(fd.get(), data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
    return fd;
}

TEST(Process, ImageSourcePassesRawBytesThrough) {
    const auto raw = pattern_bytes(100000);
    auto fd = file_with(raw);
    auto src = ghost::image_source(fd.get());
    ASSERT_TRUE(src) << src.error().what();
    auto got = drain(**src);
    ASSERT_TRUE(got) << got.error().what();
    EXPECT_EQ(*got, raw);
}

TEST(Process, ImageSourceDecompressesZstd) {
    const auto raw = pattern_bytes(1 << 20);
    std::vector<std::byte> z(ZSTD_compressBound(raw.size()));
    z.resize(ZSTD_compress(z.data(), z.size(), raw.data(), raw.size(), 3));
    ASSERT_TRUE(ghost::is_zstd(z));
    auto fd = file_with(z);
    auto src = ghost::image_source(fd.get());
    ASSERT_TRUE(src) << src.error().what();
    auto got = drain(**src);
    ASSERT_TRUE(got) << got.error().what();
    EXPECT_EQ(*got, raw);
}

TEST(Process, ImageSourceRefusesATruncatedFrame) {
    const auto raw = pattern_bytes(1 << 20);
    std::vector<std::byte> z(ZSTD_compressBound(raw.size()));
    z.resize(ZSTD_compress(z.data(), z.size(), raw.data(), raw.size(), 3));
    z.resize(z.size() / 2);
    auto fd = file_with(z);
    auto src = ghost::image_source(fd.get());
    ASSERT_TRUE(src) << src.error().what();
    auto got = drain(**src);
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().what().find("middle of a frame"), std::string::npos)
        << got.error().what();
}

} // namespace
