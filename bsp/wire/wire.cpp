// SPDX-License-Identifier: GPL-2.0
// Frame I/O and payload encoding of the hub protocol.
#include "wire.hpp"

#include <endian.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace ghost::bsp::wire {

std::string_view type_name(Type t) {
    switch (t) {
    case Type::Hello:
        return "HELLO";
    case Type::Sync:
        return "SYNC";
    case Type::Gets:
        return "GETS";
    case Type::GetData:
        return "GETDATA";
    case Type::Deliver:
        return "DELIVER";
    case Type::Detach:
        return "DETACH";
    case Type::Detached:
        return "DETACHED";
    case Type::End:
        return "END";
    case Type::EndOk:
        return "ENDOK";
    case Type::Abort:
        return "ABORT";
    }
    return "unknown";
}

void Writer::u32(std::uint32_t v) {
    v = htole32(v);
    bytes(std::as_bytes(std::span(&v, 1)));
}

void Writer::u64(std::uint64_t v) {
    v = htole64(v);
    bytes(std::as_bytes(std::span(&v, 1)));
}

void Writer::f64(double v) {
    std::uint64_t u;
    std::memcpy(&u, &v, sizeof u);
    u64(u);
}

void Writer::patch_u32(std::size_t at, std::uint32_t v) {
    v = htole32(v);
    std::memcpy(buf_.data() + at, &v, sizeof v);
}

std::span<const std::byte> Reader::bytes(std::uint64_t n) {
    if (failed_ || n > b_.size() - pos_) {
        failed_ = true;
        return {};
    }
    auto s = b_.subspan(pos_, n);
    pos_ += n;
    return s;
}

std::uint8_t Reader::u8() {
    auto s = bytes(1);
    return s.empty() ? 0 : static_cast<std::uint8_t>(s[0]);
}

std::uint32_t Reader::u32() {
    std::uint32_t v = 0;
    if (auto s = bytes(sizeof v); !s.empty())
        std::memcpy(&v, s.data(), sizeof v);
    return le32toh(v);
}

std::uint64_t Reader::u64() {
    std::uint64_t v = 0;
    if (auto s = bytes(sizeof v); !s.empty())
        std::memcpy(&v, s.data(), sizeof v);
    return le64toh(v);
}

double Reader::f64() {
    const std::uint64_t u = u64();
    double v;
    std::memcpy(&v, &u, sizeof v);
    return v;
}

std::string Reader::str() {
    auto s = blob();
    return {reinterpret_cast<const char*>(s.data()), s.size()};
}

namespace {

Result<void> write_all(int fd, const std::byte* p, std::size_t n) {
    while (n > 0) {
        const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return Error::from_errno(errno, fmt::format("send: {}", std::strerror(errno)));
        }
        p += w;
        n -= static_cast<std::size_t>(w);
    }
    return {};
}

// false with errno 0 on EOF before the first byte.
Result<bool> read_all(int fd, std::byte* p, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
        const ssize_t r = ::recv(fd, p + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return Error::from_errno(errno, fmt::format("recv: {}", std::strerror(errno)));
        }
        if (r == 0) {
            if (got == 0)
                return false;
            return Error::from_errno(EPROTO, "recv: the peer closed the connection inside a frame");
        }
        got += static_cast<std::size_t>(r);
    }
    return true;
}

} // namespace

Result<void> send_frame(int fd, Type type, std::span<const std::byte> payload) {
    Writer h;
    h.u32(static_cast<std::uint32_t>(type));
    h.u32(0);
    h.u64(payload.size());
    if (auto r = write_all(fd, h.data().data(), h.size()); !r)
        return r;
    return write_all(fd, payload.data(), payload.size());
}

Result<Frame> recv_frame(int fd) {
    std::byte hdr[16];
    auto r = read_all(fd, hdr, sizeof hdr);
    if (!r)
        return r.error();
    if (!*r)
        return Error::from_errno(ECONNRESET, "the peer closed the connection");
    Reader rd(hdr);
    Frame f;
    f.type = static_cast<Type>(rd.u32());
    const std::uint32_t reserved = rd.u32();
    const std::uint64_t len = rd.u64();
    if (reserved != 0 || len > kMaxPayload)
        return Error::from_errno(EPROTO,
                                 fmt::format("bad frame header (type {}, reserved {}, "
                                             "length {})",
                                             static_cast<std::uint32_t>(f.type), reserved, len));
    f.payload.resize(len);
    if (len > 0) {
        auto p = read_all(fd, f.payload.data(), len);
        if (!p)
            return p.error();
        if (!*p)
            return Error::from_errno(EPROTO, "recv: the peer closed the connection inside a frame");
    }
    return f;
}

std::string socket_name(std::string_view job) {
    std::string s(1, '\0');
    s += "ghost-bsp/";
    s += job;
    return s;
}

namespace {

Result<std::pair<sockaddr_un, socklen_t>> address(std::string_view job) {
    const std::string name = socket_name(job);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (name.size() > sizeof(a.sun_path))
        return Error::from_errno(ENAMETOOLONG,
                                 fmt::format("job id '{}' is too long for a socket name", job));
    std::memcpy(a.sun_path, name.data(), name.size());
    return std::pair{a, static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size())};
}

} // namespace

Result<UniqueFd> listen_abstract(std::string_view job) {
    auto a = address(job);
    if (!a)
        return a.error();
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd)
        return Error::from_errno(errno, fmt::format("socket: {}", std::strerror(errno)));
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a->first), a->second) != 0)
        return Error::from_errno(errno,
                                 fmt::format("bind @ghost-bsp/{}: {}", job, std::strerror(errno)));
    if (::listen(fd.get(), 512) != 0)
        return Error::from_errno(errno, fmt::format("listen: {}", std::strerror(errno)));
    return fd;
}

Result<UniqueFd> connect_abstract(std::string_view job) {
    auto a = address(job);
    if (!a)
        return a.error();
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd)
        return Error::from_errno(errno, fmt::format("socket: {}", std::strerror(errno)));
    int r;
    while ((r = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a->first), a->second)) != 0 &&
           errno == EINTR) {
    }
    if (r != 0)
        return Error::from_errno(
            errno, fmt::format("connect @ghost-bsp/{}: {}", job, std::strerror(errno)));
    return fd;
}

pid_t peer_pid(int fd) {
    ucred c{};
    socklen_t len = sizeof c;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0)
        return -1;
    return c.pid;
}

} // namespace ghost::bsp::wire
