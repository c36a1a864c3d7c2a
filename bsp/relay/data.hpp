// SPDX-License-Identifier: GPL-2.0
// What relays carry between hosts, pure: a VP's puts and messages to one
// target cut out of its SYNC (DATA frames), and DATA frames spliced into the
// target's DELIVER (Documentation/bsp.md, "Routing through relays").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ghost/result.hpp"
#include "sync.hpp"

namespace ghost::bsp::relay {

// A DATA payload: u32 target, u32 source, u64 superstep (the one the source
// ended), u32 hops (relays it was forwarded by), u32 epoch (of the sender's
// link-table entry for the target: the number of the target's moves it
// knew), then u32 n + n × put (u64 registration, u64 offset, blob data),
// u32 n + n × message (blob tag, blob payload) and u32 n + n × get reply
// (u32 index: the get's place among the target's bsp_get calls, blob
// data: what the source read for it). The payload is kept whole, so
// forwarding only patches hops and epoch.
struct DataFrame {
    std::uint32_t target = 0, source = 0;
    std::uint64_t superstep = 0;
    std::uint32_t hops = 0;
    std::uint32_t epoch = 0;
    std::vector<std::byte> payload;
};

inline constexpr std::size_t kHopsOffset = 16, kEpochOffset = 20, kHeadSize = 24;

// A relay's routing counters. RELAY_STATS: str host, then these as u64.
struct Counters {
    std::uint64_t frames = 0;    // DATA frames its VPs originated
    std::uint64_t bytes = 0;     // their payload bytes
    std::uint64_t local = 0;     // of those, delivered on their own host
    std::uint64_t forwarded = 0; // DATA frames forwarded (a stale entry elsewhere)
    std::uint64_t held = 0;      // DATA frames that waited for their VP
    Counters& operator+=(const Counters& o);
};
std::vector<std::byte> encode_stats(std::string_view host, const Counters& n);
// EPROTO when the payload is malformed.
Result<Counters> decode_stats(std::span<const std::byte> payload);

// EPROTO when the payload is malformed.
Result<DataFrame> decode_data(std::vector<std::byte> payload);
// Set the hop count or the epoch in the frame and its payload.
void set_hops(DataFrame& f, std::uint32_t hops);
void set_epoch(DataFrame& f, std::uint32_t epoch);

// DELIVER_RELAYED's flags: return the DELIVER completed (the VP is about to
// move); its get replies come as DATA frames (else the hub's DELIVER has them).
inline constexpr std::uint32_t kDeliverBack = 1, kRepliesRelayed = 2;

// Relaying get replies pays off only for large ones: on the test cluster
// relaying them was slower up to 4 kB per pair, even at 16 kB, and faster
// from 32 kB (bench/bsp_routing_bench, Documentation/performance.md).
// Whether the gets of a superstep read kRelayGetsMin bytes per pair of VPs
// on average.
inline constexpr std::uint64_t kRelayGetsMin = 24 * 1024;
bool worth_relaying(std::span<const SyncRequest> syncs);

// The gets that read from one VP, for its relay (GETS_RELAYED, hub ->
// relay): u64 superstep (the one the VPs end), u32 n + n × (u32 requester,
// u32 index among the requester's gets, u64 registration, u64 offset, u64
// length), in the order of gets_for(): by requester, then call order.
struct RoutedGet {
    std::uint32_t requester = 0, index = 0;
    std::uint64_t reg = 0, off = 0, len = 0;
};
struct RoutedGets {
    std::uint64_t superstep = 0;
    std::vector<RoutedGet> gets;
};
// The GETS_RELAYED payload for target, or nothing when no VP reads from it.
std::optional<std::vector<std::byte>> encode_routed_gets(std::uint32_t target,
                                                         std::uint64_t superstep,
                                                         std::span<const SyncRequest> syncs);
// EPROTO when the payload is malformed.
Result<RoutedGets> decode_routed_gets(std::span<const std::byte> payload);
// The GETS payload the target VP reads (what gets_for() gives it).
std::vector<std::byte> plain_gets(const RoutedGets& g);
// The target's GETDATA cut into one DATA frame per requester, in requester
// order. EPROTO when its size is not the sum of the lengths.
Result<std::vector<DataFrame>> split_replies(const RoutedGets& g, std::span<const std::byte> data,
                                             std::uint32_t source);

// Takes s's puts and messages out of it: one DATA frame per target, in
// target order, and s.relayed says how many frames and bytes went to whom.
std::vector<DataFrame> strip_sync(SyncRequest& s, std::uint32_t source);

// The DELIVER payload with the frames' puts and messages in its last two
// sections, by source VP (the hub's DELIVER for a relayed VP has none
// there), and with replies_relayed their get replies in its gets section
// (where the hub's has an empty reply in each place; else the hub's replies
// stay). nprocs: the job's (a registration carries every VP's size).
// EPROTO on a malformed DELIVER or frame, a reply for a get the VP did not
// make, two for one get, or one missing.
Result<std::vector<std::byte>> splice_deliver(std::span<const std::byte> deliver,
                                              std::vector<DataFrame> frames, int nprocs,
                                              bool replies_relayed);

} // namespace ghost::bsp::relay
