// SPDX-License-Identifier: GPL-2.0
// The hub protocol of the bsp/ runtime: frames between a virtual processor
// (VP) and its host's hub over a Unix stream socket, and the little-endian
// encoding of their payloads (Documentation/bsp.md, "The hub protocol").
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ghost/fd.hpp"
#include "ghost/result.hpp"

namespace ghost::bsp::wire {

// 2: SYNC carries its superstep and the relayed counts (relays, bsp/relay/).
inline constexpr std::uint32_t kVersion = 2;
// The relays' protocol, in RELAY_HELLO (frames 11-18): 3: DATA frames carry
// get replies, and the hub sends a relay GETS_RELAYED.
inline constexpr std::uint32_t kRelayVersion = 3;
// Largest payload accepted (1 GiB): a bound against a corrupt header.
inline constexpr std::uint64_t kMaxPayload = std::uint64_t{1} << 30;

enum class Type : std::uint32_t {
    Hello = 1,    // VP -> hub: version, vp, nprocs, resumed, job
    Sync = 2,     // VP -> hub: the superstep's communication and statistics
    Gets = 3,     // hub -> VP: (registration, offset, length) to read now
    GetData = 4,  // VP -> hub: the bytes of those reads, concatenated
    Deliver = 5,  // hub -> VP: what the barrier brings this VP
    Detach = 6,   // hub -> VP: close the socket and wait for SIGUSR2
    Detached = 7, // VP -> hub: about to close and wait
    End = 8,      // VP -> hub: bsp_end
    EndOk = 9,    // hub -> VP: every VP called bsp_end
    Abort = 10,   // VP -> hub: bsp_abort or misuse, with the message
    // Relays (bsprun --routing relay, bsp/relay/): a process per host that
    // carries its VPs' puts and messages to the target's host directly.
    RelayHello = 11,     // relay -> hub: version, job, host, its TCP address
    Directory = 12,      // hub -> relay: every relay's host and address
    Route = 13,          // hub -> relay: (vp, host index) link-table entries
    Data = 14,           // relay -> relay: one VP's puts and messages to one VP
    DeliverRelayed = 15, // hub -> relay: expected DATA count, back flag, DELIVER
    DeliverBack = 16,    // relay -> hub: the completed DELIVER of a VP to move
    RelayStats = 17,     // relay -> hub (after END): its routing counters
    GetsRelayed = 18,    // hub -> relay: a VP's GETS with each get's requester
    // The guard (bsprun --on-failure rollback across hosts): a process on
    // another host that rolls the job back if bsprun itself is lost.
    GuardHello = 19,   // guard -> hub: version, job, its host
    GuardRelease = 20, // hub -> guard: bsprun is in control to the end, stand down
};

std::string_view type_name(Type t);

// A frame is a 16-byte header (u32 type, u32 reserved = 0, u64 payload
// length; little-endian) and the payload.
struct Frame {
    Type type{};
    std::vector<std::byte> payload;
};

class Writer {
  public:
    void u8(std::uint8_t v) { buf_.push_back(static_cast<std::byte>(v)); }
    void u32(std::uint32_t v);
    void u64(std::uint64_t v);
    void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
    void f64(double v);
    void bytes(std::span<const std::byte> b) { buf_.insert(buf_.end(), b.begin(), b.end()); }
    void blob(std::span<const std::byte> b) { // u64 length, then the bytes
        u64(b.size());
        bytes(b);
    }
    void str(std::string_view s) { blob(std::as_bytes(std::span(s.data(), s.size()))); }
    // Overwrites a u32 written earlier at offset at (a count known later).
    void patch_u32(std::size_t at, std::uint32_t v);
    std::size_t size() const { return buf_.size(); }
    std::span<const std::byte> data() const { return buf_; }
    void clear() { buf_.clear(); }

  private:
    std::vector<std::byte> buf_;
};

// Reads a payload front to back. A read past the end sets failed() and
// returns zeros (or an empty span), so a parser checks once at the end.
class Reader {
  public:
    explicit Reader(std::span<const std::byte> b) : b_(b) {}
    std::uint8_t u8();
    std::uint32_t u32();
    std::uint64_t u64();
    std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
    double f64();
    std::span<const std::byte> bytes(std::uint64_t n);
    std::span<const std::byte> blob() { return bytes(u64()); }
    std::string str();
    bool failed() const { return failed_; }
    bool at_end() const { return pos_ == b_.size(); }
    std::size_t position() const { return pos_; } // bytes read so far

  private:
    std::span<const std::byte> b_;
    std::size_t pos_ = 0;
    bool failed_ = false;
};

// A frame header: the frame (type set) and its payload length, or EPROTO
// for a bad header. Frames are sent and received on a Link (link.hpp).
Result<std::pair<Frame, std::uint64_t>> decode_header(std::span<const std::byte, 16> hdr);

// The abstract socket name of a job's hub on this host (network namespace):
// "\0ghost-bsp/<job>".
std::string socket_name(std::string_view job);
Result<UniqueFd> listen_abstract(std::string_view job);
Result<UniqueFd> connect_abstract(std::string_view job);
// The process at the other end of a connected Unix socket (SO_PEERCRED).
pid_t peer_pid(int fd);
// Whether that process runs as this process's user (or root): an abstract
// socket has no permissions, so anyone on the host may connect to it.
bool peer_is_ours(int fd);

} // namespace ghost::bsp::wire
