// SPDX-License-Identifier: LGPL-2.1-or-later
// CRC-32C (Castagnoli), the checksum of a ghost image's END section; it must
// give what the kernel's crc32c() gives (ghost.ko computes it while writing).
// SSE4.2 has an instruction for exactly this polynomial (run in three
// interleaved chains over long data); other CPUs use slicing-by-8 tables,
// built at compile time.
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

__attribute__((target("sse4.2"))) std::uint32_t crc_sse42_1(std::uint32_t c, const unsigned char* p,
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

// The crc32 instruction takes 3 cycles to give its result but can start one
// every cycle: one chain over the data runs at a third of the instruction's
// speed. Long data is therefore cut into blocks of three lanes of kLane
// bytes, each lane its own chain, and the lanes are joined with the linear
// map "append kLane zero bytes" (a raw CRC register is linear in the zero
// bytes that follow): crc(c, A B C) = Z(Z(crc(c, A)) ^ crc(0, B)) ^ crc(0, C).
constexpr std::size_t kLane = 4096;

// Z as four byte tables (Z is linear: Z(x) is the XOR of Z of its bytes).
struct ShiftTables {
    std::uint32_t t[4][256];
};

__attribute__((target("sse4.2"))) ShiftTables make_shift_tables() {
    static const unsigned char zeros[kLane] = {};
    std::uint32_t basis[32];
    for (int b = 0; b < 32; b++)
        basis[b] = crc_sse42_1(1u << b, zeros, kLane);
    ShiftTables x{};
    for (int k = 0; k < 4; k++)
        for (std::uint32_t v = 0; v < 256; v++) {
            std::uint32_t z = 0;
            for (int b = 0; b < 8; b++)
                if (v & (1u << b))
                    z ^= basis[8 * k + b];
            x.t[k][v] = z;
        }
    return x;
}

std::uint32_t shift_lane(const ShiftTables& z, std::uint32_t c) {
    return z.t[0][c & 0xff] ^ z.t[1][(c >> 8) & 0xff] ^ z.t[2][(c >> 16) & 0xff] ^ z.t[3][c >> 24];
}

__attribute__((target("sse4.2"))) std::uint32_t crc_sse42(std::uint32_t c, const unsigned char* p,
                                                          std::size_t n) {
    static const ShiftTables z = make_shift_tables();
    for (; n >= 3 * kLane; p += 3 * kLane, n -= 3 * kLane) {
        std::uint64_t a = c, b = 0, d = 0;
        for (std::size_t i = 0; i < kLane; i += 8) {
            std::uint64_t wa, wb, wd;
            std::memcpy(&wa, p + i, 8);
            std::memcpy(&wb, p + kLane + i, 8);
            std::memcpy(&wd, p + 2 * kLane + i, 8);
            a = _mm_crc32_u64(a, wa);
            b = _mm_crc32_u64(b, wb);
            d = _mm_crc32_u64(d, wd);
        }
        c = shift_lane(z, shift_lane(z, static_cast<std::uint32_t>(a)) ^
                              static_cast<std::uint32_t>(b)) ^
            static_cast<std::uint32_t>(d);
    }
    return crc_sse42_1(c, p, n);
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
