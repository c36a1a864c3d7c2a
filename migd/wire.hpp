// SPDX-License-Identifier: GPL-2.0
// Framing of the peer protocol (Documentation/migd-protocol.md): every frame
// is a 8-byte header (type, length, both little-endian u32) and a payload.
// JSON frames carry requests and replies; an image travels as DATA frames
// closed by END (sent once the export succeeded) or ABORT (with a reason).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "channel.hpp"
#include "ghost/image.hpp"
#include "ghost/result.hpp"
#include "zerocopy.hpp"

namespace migd {

enum class FrameType : std::uint32_t { Json = 1, Data = 2, End = 3, Abort = 4 };

inline constexpr std::size_t frame_header_size = 8;
inline constexpr std::size_t max_json_frame = 4 << 20; // a job manifest of ~50,000 VPs
inline constexpr std::size_t max_data_frame = 1 << 20;

using nlohmann::json;

// A frame's header: type and payload length, little-endian.
void put_header(std::span<std::byte, frame_header_size> h, FrameType type, std::uint32_t len);

ghost::Result<void> send_json(Channel& ch, const json& j);
// The next frame, which must be JSON; an ABORT frame becomes an error with
// its reason (ECANCELED), anything else a protocol error (EPROTO).
ghost::Result<json> recv_json(Channel& ch);

ghost::Result<void> send_end(Channel& ch);
ghost::Result<void> send_abort(Channel& ch, const std::string& reason);

// Copies everything readable from fd (a pipe the engine exports into, or a
// stored image file) to ch as DATA frames until fd's end; counts bytes in
// *sent. Does not send END. Image frames go on ch's stream plane: moved by
// the kernel (zerocopy.hpp) where that is the socket itself.
ghost::Result<void> send_stream(Channel& ch, int fd, std::atomic<std::uint64_t>* sent = nullptr);

// Reads DATA frames as a byte source until END (then read() returns 0). An
// ABORT frame is an error with the sender's reason; every byte read is also
// handed to tee (a file) or written to tee_pipe (a restore stub's pipe)
// before read() returns it.
class FrameSource final : public ghost::image::Source {
  public:
    using Tee = std::function<ghost::Result<void>(std::span<const std::byte>)>;
    FrameSource(Channel& ch, Tee tee) : ch_(ch), tee_(std::move(tee)) {}
    FrameSource(Channel& ch, int tee_pipe) : ch_(ch), pipe_(tee_pipe) {}
    ghost::Result<std::size_t> read(std::span<std::byte> buf) override;
    // With tee_pipe: the next n bytes go into tee_pipe and not through the
    // image reader (page data, which the restore stub checks:
    // image::ReadOptions::skip_pages): from the socket by splice(2) where
    // the stream plane is the socket, else read out of the TLS records and
    // written on. False without tee_pipe (or once its reader is gone), and
    // nothing moved.
    ghost::Result<bool> skip(std::uint64_t n) override;
    // Reads and tees whatever DATA is left up to END (an image's reader
    // stops at its END section; a well-formed stream has nothing after it).
    ghost::Result<void> drain();
    bool ended() const { return ended_; }
    std::uint64_t bytes() const { return bytes_; }
    // tee_pipe's reader stopped reading: it closed its end (the stub
    // refused the image), or took nothing for the channel's timeout
    // (stalled(): the stub is stuck). The rest is read and dropped.
    bool pipe_gone() const { return pipe_gone_; }
    bool stalled() const { return stalled_; }

  private:
    // Until a DATA frame has bytes left: false at END.
    ghost::Result<bool> next_data();
    // Writes b to tee_pipe, until its reader is gone.
    void give(std::span<const std::byte> b);
    Channel& ch_;
    Tee tee_;
    int pipe_ = -1;
    bool pipe_gone_ = false;
    bool stalled_ = false;
    std::uint32_t left_ = 0; // bytes of the current DATA frame not yet read
    bool ended_ = false;
    std::uint64_t bytes_ = 0;
};

} // namespace migd
