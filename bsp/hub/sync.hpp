// SPDX-License-Identifier: GPL-2.0
// The barrier's data, pure: a VP's SYNC frame decoded, the collective checks
// (registrations, tag size) and the DELIVER frame built for each VP.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ghost/result.hpp"
#include "wire.hpp"

namespace ghost::bsp {

using wire::Frame;

enum RegKind : std::uint8_t { kPush = 1, kPop = 2 };

struct RegOp {
    std::uint8_t kind = 0;
    std::uint64_t id = 0;  // the registration's number (k-th push of the job)
    std::int64_t size = 0; // push: this VP's size
};
struct PutRec {
    std::uint32_t pid = 0; // target
    std::uint64_t reg = 0, off = 0;
    std::span<const std::byte> data;
};
struct GetRec {
    std::uint32_t pid = 0; // source
    std::uint64_t reg = 0, off = 0, len = 0;
};
struct MsgRec {
    std::uint32_t pid = 0; // destination
    std::span<const std::byte> tag, payload;
};

// What a relay took out of a SYNC for one target: that many DATA frames
// (one per source VP and target) of that many payload bytes.
struct RelayedRec {
    std::uint32_t pid = 0; // target
    std::uint32_t frames = 0;
    std::uint64_t bytes = 0; // put data, message tags and payloads
};

struct SyncRequest {
    double wall = 0, cpu = 0;
    std::uint64_t bytes_sent = 0;
    std::uint64_t memory_bytes = 0; // resident size at the sync
    std::uint64_t instructions = 0; // user-mode instructions of the computation, if counted
    int instructions_errno = 0;     // why they were not (perf_event_open's errno); 0: counted
    std::uint64_t superstep = 0;    // the superstep the VP ends
    std::int64_t tagsize = -1;      // a bsp_set_tagsize of the superstep, else -1
    std::vector<RegOp> ops;
    std::vector<PutRec> puts;
    std::vector<GetRec> gets;
    std::vector<MsgRec> msgs;
    std::vector<RelayedRec> relayed; // filled in by the VP's relay
    std::vector<std::byte> storage;  // the frame's payload the spans point into
};

// EPROTO naming the field on a malformed payload or a pid out of range.
Result<SyncRequest> decode_sync(std::vector<std::byte> payload, int nprocs);

// The SYNC payload of s (what decode_sync reads back).
std::vector<std::byte> encode_sync(const SyncRequest& s);

// The collective rules of one superstep: every VP did the same registration
// operations in the same order, and set the same tag size (or none did).
// Returns the message for the user, or an empty string; *tagsize becomes the
// tag size of the next superstep.
std::string check_collectives(std::span<const SyncRequest> syncs, std::uint64_t superstep,
                              std::int64_t* tagsize);

// The GETS payload for VP target: every get of every VP that reads from it,
// by requesting VP then call order.
std::vector<std::byte> gets_for(int target, std::span<const SyncRequest> syncs);

// Splits target's GETDATA answers back to the requesters: replies[r] gets
// the bytes of r's gets, in r's call order. EPROTO when the size is wrong.
Result<void> split_getdata(int target, std::span<const std::byte> data,
                           std::span<const SyncRequest> syncs,
                           std::vector<std::vector<std::span<const std::byte>>>& per_get);

// The DELIVER payload for VP v (layout in Documentation/bsp.md).
std::vector<std::byte> build_deliver(int v, std::uint64_t superstep, std::int64_t tagsize,
                                     std::span<const SyncRequest> syncs,
                                     std::span<const std::span<const std::byte>> get_replies);

} // namespace ghost::bsp
