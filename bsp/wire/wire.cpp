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
    case Type::RelayHello:
        return "RELAY_HELLO";
    case Type::Directory:
        return "DIRECTORY";
    case Type::Route:
        return "ROUTE";
    case Type::Data:
        return "DATA";
    case Type::DeliverRelayed:
        return "DELIVER_RELAYED";
    case Type::DeliverBack:
        return "DELIVER_BACK";
    case Type::RelayStats:
        return "RELAY_STATS";
    case Type::GetsRelayed:
        return "GETS_RELAYED";
    case Type::GuardHello:
        return "GUARD_HELLO";
    case Type::GuardRelease:
        return "GUARD_RELEASE";
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

Result<std::pair<Frame, std::uint64_t>> decode_header(std::span<const std::byte, 16> hdr) {
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
    return std::pair<Frame, std::uint64_t>{std::move(f), len};
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

bool peer_is_ours(int fd) {
    ucred c{};
    socklen_t len = sizeof c;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0)
        return false;
    return c.uid == ::getuid() || c.uid == 0;
}

} // namespace ghost::bsp::wire
