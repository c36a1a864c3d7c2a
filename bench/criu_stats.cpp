// SPDX-License-Identifier: GPL-2.0
// CRIU's stats-dump, decoded by hand (criu/include/magic.h for the magics,
// images/stats.proto for the fields; times are microseconds).
#include "criu_stats.hpp"

#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace bench {

namespace {

constexpr std::uint32_t kServiceMagic = 0x55105940; // IMG_SERVICE_MAGIC
constexpr std::uint32_t kStatsMagic = 0x57093306;   // STATS_MAGIC

// A protobuf reader of varints and length-delimited fields: enough for
// stats.proto, whose fields are all integers or nested messages.
class Pb {
  public:
    explicit Pb(std::span<const std::byte> b) : b_(b) {}
    bool done() const { return at_ >= b_.size(); }
    bool varint(std::uint64_t& v) {
        v = 0;
        for (int shift = 0; shift < 64 && at_ < b_.size(); shift += 7) {
            const auto x = static_cast<std::uint8_t>(b_[at_++]);
            v |= static_cast<std::uint64_t>(x & 0x7f) << shift;
            if (!(x & 0x80))
                return true;
        }
        return false;
    }
    // The next field: its number, wire type and, for a varint, its value;
    // for a length-delimited field, its bytes. Fixed-size fields are skipped.
    bool field(std::uint32_t& num, std::uint64_t& value, std::span<const std::byte>& bytes) {
        std::uint64_t key;
        if (!varint(key))
            return false;
        num = static_cast<std::uint32_t>(key >> 3);
        switch (key & 7) {
        case 0:
            return varint(value);
        case 1:
            return skip(8);
        case 5:
            return skip(4);
        case 2: {
            std::uint64_t n;
            if (!varint(n) || n > b_.size() - at_)
                return false;
            bytes = b_.subspan(at_, n);
            at_ += n;
            return true;
        }
        default:
            return false;
        }
    }

  private:
    bool skip(std::size_t n) {
        if (n > b_.size() - at_)
            return false;
        at_ += n;
        return true;
    }
    std::span<const std::byte> b_;
    std::size_t at_ = 0;
};

std::uint32_t u32_at(std::span<const std::byte> b, std::size_t off) {
    std::uint32_t v;
    std::memcpy(&v, b.data() + off, 4);
    return v;
}

} // namespace

bool parse_criu_stats_dump(std::span<const std::byte> file, CriuDumpStats& out, std::string& why) {
    if (file.size() < 12) {
        why = fmt::format("{} bytes: too short for a CRIU stats file", file.size());
        return false;
    }
    if (u32_at(file, 0) != kServiceMagic || u32_at(file, 4) != kStatsMagic) {
        why = fmt::format("magics {:#010x} {:#010x}: not a CRIU stats file (want {:#010x} "
                          "{:#010x})",
                          u32_at(file, 0), u32_at(file, 4), kServiceMagic, kStatsMagic);
        return false;
    }
    const std::uint32_t size = u32_at(file, 8);
    if (size > file.size() - 12) {
        why = fmt::format("the entry claims {} bytes, {} follow", size, file.size() - 12);
        return false;
    }
    Pb entry(file.subspan(12, size));
    bool have_dump = false, have_frozen = false;
    while (!entry.done()) {
        std::uint32_t num;
        std::uint64_t v = 0;
        std::span<const std::byte> sub;
        if (!entry.field(num, v, sub)) {
            why = "the stats entry is not valid protobuf";
            return false;
        }
        if (num != 1 || sub.empty())
            continue; // restore stats, or an unknown field
        have_dump = true;
        Pb dump(sub);
        while (!dump.done()) {
            std::span<const std::byte> ignored;
            if (!dump.field(num, v, ignored)) {
                why = "the dump stats are not valid protobuf";
                return false;
            }
            const double ms = static_cast<double>(v) / 1e3;
            if (num == 1)
                out.freezing_ms = ms;
            else if (num == 2)
                out.frozen_ms = ms, have_frozen = true;
            else if (num == 3)
                out.memdump_ms = ms;
        }
    }
    if (!have_dump || !have_frozen) {
        why = have_dump ? "the dump stats have no frozen_time" : "the file holds no dump stats";
        return false;
    }
    return true;
}

} // namespace bench
