// SPDX-License-Identifier: LGPL-2.1-or-later
#include "checksum.hpp"

#include "ghost/image.hpp"

namespace ghost::image {

std::uint64_t xxh64(std::span<const std::byte> data) {
    return XXH64(data.data(), data.size(), 0);
}

Checksum::Checksum() {
    XXH64_reset(&state_, 0);
}

void Checksum::use_xxh64(std::span<const std::byte> seen) {
    xxh64_ = true;
    XXH64_reset(&state_, 0);
    update(seen);
}

void Checksum::update(std::span<const std::byte> b) {
    if (b.empty())
        return;
    if (xxh64_)
        XXH64_update(&state_, b.data(), b.size());
    else
        crc_ = crc32c(crc_, b);
}

std::uint64_t Checksum::value(std::span<const std::byte> more) const {
    if (!xxh64_)
        return crc32c(crc_, more);
    if (more.empty())
        return XXH64_digest(&state_);
    XXH64_state_t s = state_;
    XXH64_update(&s, more.data(), more.size());
    return XXH64_digest(&s);
}

} // namespace ghost::image
