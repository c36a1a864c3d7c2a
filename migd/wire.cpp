// SPDX-License-Identifier: GPL-2.0
#include "wire.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "json_text.hpp"

namespace migd {

namespace {

using ghost::Error;
using ghost::Result;

void put_u32(std::byte* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i)
        p[i] = static_cast<std::byte>(v >> (8 * i));
}

// JSON messages go on a channel's message plane (always TLS on a TLS
// channel), an image's DATA, END and ABORT frames on its stream plane
// (Channel::set_clear()).
enum class Plane { Message, Stream };

Result<std::size_t> plane_read(Channel& ch, Plane p, std::span<std::byte> buf) {
    return p == Plane::Stream ? ch.stream_read(buf) : ch.read(buf);
}

std::uint32_t get_u32(const std::byte* p) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
        v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
    return v;
}

Result<void> read_exact(Channel& ch, std::span<std::byte> buf, Plane plane) {
    std::size_t got = 0;
    while (got < buf.size()) {
        auto n = plane_read(ch, plane, buf.subspan(got));
        if (!n)
            return n.error();
        if (*n == 0)
            return Error::from_errno(ECONNRESET,
                                     fmt::format("{} closed the connection in the middle of a "
                                                 "message",
                                                 ch.peer().empty() ? "the peer" : ch.peer()));
        got += *n;
    }
    return {};
}

Result<void> send_frame(Channel& ch, FrameType type, std::span<const std::byte> payload,
                        Plane plane) {
    std::vector<std::byte> buf(frame_header_size + payload.size());
    put_header(std::span(buf).first<frame_header_size>(), type,
               static_cast<std::uint32_t>(payload.size()));
    if (!payload.empty())
        std::memcpy(buf.data() + frame_header_size, payload.data(), payload.size());
    return plane == Plane::Stream ? ch.stream_write(buf) : ch.write(buf);
}

struct Header {
    FrameType type;
    std::uint32_t len;
};

Result<Header> read_header(Channel& ch, Plane plane) {
    std::byte h[frame_header_size];
    if (auto r = read_exact(ch, h, plane); !r)
        return r.error();
    const std::uint32_t type = get_u32(h);
    const std::uint32_t len = get_u32(h + 4);
    if (type < 1 || type > 4)
        return Error::from_errno(EPROTO,
                                 fmt::format("malformed frame from {}: type {}", ch.peer(), type));
    if ((type == 2 && len > max_data_frame) || (type != 2 && len > max_json_frame))
        return Error::from_errno(EPROTO,
                                 fmt::format("malformed frame from {}: {} bytes", ch.peer(), len));
    return Header{static_cast<FrameType>(type), len};
}

Result<std::string> read_text(Channel& ch, std::uint32_t len, Plane plane) {
    std::string s(len, '\0');
    if (auto r = read_exact(ch, std::as_writable_bytes(std::span(s)), plane); !r)
        return r.error();
    return s;
}

Error aborted(Channel& ch, std::uint32_t len, Plane plane) {
    auto why = read_text(ch, len, plane);
    if (!why)
        return why.error();
    return Error::from_errno(ECANCELED, *why);
}

} // namespace

void put_header(std::span<std::byte, frame_header_size> h, FrameType type, std::uint32_t len) {
    put_u32(h.data(), static_cast<std::uint32_t>(type));
    put_u32(h.data() + 4, len);
}

Result<void> send_json(Channel& ch, const json& j) {
    const std::string s = json_text(j);
    if (s.size() > max_json_frame)
        return Error::from_errno(EMSGSIZE, "message too long for the peer protocol");
    return send_frame(ch, FrameType::Json, std::as_bytes(std::span(s)), Plane::Message);
}

Result<json> recv_json(Channel& ch) {
    auto h = read_header(ch, Plane::Message);
    if (!h)
        return h.error();
    if (h->type == FrameType::Abort)
        return aborted(ch, h->len, Plane::Message);
    if (h->type != FrameType::Json)
        return Error::from_errno(EPROTO, fmt::format("{} sent image data where a message was "
                                                     "expected",
                                                     ch.peer()));
    auto text = read_text(ch, h->len, Plane::Message);
    if (!text)
        return text.error();
    auto j = parse_bounded(*text);
    if (j.is_discarded() || !j.is_object())
        return Error::from_errno(EPROTO, fmt::format("{} sent a message that is not a JSON "
                                                     "object",
                                                     ch.peer()));
    return j;
}

Result<void> send_end(Channel& ch) {
    return send_frame(ch, FrameType::End, {}, Plane::Stream);
}

Result<void> send_abort(Channel& ch, const std::string& reason) {
    const std::string s = reason.substr(0, max_json_frame);
    return send_frame(ch, FrameType::Abort, std::as_bytes(std::span(s)), Plane::Stream);
}

Result<void> send_stream(Channel& ch, int fd, std::atomic<std::uint64_t>* sent) {
    if (const int sock = ch.stream_fd(); sock >= 0 && zerocopy::can_send(fd))
        return zerocopy::send_frames(ch, sock, fd, sent);
    // One buffer, header in front: one TLS record train per frame, no copy.
    std::vector<std::byte> buf(frame_header_size + max_data_frame);
    for (;;) {
        std::size_t got = 0;
        // Fill a whole frame when the exporter is fast; send what there is
        // when the pipe runs dry, so the peer never waits on a part-frame.
        while (got < max_data_frame) {
            const ssize_t n =
                ::read(fd, buf.data() + frame_header_size + got, max_data_frame - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return Error::from_errno(
                    errno, fmt::format("reading the export: {}", std::strerror(errno)));
            if (n == 0)
                break;
            got += static_cast<std::size_t>(n);
            if (got >= 64 * 1024)
                break;
        }
        if (got == 0)
            return {};
        put_header(std::span(buf).first<frame_header_size>(), FrameType::Data,
                   static_cast<std::uint32_t>(got));
        if (auto w = ch.stream_write(std::span(buf.data(), frame_header_size + got)); !w)
            return w.error();
        if (sent)
            sent->fetch_add(got, std::memory_order_relaxed);
    }
}

Result<bool> FrameSource::next_data() {
    while (left_ == 0) {
        if (ended_)
            return false;
        auto h = read_header(ch_, Plane::Stream);
        if (!h)
            return h.error();
        if (h->type == FrameType::End) {
            if (h->len)
                return Error::from_errno(EPROTO, "malformed END frame");
            ended_ = true;
            return false;
        }
        if (h->type == FrameType::Abort)
            return aborted(ch_, h->len, Plane::Stream);
        if (h->type != FrameType::Data)
            return Error::from_errno(EPROTO, fmt::format("{} sent a message in the middle of an "
                                                         "image",
                                                         ch_.peer()));
        left_ = h->len;
    }
    return true;
}

namespace {

Error cut_short(const Channel& ch) {
    return Error::from_errno(ECONNRESET, fmt::format("{} closed the connection in the middle of "
                                                     "the image",
                                                     ch.peer()));
}

} // namespace

void FrameSource::give(std::span<const std::byte> b) {
    if (pipe_gone_)
        return;
    if (auto g = zerocopy::give(ch_, pipe_, b); !g) {
        pipe_gone_ = true;
        stalled_ = g.error().code.value() == ETIME;
    }
}

Result<std::size_t> FrameSource::read(std::span<std::byte> buf) {
    if (ended_ || buf.empty())
        return std::size_t{0};
    if (auto d = next_data(); !d || !*d)
        return d ? Result<std::size_t>(std::size_t{0}) : Result<std::size_t>(d.error());
    const std::size_t want = std::min<std::size_t>(buf.size(), left_);
    auto n = ch_.stream_read(buf.first(want));
    if (!n)
        return n.error();
    if (*n == 0)
        return cut_short(ch_);
    left_ -= static_cast<std::uint32_t>(*n);
    bytes_ += *n;
    if (pipe_ >= 0)
        give(buf.first(*n));
    if (tee_)
        if (auto t = tee_(buf.first(*n)); !t)
            return t.error();
    return *n;
}

Result<bool> FrameSource::skip(std::uint64_t n) {
    if (pipe_ < 0 || pipe_gone_ || ended_)
        return false;
    // On a socket plane the bytes go by splice(2); inside TLS (or once the
    // stub is gone) they are read out of the records here and written on
    // (or dropped), without the image reader's copy and checksum.
    const int sock = ch_.stream_fd();
    std::vector<std::byte> buf;
    while (n > 0) {
        auto d = next_data();
        if (!d)
            return d.error();
        if (!*d)
            return Error::from_errno(EBADMSG, fmt::format("the image from {} ends inside its "
                                                          "page data",
                                                          ch_.peer()));
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(n, left_));
        Result<std::size_t> k = std::size_t{0};
        if (sock >= 0 && !pipe_gone_) {
            k = zerocopy::splice_into(ch_, sock, pipe_, want);
            const int e = k ? 0 : k.error().code.value();
            if (e == EPIPE || e == ETIME) {
                pipe_gone_ = true;
                stalled_ = e == ETIME;
                continue;
            }
        } else {
            buf.resize(std::min<std::size_t>(want, 256 << 10));
            k = ch_.stream_read(buf);
            if (k && *k > 0)
                give(std::span(buf).first(*k));
        }
        if (!k)
            return k.error();
        if (*k == 0)
            return cut_short(ch_);
        left_ -= static_cast<std::uint32_t>(*k);
        bytes_ += *k;
        n -= *k;
    }
    return true;
}

Result<void> FrameSource::drain() {
    std::byte b[1];
    auto n = read(b);
    if (!n)
        return n.error();
    if (*n != 0)
        return Error::from_errno(EBADMSG, fmt::format("{} sent data after the image's END "
                                                      "section",
                                                      ch_.peer()));
    return {};
}

} // namespace migd
