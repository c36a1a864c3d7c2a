// SPDX-License-Identifier: GPL-2.0
// libFuzzer target over ghost::image::read (tests/fuzz/run builds and runs
// it). Each input is read twice: whole, from a span, with an on_pages
// callback that touches every byte it is given; and through a source that
// returns a few bytes at a time (sizes taken from the input's own bytes), so
// that short reads at every boundary are exercised. Both reads must reach the
// same verdict, and an accepted image must encode back to the bytes it came
// from (or, when it had a form encode() does not reproduce, such as a
// skipped section or a larger record, to a canonical image that reads back
// and encodes to itself). Crashes, leaks, undefined behaviour, hangs (-timeout) and large
// allocations (-malloc_limit_mb) are what libFuzzer reports.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <span>
#include <vector>

#include "ghost/image.hpp"

namespace {

namespace img = ghost::image;

// Short reads: each call gives 1 to 16 bytes, the count taken from the data.
class Chunked final : public img::Source {
  public:
    explicit Chunked(std::span<const std::byte> d) : d_(d) {}
    ghost::Result<std::size_t> read(std::span<std::byte> buf) override {
        const std::size_t want =
            1 + (off_ < d_.size() ? static_cast<std::size_t>(d_[off_]) % 16 : 0);
        const std::size_t n = std::min({buf.size(), d_.size() - off_, want});
        if (n)
            std::memcpy(buf.data(), d_.data() + off_, n);
        off_ += n;
        return n;
    }

  private:
    std::span<const std::byte> d_;
    std::size_t off_ = 0;
};

void check(bool ok) {
    if (!ok)
        std::abort();
}

volatile std::uint64_t g_sink; // keeps the touched bytes' sum alive

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto in = std::as_bytes(std::span(data, size));

    // Whole, keeping the page data by address for the re-encoding below.
    std::map<std::uint64_t, std::vector<std::byte>> pages;
    std::uint64_t sum = 0;
    img::ReadOptions o;
    o.max_bytes = 8 << 20;
    o.on_pages = [&](const img::Vma& v, const img::PageRun& r,
                     std::span<const std::byte> d) -> ghost::Result<void> {
        check(d.size() == r.nr_pages * 4096 && d.size() <= img::kPagesChunk);
        check(r.addr >= v.rec.start && r.addr + d.size() <= v.rec.end);
        for (auto b : d) // touch all of it: ASan checks the span is real
            sum += static_cast<std::uint8_t>(b);
        for (std::uint64_t i = 0; i < r.nr_pages; i++)
            pages[r.addr + i * 4096].assign(d.begin() + i * 4096, d.begin() + (i + 1) * 4096);
        return {};
    };
    auto whole = img::read(in, o);

    Chunked src(in);
    img::ReadOptions limit;
    limit.max_bytes = o.max_bytes;
    auto chunked = img::read(src, limit);
    check(bool(whole) == bool(chunked));
    if (!whole) {
        check(whole.error().code == std::errc::bad_message ||
              whole.error().code == std::errc::file_too_large);
        check(!whole.error().message.empty());
        g_sink = sum;
        if (!chunked && whole.error().code == std::errc::bad_message)
            check(whole.error().message == chunked.error().message);
        return 0;
    }

    // Accepted: re-encoding gives the bytes back (what follows END aside).
    std::vector<std::byte> buf;
    const auto again = img::encode(*whole, [&](const img::Vma&, const img::PageRun& r) {
        buf.clear();
        for (std::uint64_t i = 0; i < r.nr_pages; i++) {
            const auto& p = pages.at(r.addr + i * 4096);
            buf.insert(buf.end(), p.begin(), p.end());
        }
        return std::span<const std::byte>(buf);
    });
    check(whole->bytes <= size);
    if (whole->exact) {
        check(again.size() == whole->bytes);
        check(std::memcmp(again.data(), data, again.size()) == 0);
    } else {
        // A newer form (skipped sections, larger or older records): encode()
        // wrote the canonical one, which reads back as the same image and
        // re-encodes to itself.
        auto canon = img::read(again);
        check(bool(canon) && canon->exact && canon->skipped == 0);
        const auto twice = img::encode(*canon, [&](const img::Vma&, const img::PageRun& r) {
            buf.clear();
            for (std::uint64_t i = 0; i < r.nr_pages; i++) {
                const auto& p = pages.at(r.addr + i * 4096);
                buf.insert(buf.end(), p.begin(), p.end());
            }
            return std::span<const std::byte>(buf);
        });
        check(twice == again);
    }
    g_sink = sum;
    return 0;
}
