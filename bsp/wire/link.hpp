// SPDX-License-Identifier: GPL-2.0
// A connection between a VP and the hub: a Unix socket on the hub's host,
// or TCP with TLS 1.3 and the job's pre-shared key from another host
// (Documentation/bsp.md, "Hosts"). Frames travel the same over both.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ghost/fd.hpp"
#include "ghost/result.hpp"
#include "wire.hpp"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace ghost::bsp::wire {

// The job key: 32 random bytes made by bsprun.
using Key = std::array<std::byte, 32>;
Result<Key> make_key();
std::string key_hex(const Key& k);
Result<Key> key_from_hex(std::string_view hex);

struct SslFree {
    void operator()(SSL* s) const;
};
struct SslCtxFree {
    void operator()(SSL_CTX* c) const;
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

// A TLS-PSK context (TLS 1.3 only, TLS_AES_128_GCM_SHA256). It keeps its
// own copy of the key.
class TlsContext {
  public:
    enum class Role { Client, Server };
    static Result<TlsContext> make(Role role, const Key& key);
    SSL_CTX* get() const { return ctx_.get(); }

  private:
    std::unique_ptr<SSL_CTX, SslCtxFree> ctx_;
    std::unique_ptr<Key> key_; // the callbacks' (stable address)
};

class Link {
  public:
    Link() = default;
    explicit Link(UniqueFd fd) : fd_(std::move(fd)) {}
    Link(UniqueFd fd, SslPtr ssl) : fd_(std::move(fd)), ssl_(std::move(ssl)) {}
    int fd() const { return fd_.get(); }
    bool tls() const { return static_cast<bool>(ssl_); }
    explicit operator bool() const { return static_cast<bool>(fd_); }
    // Bytes TLS has decrypted but not handed out: poll() does not see them.
    bool pending() const;
    // Sends TLS close_notify (if TLS), frees the SSL and closes the socket.
    void close();
    // Whole buffers; EINTR retried, SIGPIPE never raised. read_all: false
    // on EOF before the first byte.
    Result<void> write_all(const std::byte* p, std::size_t n);
    Result<bool> read_all(std::byte* p, std::size_t n);

  private:
    UniqueFd fd_;
    SslPtr ssl_;
};

Result<void> send_frame(Link& l, Type type, std::span<const std::byte> payload = {});
Result<Frame> recv_frame(Link& l);

// TLS handshakes on a connected TCP socket. The error names the cause
// (e.g. a key that does not match: "decrypt error" / "bad binder").
Result<Link> tls_accept(const TlsContext& ctx, UniqueFd fd);
Result<Link> tls_connect(const TlsContext& ctx, UniqueFd fd);

// TCP: listen on addr (IPv4 dotted quad), port 0 = ephemeral; the bound
// "addr:port" in *bound. connect_tcp takes "addr:port".
Result<UniqueFd> listen_tcp(std::string_view addr, std::string* bound);
Result<UniqueFd> connect_tcp(std::string_view addr_port);
// The first IPv4 address of an interface that is up and not loopback, or
// an error naming why there is none.
Result<std::string> default_address();
// "a.b.c.d:port" of a TCP socket's peer.
std::string peer_address(int fd);

} // namespace ghost::bsp::wire
