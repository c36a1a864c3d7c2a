// SPDX-License-Identifier: GPL-2.0
// What relays carry, pure (bsp/relay/data.cpp): a SYNC's puts and messages
// cut into one DATA frame per target, and DATA frames spliced into the
// target's DELIVER by source, as the hub would have built it.
#include <gtest/gtest.h>

#include <string>

#include "data.hpp"
#include "sync.hpp"

namespace ghost::bsp {
namespace {

std::span<const std::byte> bytes_of(const std::string& s) {
    return std::as_bytes(std::span(s.data(), s.size()));
}

// A SYNC of source `src` in superstep 4: puts and messages to VPs 0 and 2.
SyncRequest sample(const std::string& tag) {
    static const std::string a = "put-to-0", b = "put-to-2", c = "msg-to-2", d = "second";
    SyncRequest s;
    s.superstep = 4;
    s.puts.push_back({2, 7, 16, bytes_of(b)});
    s.puts.push_back({0, 1, 0, bytes_of(a)});
    s.msgs.push_back({2, bytes_of(tag), bytes_of(c)});
    s.msgs.push_back({2, bytes_of(tag), bytes_of(d)});
    return s;
}

TEST(BspRelayData, StripMakesOneFramePerTargetAndCountsThem) {
    auto s = sample("t");
    auto frames = relay::strip_sync(s, 1);
    ASSERT_EQ(frames.size(), 2U);
    EXPECT_TRUE(s.puts.empty());
    EXPECT_TRUE(s.msgs.empty());
    EXPECT_EQ(frames[0].target, 0U);
    EXPECT_EQ(frames[1].target, 2U);
    EXPECT_EQ(frames[1].source, 1U);
    EXPECT_EQ(frames[1].superstep, 4U);
    ASSERT_EQ(s.relayed.size(), 2U);
    EXPECT_EQ(s.relayed[0].pid, 0U);
    EXPECT_EQ(s.relayed[0].bytes, 8U);
    EXPECT_EQ(s.relayed[1].pid, 2U);
    EXPECT_EQ(s.relayed[1].frames, 1U);
    EXPECT_EQ(s.relayed[1].bytes, 8U + 1 + 8 + 1 + 6);
    // The SYNC without them survives its encoding, counts included.
    auto back = decode_sync(encode_sync(s), 3);
    ASSERT_TRUE(back) << back.error().what();
    EXPECT_EQ(back->superstep, 4U);
    ASSERT_EQ(back->relayed.size(), 2U);
    EXPECT_EQ(back->relayed[1].bytes, s.relayed[1].bytes);
    // A frame read back from its payload.
    auto d = relay::decode_data(frames[1].payload);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->target, 2U);
    relay::set_hops(*d, 3);
    relay::set_epoch(*d, 9);
    auto again = relay::decode_data(d->payload);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->hops, 3U);
    EXPECT_EQ(again->epoch, 9U);
    EXPECT_EQ(again->payload, d->payload);
}

TEST(BspRelayData, SpliceGivesTheDeliverTheHubWouldHaveBuilt) {
    // Three VPs; 0 and 1 put and send to 2. The hub's own DELIVER for 2
    // (everything in it) against the relay's (the hub's without puts and
    // messages, then the DATA frames spliced in, arriving out of order).
    std::vector<SyncRequest> all = {sample("a"), sample("b"), SyncRequest{}};
    for (auto& s : all)
        s.superstep = 4;
    const auto want = build_deliver(2, 5, 1, all, {});
    std::vector<relay::DataFrame> to2;
    std::vector<SyncRequest> stripped = {sample("a"), sample("b"), SyncRequest{}};
    for (std::uint32_t v = 0; v < 3; ++v)
        for (auto& f : relay::strip_sync(stripped[v], v))
            if (f.target == 2)
                to2.insert(to2.begin(), std::move(f)); // source 1 first
    ASSERT_EQ(to2.size(), 2U);
    const auto hub_part = build_deliver(2, 5, 1, stripped, {});
    auto got = relay::splice_deliver(hub_part, std::move(to2), 3);
    ASSERT_TRUE(got) << got.error().what();
    EXPECT_EQ(*got, want);
}

TEST(BspRelayData, SpliceRefusesADeliverThatCarriesPutsAlready) {
    std::vector<SyncRequest> all = {sample("a"), SyncRequest{}, SyncRequest{}};
    const auto full = build_deliver(2, 5, 0, all, {});
    auto got = relay::splice_deliver(full, {}, 3);
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().what().find("empty puts and messages"), std::string::npos);
}

TEST(BspRelayData, StatsTravelWholeAndAddUp) {
    relay::Counters a{10, 2000, 3, 4, 5};
    auto back = relay::decode_stats(relay::encode_stats("h2", a));
    ASSERT_TRUE(back) << back.error().what();
    relay::Counters sum{1, 1, 1, 1, 1};
    sum += *back;
    EXPECT_EQ(sum.frames, 11U);
    EXPECT_EQ(sum.bytes, 2001U);
    EXPECT_EQ(sum.local, 4U);
    EXPECT_EQ(sum.forwarded, 5U);
    EXPECT_EQ(sum.held, 6U);
    auto cut = relay::encode_stats("h2", a);
    cut.pop_back();
    EXPECT_FALSE(relay::decode_stats(cut));
}

TEST(BspRelayData, MalformedDataIsRefused) {
    auto f = relay::decode_data(std::vector<std::byte>(7));
    EXPECT_FALSE(f);
    auto s = sample("x");
    auto frames = relay::strip_sync(s, 0);
    auto bad = frames[0];
    bad.payload.resize(bad.payload.size() - 1); // cut short
    std::vector<SyncRequest> none(3);
    auto got = relay::splice_deliver(build_deliver(0, 5, 0, none, {}), {bad}, 3);
    EXPECT_FALSE(got);
}

} // namespace
} // namespace ghost::bsp
