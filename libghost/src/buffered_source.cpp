// SPDX-License-Identifier: LGPL-2.1-or-later
#include "buffered_source.hpp"

#include <algorithm>

namespace ghost {

std::size_t BufferedSource::give(std::span<std::byte> buf) {
    const std::size_t n = std::min(buf.size(), held());
    std::copy_n(buf_.begin() + static_cast<std::ptrdiff_t>(pos_), n, buf.begin());
    pos_ += n;
    return n;
}

Result<std::size_t> BufferedSource::read(std::span<std::byte> buf) {
    if (held() || buf.empty())
        return give(buf);
    if (buf.size() >= buf_.size() / 2)
        return in_.read(buf);
    auto n = in_.read(buf_);
    if (!n)
        return n.error();
    pos_ = 0;
    end_ = *n;
    return give(buf);
}

std::span<const std::byte> BufferedSource::take(std::size_t n) {
    if (n == 0 || held() < n)
        return {};
    const std::span<const std::byte> out(buf_.data() + pos_, n);
    pos_ += n;
    return out;
}

Result<std::size_t> BufferedSource::read_placed(std::span<std::byte> buf) {
    if (held() || buf.empty())
        return give(buf);
    return in_.read_placed(buf);
}

Result<bool> BufferedSource::skip(std::uint64_t n) {
    if (n <= held()) {
        pos_ += static_cast<std::size_t>(n);
        return true;
    }
    // The source is past what is held: skip the rest there, or nothing.
    auto r = in_.skip(n - held());
    if (r && *r)
        pos_ = end_ = 0;
    return r;
}

} // namespace ghost
