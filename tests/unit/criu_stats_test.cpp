// SPDX-License-Identifier: GPL-2.0
// bench/criu_stats: the decoder of CRIU's stats-dump, on files built here
// byte by byte as CRIU writes them (two magics, a size, a protobuf entry).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "../../bench/criu_stats.hpp"

namespace {

using Bytes = std::vector<std::byte>;

void u32(Bytes& b, std::uint32_t v) {
    for (int i = 0; i < 4; i++)
        b.push_back(static_cast<std::byte>(v >> (8 * i)));
}
void varint(Bytes& b, std::uint64_t v) {
    do {
        b.push_back(static_cast<std::byte>((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
        v >>= 7;
    } while (v);
}
void vfield(Bytes& b, std::uint32_t num, std::uint64_t v) {
    varint(b, num << 3);
    varint(b, v);
}
void lfield(Bytes& b, std::uint32_t num, const Bytes& sub) {
    varint(b, num << 3 | 2);
    varint(b, sub.size());
    b.insert(b.end(), sub.begin(), sub.end());
}

// A dump_stats_entry as stats.proto has it: the required fields 1-7 and 9.
Bytes dump_stats(std::uint64_t freezing, std::uint64_t frozen, std::uint64_t memdump) {
    Bytes d;
    vfield(d, 1, freezing);
    vfield(d, 2, frozen);
    vfield(d, 3, memdump);
    vfield(d, 4, 777);   // memwrite_time
    vfield(d, 5, 65536); // pages_scanned
    vfield(d, 6, 0);     // pages_skipped_parent
    vfield(d, 7, 65536); // pages_written
    vfield(d, 9, 0);     // pages_lazy
    return d;
}

Bytes stats_file(const Bytes& entry, std::uint32_t magic2 = 0x57093306) {
    Bytes f;
    u32(f, 0x55105940);
    u32(f, magic2);
    u32(f, static_cast<std::uint32_t>(entry.size()));
    f.insert(f.end(), entry.begin(), entry.end());
    return f;
}

TEST(CriuStats, ReadsTheDumpTimesInMilliseconds) {
    Bytes entry;
    lfield(entry, 1, dump_stats(1500, 2345678, 1200000));
    bench::CriuDumpStats s;
    std::string why;
    ASSERT_TRUE(bench::parse_criu_stats_dump(stats_file(entry), s, why)) << why;
    EXPECT_DOUBLE_EQ(s.freezing_ms, 1.5);
    EXPECT_DOUBLE_EQ(s.frozen_ms, 2345.678);
    EXPECT_DOUBLE_EQ(s.memdump_ms, 1200.0);
}

TEST(CriuStats, SkipsRestoreStatsAndUnknownFields) {
    Bytes restore;
    vfield(restore, 1, 5);
    Bytes entry;
    lfield(entry, 2, restore);
    vfield(entry, 9, 42);
    lfield(entry, 1, dump_stats(1, 20000, 3));
    bench::CriuDumpStats s;
    std::string why;
    ASSERT_TRUE(bench::parse_criu_stats_dump(stats_file(entry), s, why)) << why;
    EXPECT_DOUBLE_EQ(s.frozen_ms, 20.0);
}

TEST(CriuStats, RefusesWhatIsNotAStatsDump) {
    Bytes entry;
    lfield(entry, 1, dump_stats(1, 2, 3));
    bench::CriuDumpStats s;
    std::string why;
    EXPECT_FALSE(bench::parse_criu_stats_dump(stats_file(entry, 0x54564319), s, why));
    EXPECT_NE(why.find("not a CRIU stats file"), std::string::npos) << why;

    Bytes cut = stats_file(entry);
    cut.resize(cut.size() - 3);
    EXPECT_FALSE(bench::parse_criu_stats_dump(cut, s, why));
    EXPECT_NE(why.find("follow"), std::string::npos) << why;

    Bytes restore_only;
    lfield(restore_only, 2, Bytes{std::byte{8}, std::byte{1}});
    EXPECT_FALSE(bench::parse_criu_stats_dump(stats_file(restore_only), s, why));
    EXPECT_EQ(why, "the file holds no dump stats");

    Bytes no_frozen, d;
    vfield(d, 1, 10);
    lfield(no_frozen, 1, d);
    EXPECT_FALSE(bench::parse_criu_stats_dump(stats_file(no_frozen), s, why));
    EXPECT_EQ(why, "the dump stats have no frozen_time");
}

} // namespace
