// SPDX-License-Identifier: LGPL-2.1-or-later
// A source read ahead in large pieces (not installed).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "ghost/image.hpp"

namespace ghost {

// The image reader asks for a 16-byte section header, then its payload,
// then the next header: read straight from a descriptor, every record costs
// a system call, which under emulation (the test VM) is most of a small
// image's restart. This reads ahead up to kCapacity bytes and serves small
// reads from what it holds; a read at least half that size, and page data
// placed by the reader (Source::read_placed), go straight to the source once
// what is held is used up.
//
// It reads ahead, so the source must carry the image (or a pre-copy's
// images) to its end: bytes after it that another reader expects would be
// taken. Every reader of a whole checkpoint file or restore stream is such
// a reader.
class BufferedSource final : public image::Source {
  public:
    static constexpr std::size_t kCapacity = 64 << 10;

    explicit BufferedSource(image::Source& in) : in_(in), buf_(kCapacity) {}
    explicit BufferedSource(std::unique_ptr<image::Source> owned)
        : owned_(std::move(owned)), in_(*owned_), buf_(kCapacity) {}

    Result<std::size_t> read(std::span<std::byte> buf) override;
    std::span<const std::byte> take(std::size_t n) override;
    Result<std::size_t> read_placed(std::span<std::byte> buf) override;
    Result<bool> skip(std::uint64_t n) override;

  private:
    std::size_t held() const { return end_ - pos_; }
    std::size_t give(std::span<std::byte> buf);

    std::unique_ptr<image::Source> owned_;
    image::Source& in_;
    std::vector<std::byte> buf_;
    std::size_t pos_ = 0;
    std::size_t end_ = 0;
};

} // namespace ghost
