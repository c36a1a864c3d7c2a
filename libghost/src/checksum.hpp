// SPDX-License-Identifier: LGPL-2.1-or-later
// The END checksum of an image as it streams through a reader or writer:
// crc32c, or XXH64 (seed 0) in images with GHOST_IMAGE_FEAT_XXH64. XXH64
// is plain 64-bit multiplies and rotates: as fast as the 3-lane crc32c
// natively, and many times faster where the crc32 instruction is emulated
// (the test VM's TCG), where crc32c was most of a checkpoint + restart.
#ifndef GHOST_SRC_CHECKSUM_HPP
#define GHOST_SRC_CHECKSUM_HPP

#include <cstddef>
#include <cstdint>
#include <span>

#define XXH_STATIC_LINKING_ONLY // XXH64_state_t by value: no allocation
#include <xxhash.h>

namespace ghost::image {

class Checksum {
  public:
    Checksum();
    // From now on the sum is XXH64 over every byte, of which the first
    // ones, already accounted as crc32c, are @seen (the header that asked
    // for it).
    void use_xxh64(std::span<const std::byte> seen);
    void update(std::span<const std::byte> b);
    // The sum so far (a crc32c in the low 32 bits, or the XXH64), and what
    // it would be after @more bytes, without taking them.
    std::uint64_t value(std::span<const std::byte> more = {}) const;
    bool xxh64() const { return xxh64_; }

  private:
    bool xxh64_ = false;
    std::uint32_t crc_ = 0;
    XXH64_state_t state_{};
};

} // namespace ghost::image

#endif
