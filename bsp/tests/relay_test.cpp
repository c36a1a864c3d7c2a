// SPDX-License-Identifier: GPL-2.0
// What relays carry, pure (bsp/relay/data.cpp): a SYNC's puts and messages
// cut into one DATA frame per target, a GETDATA cut into one per requester,
// and DATA frames spliced into the target's DELIVER by source, as the hub
// would have built it.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "data.hpp"
#include "sync.hpp"

namespace ghost::bsp {
namespace {

std::span<const std::byte> bytes_of(std::string_view s) {
    return std::as_bytes(std::span(s.data(), s.size()));
}

// A SYNC of source `src` in superstep 4: puts and messages to VPs 0 and 2.
// The spans point into tag: a string literal.
SyncRequest sample(std::string_view tag) {
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
    auto got = relay::splice_deliver(hub_part, std::move(to2), 3, false);
    ASSERT_TRUE(got) << got.error().what();
    EXPECT_EQ(*got, want);
}

TEST(BspRelayData, SpliceRefusesADeliverThatCarriesPutsAlready) {
    std::vector<SyncRequest> all = {sample("a"), SyncRequest{}, SyncRequest{}};
    const auto full = build_deliver(2, 5, 0, all, {});
    auto got = relay::splice_deliver(full, {}, 3, false);
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().what().find("empty puts and messages"), std::string::npos);
}

// What a target VP answers to a GETS payload: each get's bytes are a
// pattern of its registration, offset and length.
std::vector<std::byte> answer(std::span<const std::byte> gets) {
    wire::Reader r(gets);
    std::vector<std::byte> out;
    const std::uint32_t n = r.u32();
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint64_t reg = r.u64(), off = r.u64(), len = r.u64();
        for (std::uint64_t k = 0; k < len; ++k)
            out.push_back(static_cast<std::byte>(reg * 31 + off * 7 + k));
    }
    return out;
}

// Three VPs with puts, messages and gets: 0 reads twice from 2, 1 reads
// from 2 and from 0 (and nothing, a zero-length get, from 0), 2 reads from 0.
std::vector<SyncRequest> with_gets() {
    std::vector<SyncRequest> all = {sample("a"), sample("b"), SyncRequest{}};
    for (auto& s : all)
        s.superstep = 4;
    all[0].gets = {{2, 1, 0, 5}, {2, 3, 8, 2}};
    all[1].gets = {{2, 1, 5, 4}, {0, 2, 0, 6}, {0, 2, 6, 0}};
    all[2].gets = {{0, 1, 1, 3}};
    return all;
}

// The hub's way with gets: GETS to each target, its GETDATA (kept in
// data) split by requester: per_get[r] are r's replies in call order.
std::vector<std::vector<std::span<const std::byte>>>
hub_replies(const std::vector<SyncRequest>& all, std::vector<std::vector<std::byte>>& data) {
    std::vector<std::vector<std::span<const std::byte>>> per_get(all.size());
    for (std::size_t r = 0; r < all.size(); ++r)
        per_get[r].resize(all[r].gets.size());
    data.assign(all.size(), {});
    for (std::size_t t = 0; t < all.size(); ++t) {
        data[t] = answer(gets_for(static_cast<int>(t), all));
        auto ok = split_getdata(static_cast<int>(t), data[t], all, per_get);
        EXPECT_TRUE(ok) << ok.error().what();
    }
    return per_get;
}

TEST(BspRelayData, GetRepliesGoStraightToTheRequestersAsTheHubWouldDeliverThem) {
    // The hub's way: GETS to each target, its GETDATA split by requester,
    // every reply in the requester's DELIVER.
    const auto all = with_gets();
    std::vector<std::vector<std::byte>> data;
    const auto per_get = hub_replies(all, data);
    // The relays' way: GETS_RELAYED to the target's relay, which asks the
    // VP the same GETS and cuts its GETDATA into DATA frames.
    auto stripped = with_gets();
    std::vector<std::vector<relay::DataFrame>> to(3);
    for (std::uint32_t v = 0; v < 3; ++v)
        for (auto& f : relay::strip_sync(stripped[v], v))
            to[f.target].push_back(std::move(f));
    for (std::uint32_t t = 0; t < 3; ++t) {
        auto routed = relay::encode_routed_gets(t, 4, stripped);
        ASSERT_EQ(routed.has_value(), t != 1) << "nobody reads from vp 1 only";
        if (!routed)
            continue;
        auto g = relay::decode_routed_gets(*routed);
        ASSERT_TRUE(g) << g.error().what();
        EXPECT_EQ(g->superstep, 4U);
        EXPECT_EQ(relay::plain_gets(*g), gets_for(static_cast<int>(t), all));
        auto frames = relay::split_replies(*g, answer(relay::plain_gets(*g)), t);
        ASSERT_TRUE(frames) << frames.error().what();
        for (auto& f : *frames) {
            EXPECT_EQ(f.source, t);
            to[f.target].insert(to[f.target].begin(), std::move(f)); // out of order
        }
    }
    // One frame of replies per VP read from: 0 gets 2 (puts from 0 and 1)
    // + 1 (replies from 2), 1 gets 0 + 2, 2 gets 2 + 1.
    EXPECT_EQ(to[0].size(), 3U);
    EXPECT_EQ(to[1].size(), 2U);
    EXPECT_EQ(to[2].size(), 3U);
    for (int v = 0; v < 3; ++v) {
        const auto want = build_deliver(v, 5, 0, all, per_get[v]);
        const std::vector<std::span<const std::byte>> empty(all[v].gets.size());
        const auto hub_part = build_deliver(v, 5, 0, stripped, empty);
        auto got = relay::splice_deliver(hub_part, std::move(to[v]), 3, true);
        ASSERT_TRUE(got) << "vp " << v << ": " << got.error().what();
        EXPECT_EQ(*got, want) << "vp " << v;
    }
}

TEST(BspRelayData, SmallGetRepliesStayInTheHubsDeliver) {
    // The hub answered the gets itself: its DELIVER has the replies, the
    // relay adds only the puts and messages.
    const auto all = with_gets();
    EXPECT_FALSE(relay::worth_relaying(all)) << "a few bytes per pair";
    std::vector<std::vector<std::byte>> data;
    const auto per_get = hub_replies(all, data);
    auto stripped = with_gets();
    std::vector<relay::DataFrame> to0;
    for (std::uint32_t v = 0; v < 3; ++v)
        for (auto& f : relay::strip_sync(stripped[v], v))
            if (f.target == 0)
                to0.push_back(std::move(f));
    const auto want = build_deliver(0, 5, 0, all, per_get[0]);
    auto got = relay::splice_deliver(build_deliver(0, 5, 0, stripped, per_get[0]), to0, 3, false);
    ASSERT_TRUE(got) << got.error().what();
    EXPECT_EQ(*got, want);
    // A reply frame when the hub has the replies is refused.
    auto g = relay::decode_routed_gets(*relay::encode_routed_gets(2, 4, all));
    auto frames = relay::split_replies(*g, answer(relay::plain_gets(*g)), 2);
    to0.push_back((*frames)[0]);
    EXPECT_FALSE(
        relay::splice_deliver(build_deliver(0, 5, 0, stripped, per_get[0]), to0, 3, false));
}

TEST(BspRelayData, GetsAreRelayedFromTheirAverageSizePerPair) {
    std::vector<SyncRequest> s(3);
    EXPECT_FALSE(relay::worth_relaying(s)) << "no gets";
    // Two pairs (0 from 1, 2 from 1): 2 x kRelayGetsMin in all is enough,
    // one byte less is not, however it is shared out.
    s[0].gets = {{1, 1, 0, relay::kRelayGetsMin * 2 - 1}, {1, 1, 0, 0}};
    s[2].gets = {{1, 1, 0, 0}};
    EXPECT_FALSE(relay::worth_relaying(s));
    s[2].gets[0].len = 1;
    EXPECT_TRUE(relay::worth_relaying(s));
}

TEST(BspRelayData, GetRepliesOfTheWrongSizeOrPlaceAreRefused) {
    const auto all = with_gets();
    auto g = relay::decode_routed_gets(*relay::encode_routed_gets(2, 4, all));
    ASSERT_TRUE(g);
    auto data = answer(relay::plain_gets(*g));
    data.push_back(std::byte{0});
    auto long_ = relay::split_replies(*g, data, 2);
    ASSERT_FALSE(long_);
    EXPECT_NE(long_.error().what().find("too long"), std::string::npos);
    data.resize(data.size() - 2);
    EXPECT_FALSE(relay::split_replies(*g, data, 2));
    EXPECT_FALSE(relay::encode_routed_gets(1, 4, all)) << "nobody reads from vp 1";
    // VP 0's DELIVER: two gets from 2. The same frame twice, and none.
    auto frames = relay::split_replies(*g, answer(relay::plain_gets(*g)), 2);
    ASSERT_TRUE(frames);
    const std::vector<std::span<const std::byte>> empty(2);
    const auto hub_part = build_deliver(0, 5, 0, std::vector<SyncRequest>(3), empty);
    auto twice = relay::splice_deliver(hub_part, {(*frames)[0], (*frames)[0]}, 3, true);
    ASSERT_FALSE(twice);
    EXPECT_NE(twice.error().what().find("not asked for"), std::string::npos);
    auto none = relay::splice_deliver(hub_part, {}, 3, true);
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().what().find("lacks the reply"), std::string::npos);
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
    auto got = relay::splice_deliver(build_deliver(0, 5, 0, none, {}), {bad}, 3, false);
    EXPECT_FALSE(got);
}

} // namespace
} // namespace ghost::bsp
