// SPDX-License-Identifier: LGPL-2.1-or-later
// CRC-32C (Castagnoli), the checksum of a ghost image's END section; it must
// give what the kernel's crc32c() gives (ghost.ko computes it while writing).
// SSE4.2 has an instruction for exactly this polynomial; other CPUs use
// slicing-by-8 tables, built at compile time.
#include <cstring>

#include <nmmintrin.h>

#include "ghost/image.hpp"

namespace ghost::image {

namespace {

constexpr std::uint32_t kPoly = 0x82F63B78u; // reflected Castagnoli polynomial

struct Tables {
    std::uint32_t t[8][256];
};

constexpr Tables make_tables() {
    Tables x{};
    for (std::uint32_t i = 0; i < 256; i++) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (kPoly & (0u - (c & 1)));
        x.t[0][i] = c;
    }
    for (int j = 1; j < 8; j++)
        for (int i = 0; i < 256; i++)
            x.t[j][i] = (x.t[j - 1][i] >> 8) ^ x.t[0][x.t[j - 1][i] & 0xff];
    return x;
}

constexpr Tables kTables = make_tables();

// Both take and return the raw register (not inverted).
std::uint32_t crc_portable(std::uint32_t c, const unsigned char* p, std::size_t n) {
    const auto& t = kTables.t;
    for (; n >= 8; p += 8, n -= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8); // little-endian: x86-64 is the only architecture
        w ^= c;
        c = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^
            t[4][(w >> 24) & 0xff] ^ t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^
            t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
    }
    while (n--)
        c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

__attribute__((target("sse4.2"))) std::uint32_t crc_sse42(std::uint32_t c, const unsigned char* p,
                                                          std::size_t n) {
    std::uint64_t c64 = c;
    for (; n >= 8; p += 8, n -= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);
        c64 = _mm_crc32_u64(c64, w);
    }
    c = static_cast<std::uint32_t>(c64);
    while (n--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}

const unsigned char* bytes(std::span<const std::byte> data) {
    return reinterpret_cast<const unsigned char*>(data.data());
}

} // namespace

std::uint32_t crc32c_portable(std::uint32_t crc, std::span<const std::byte> data) {
    return ~crc_portable(~crc, bytes(data), data.size());
}

std::uint32_t crc32c(std::uint32_t crc, std::span<const std::byte> data) {
    static const bool sse42 = __builtin_cpu_supports("sse4.2");
    const std::uint32_t c = ~crc;
    return ~(sse42 ? crc_sse42(c, bytes(data), data.size())
                   : crc_portable(c, bytes(data), data.size()));
}

} // namespace ghost::image
