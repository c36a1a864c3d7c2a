// SPDX-License-Identifier: GPL-2.0
// The END checksum's two kinds (libghost's reader and Writer): crc32c, as
// every image before GHOST_IMAGE_FEAT_XXH64 has it, and XXH64. Real images
// (tests/golden/v2, crc32c) and the same images re-encoded with the feature:
// each kind reads, re-encodes byte for byte, and refuses a flipped page byte
// naming its checksum; a mixed-up END is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <linux/ghost.h>

#include "ghost/image.hpp"

namespace {

namespace img = ghost::image;
using Bytes = std::vector<std::byte>;

constexpr std::uint64_t kPage = 4096;
constexpr std::size_t kSec = sizeof(ghost_section);

std::span<const std::byte> str_bytes(std::string_view s) {
    return std::as_bytes(std::span(s));
}

template <class T> void put(Bytes& b, std::size_t off, const T& v) {
    ASSERT_LE(off + sizeof(v), b.size());
    const auto src = std::as_bytes(std::span(&v, 1));
    std::copy(src.begin(), src.end(), b.begin() + static_cast<std::ptrdiff_t>(off));
}

// A real image, its page data by address, and where its first page is.
struct Real {
    Bytes bytes;
    img::Image image;
    std::map<std::uint64_t, Bytes> data;
    std::uint64_t first_page = 0; // stream offset of the first page carried
};

Real load(const std::string& name) {
    Real r;
    std::ifstream in(std::filesystem::path(GHOST_GOLDEN_DIR) / "v2" / name, std::ios::binary);
    const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto b = std::as_bytes(std::span(raw));
    r.bytes.assign(b.begin(), b.end());
    img::ReadOptions o;
    o.on_pages = [&](const img::Vma&, const img::PageRun& run,
                     std::span<const std::byte> d) -> ghost::Result<void> {
        if (!r.first_page)
            r.first_page = run.data_offset;
        for (std::uint64_t i = 0; i < run.nr_pages; i++)
            r.data[run.addr + i * kPage] =
                Bytes(d.begin() + i * kPage, d.begin() + (i + 1) * kPage);
        return {};
    };
    auto read = img::read(r.bytes, o);
    EXPECT_TRUE(read) << name << ": " << read.error().what();
    if (read)
        r.image = std::move(*read);
    return r;
}

Bytes encode(const Real& r, const img::Image& m) {
    Bytes buf;
    return img::encode(m, [&](const img::Vma&, const img::PageRun& run) {
        buf.clear();
        for (std::uint64_t i = 0; i < run.nr_pages; i++) {
            const auto& p = r.data.at(run.addr + i * kPage);
            buf.insert(buf.end(), p.begin(), p.end());
        }
        return std::span<const std::byte>(buf);
    });
}

// The same image with an XXH64 END (feature bit 7 used and required).
Bytes as_xxh64(const Real& r) {
    auto m = r.image;
    m.header.features |= GHOST_IMAGE_FEAT_XXH64;
    m.header.required_features |= GHOST_IMAGE_FEAT_XXH64;
    return encode(r, m);
}

std::string refusal(const Bytes& b) {
    auto r = img::read(b);
    if (r)
        return "(read)";
    EXPECT_EQ(r.error().code, std::make_error_code(std::errc::bad_message));
    return r.error().message;
}

TEST(ImageChecksum, Xxh64KnownVectors) {
    EXPECT_EQ(img::xxh64({}), 0xEF46DB3751D8E999ULL);
    EXPECT_EQ(img::xxh64(str_bytes("abc")), 0x44BC2CF5AD770999ULL);
}

TEST(ImageChecksum, Crc32cImagesReadWithTheirSixteenByteEnd) {
    for (const char* name : {"counter.img", "workload-state.img"}) {
        SCOPED_TRACE(name);
        const auto r = load(name);
        const auto at = r.bytes.size() - kSec - GHOST_END_SIZE_VER1;
        EXPECT_FALSE(r.image.header.features & GHOST_IMAGE_FEAT_XXH64);
        EXPECT_EQ(r.image.crc32c, img::crc32c(0, std::span(r.bytes).first(at)));
        EXPECT_EQ(r.image.xxh64, 0u);
        EXPECT_TRUE(r.image.exact);
        EXPECT_EQ(encode(r, r.image), r.bytes);
    }
}

TEST(ImageChecksum, Xxh64ImagesReadWithTheirWholeEndAndReencodeTheSame) {
    for (const char* name : {"counter.img", "workload-state.img"}) {
        SCOPED_TRACE(name);
        const auto r = load(name);
        const auto x = as_xxh64(r);
        ASSERT_EQ(x.size(), r.bytes.size() + 8); // END grew by its 8-byte hash
        const auto at = x.size() - kSec - sizeof(ghost_end);
        std::map<std::uint64_t, Bytes> pages;
        img::ReadOptions o;
        o.on_pages = [&](const img::Vma&, const img::PageRun& run,
                         std::span<const std::byte> d) -> ghost::Result<void> {
            for (std::uint64_t i = 0; i < run.nr_pages; i++)
                pages[run.addr + i * kPage] =
                    Bytes(d.begin() + i * kPage, d.begin() + (i + 1) * kPage);
            return {};
        };
        auto got = img::read(x, o);
        ASSERT_TRUE(got) << got.error().what();
        EXPECT_EQ(got->xxh64, img::xxh64(std::span(x).first(at)));
        EXPECT_NE(got->xxh64, 0u);
        EXPECT_EQ(got->crc32c, 0u);
        EXPECT_EQ(got->bytes, x.size());
        EXPECT_TRUE(got->exact);
        EXPECT_EQ(pages, r.data); // the same memory, whichever the checksum
        EXPECT_EQ(encode(r, *got), x);
    }
}

TEST(ImageChecksum, AFlippedPageByteIsRefusedNamingEitherChecksum) {
    const auto r = load("workload-state.img");
    ASSERT_NE(r.first_page, 0u);
    auto crc = r.bytes;
    crc[r.first_page + 100] ^= std::byte{0x40};
    const auto c = refusal(crc);
    EXPECT_NE(c.find("checksum mismatch"), std::string::npos) << c;
    EXPECT_NE(c.find("crc32c"), std::string::npos) << c;

    auto x = as_xxh64(r);
    ASSERT_TRUE(img::read(x)) << "the unflipped XXH64 image reads";
    x[r.first_page + 100] ^= std::byte{0x40}; // same layout up to END
    const auto m = refusal(x);
    EXPECT_NE(m.find("checksum mismatch"), std::string::npos) << m;
    EXPECT_NE(m.find("xxh64"), std::string::npos) << m;
}

TEST(ImageChecksum, AChangedHeaderByteIsCaughtByXxh64) {
    // The reader restarts the hash over the header it read: the header counts.
    auto x = as_xxh64(load("counter.img"));
    x[offsetof(ghost_image_header, time_ns)] ^= std::byte{1};
    const auto m = refusal(x);
    EXPECT_NE(m.find("checksum mismatch"), std::string::npos) << m;
}

TEST(ImageChecksum, Xxh64FeatureWithTheOldEndSizeIsRefused) {
    auto b = load("counter.img").bytes;
    const std::uint64_t both = GHOST_IMAGE_FEAT_XXH64;
    ghost_image_header h{};
    std::memcpy(&h, b.data(), sizeof(h));
    h.features |= both;
    h.required_features |= both;
    put(b, 0, h);
    const auto m = refusal(b);
    EXPECT_NE(m.find("checksum is an XXH64 (header feature bit 7)"), std::string::npos) << m;
    EXPECT_NE(m.find("16-byte record, without one"), std::string::npos) << m;
}

TEST(ImageChecksum, AnEndHoldingTheOtherKindIsRefused) {
    const auto r = load("counter.img");
    // An XXH64 image whose END also says a crc32c.
    auto x = as_xxh64(r);
    const auto xend = x.size() - sizeof(ghost_end);
    put<std::uint32_t>(x, xend + offsetof(ghost_end, crc32c), 1);
    auto m = refusal(x);
    EXPECT_NE(m.find("holds a crc32c in an image whose checksum is an XXH64"), std::string::npos)
        << m;

    // A crc32c image whose END grew to 24 bytes: a zero hash is fine, any
    // other is refused.
    auto c = r.bytes;
    const auto at = c.size() - kSec - GHOST_END_SIZE_VER1;
    const ghost_section s{GHOST_SEC_END, 0, sizeof(ghost_end), sizeof(ghost_end)};
    put(c, at, s);
    c.resize(c.size() + 8);
    auto ok = img::read(c);
    ASSERT_TRUE(ok) << ok.error().what();
    EXPECT_FALSE(ok->exact); // encode() writes the 16-byte END back
    put<std::uint64_t>(c, at + kSec + offsetof(ghost_end, xxh64), 5);
    m = refusal(c);
    EXPECT_NE(m.find("holds an xxh64 in an image whose checksum is a crc32c"), std::string::npos)
        << m;
}

} // namespace
