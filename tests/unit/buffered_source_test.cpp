// SPDX-License-Identifier: GPL-2.0
// BufferedSource (libghost/src/buffered_source.hpp): an image read through
// it is the image read whole, in a few reads of its source; skip and placed
// reads keep the source's position right.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "buffered_source.hpp"
#include "ghost/image.hpp"

namespace {

namespace img = ghost::image;
using Bytes = std::vector<std::byte>;

// Gives what it is asked for (up to its end), counting the calls; can skip
// when seekable; read_placed is counted apart.
class Counting final : public img::Source {
  public:
    explicit Counting(std::span<const std::byte> d, bool seekable = true)
        : d_(d), seekable_(seekable) {}
    ghost::Result<std::size_t> read(std::span<std::byte> buf) override {
        reads++;
        return give(buf);
    }
    ghost::Result<std::size_t> read_placed(std::span<std::byte> buf) override {
        placed++;
        return give(buf);
    }
    ghost::Result<bool> skip(std::uint64_t n) override {
        if (!seekable_ || n > d_.size() - off_)
            return false;
        off_ += n;
        return true;
    }
    int reads = 0;
    int placed = 0;

  private:
    std::size_t give(std::span<std::byte> buf) {
        const auto n = std::min(buf.size(), d_.size() - off_);
        std::memcpy(buf.data(), d_.data() + off_, n);
        off_ += n;
        return n;
    }
    std::span<const std::byte> d_;
    std::size_t off_ = 0;
    bool seekable_;
};

Bytes numbered(std::size_t n) {
    Bytes b(n);
    for (std::size_t i = 0; i < n; i++)
        b[i] = static_cast<std::byte>(i * 7 + i / 251);
    return b;
}

Bytes golden(const std::string& name) {
    std::ifstream f(std::string(GHOST_GOLDEN_DIR) + "/v2/" + name, std::ios::binary);
    const std::vector<char> c((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
    Bytes b(c.size());
    std::memcpy(b.data(), c.data(), c.size());
    return b;
}

// Everything read through src, in pieces of the sizes given in turn.
Bytes drain(img::Source& src, std::initializer_list<std::size_t> sizes) {
    Bytes out;
    for (std::size_t i = 0;; i++) {
        Bytes piece(*(sizes.begin() + i % sizes.size()));
        auto n = src.read(piece);
        EXPECT_TRUE(n);
        if (!n || *n == 0)
            return out;
        out.insert(out.end(), piece.begin(), piece.begin() + static_cast<std::ptrdiff_t>(*n));
    }
}

// The next 8 bytes of b are data's at off.
void expect_next(ghost::BufferedSource& b, const Bytes& data, std::size_t off) {
    Bytes x(8);
    auto n = b.read(x);
    ASSERT_TRUE(n);
    ASSERT_EQ(*n, 8u);
    EXPECT_TRUE(std::equal(x.begin(), x.end(), data.begin() + static_cast<std::ptrdiff_t>(off)))
        << "at " << off;
}

TEST(BufferedSource, SmallReadsComeFromFewReadsOfTheSource) {
    const auto data = numbered(300000);
    Counting in(data);
    ghost::BufferedSource b(in);
    EXPECT_EQ(drain(b, {16, 3, 104, 1}), data);
    // 64 KiB at a time, and the read that finds the end.
    EXPECT_EQ(in.reads, 6);
}

TEST(BufferedSource, LargeReadsGoStraightToTheSourceOnceTheHeldBytesAreUsed) {
    const auto data = numbered(1 << 20);
    Counting in(data);
    ghost::BufferedSource b(in);
    EXPECT_EQ(drain(b, {10, 256 << 10}), data);
    // Each large read after a small one first gets what is held (one call,
    // a short read), then goes through on its own.
    EXPECT_LT(in.reads, 20);
}

TEST(BufferedSource, PlacedReadsAreTheSourcesOwnOnceNothingIsHeld) {
    const auto data = numbered(200000);
    Counting in(data);
    ghost::BufferedSource b(in);
    Bytes head(16), placed(100000);
    ASSERT_EQ(*b.read(head), 16u);
    // What was read ahead is given first, then the source's read_placed.
    std::size_t got = 0;
    while (got < placed.size()) {
        auto n = b.read_placed(std::span(placed).subspan(got));
        ASSERT_TRUE(n);
        ASSERT_GT(*n, 0u);
        got += *n;
    }
    EXPECT_EQ(in.placed, 1);
    EXPECT_TRUE(std::equal(placed.begin(), placed.end(), data.begin() + 16));
    const auto tail = drain(b, {4096});
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), data.begin() + 100016));
    EXPECT_EQ(tail.size(), data.size() - 100016);
}

TEST(BufferedSource, SkipWithinAndBeyondWhatIsHeld) {
    const auto data = numbered(300000);
    Counting in(data);
    ghost::BufferedSource b(in);
    expect_next(b, data, 0);
    ASSERT_TRUE(*b.skip(1000)); // held
    expect_next(b, data, 1008);
    ASSERT_TRUE(*b.skip(100000)); // past what is held: the source skips the rest
    expect_next(b, data, 101016);
}

TEST(BufferedSource, ASkipTheSourceCannotMakeMovesNothing) {
    const auto data = numbered(300000);
    Counting in(data, false);
    ghost::BufferedSource b(in);
    expect_next(b, data, 0);
    auto s = b.skip(100000);
    ASSERT_TRUE(s);
    EXPECT_FALSE(*s);
    expect_next(b, data, 8);
}

TEST(BufferedSource, TakeGivesHeldBytesInPlaceOrNothing) {
    const auto data = numbered(100000);
    Counting in(data);
    ghost::BufferedSource b(in);
    expect_next(b, data, 0);
    const auto t = b.take(4096);
    ASSERT_EQ(t.size(), 4096u);
    EXPECT_TRUE(std::equal(t.begin(), t.end(), data.begin() + 8));
    EXPECT_TRUE(b.take(ghost::BufferedSource::kCapacity).empty()); // more than is held
    expect_next(b, data, 4104);
}

// The image's records, encoded with zero page data.
Bytes records_of(const img::Image& m) {
    Bytes zeros;
    return img::encode(m, [&](const img::Vma&, const img::PageRun& r) {
        zeros.assign(r.nr_pages * 4096, std::byte{0});
        return std::span<const std::byte>(zeros);
    });
}

// A real image: the same records and pages as read whole, with a read of
// the source per 64 KiB instead of one per record.
TEST(BufferedSource, AnImageReadThroughItIsTheImageReadWhole) {
    for (const char* name : {"counter.img", "workload-state.img"}) {
        const auto bytes = golden(name);
        ASSERT_GT(bytes.size(), 4096u) << name;
        Bytes pages_whole, pages_buffered;
        img::ReadOptions o;
        Bytes* into = &pages_whole;
        o.on_pages = [&](const img::Vma&, const img::PageRun&,
                         std::span<const std::byte> d) -> ghost::Result<void> {
            into->insert(into->end(), d.begin(), d.end());
            return {};
        };
        auto whole = img::read(bytes, o);
        ASSERT_TRUE(whole) << name << ": " << whole.error().what();

        Counting plain(bytes);
        auto unbuffered = img::read(plain);
        ASSERT_TRUE(unbuffered) << unbuffered.error().what();

        into = &pages_buffered;
        Counting in(bytes);
        ghost::BufferedSource b(in);
        auto buffered = img::read(b, o);
        ASSERT_TRUE(buffered) << name << ": " << buffered.error().what();
        EXPECT_EQ(records_of(*buffered), records_of(*whole)) << name;
        EXPECT_EQ(pages_buffered, pages_whole) << name;
        EXPECT_EQ(buffered->bytes, bytes.size());
        EXPECT_LE(in.reads, static_cast<int>(bytes.size() / (32 << 10)) + 3) << name;
        EXPECT_GT(plain.reads, 4 * in.reads) << name;
    }
}

} // namespace
