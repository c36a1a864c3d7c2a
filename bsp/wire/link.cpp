// SPDX-License-Identifier: GPL-2.0
// Link: frames over a Unix socket or over TCP with TLS 1.3 and a
// pre-shared key (OpenSSL's PSK session callbacks).
#include "link.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "ghost/io.hpp"
#include "keepalive.hpp"

namespace ghost::bsp::wire {

namespace {

constexpr std::string_view kIdentity = "ghost-bsp-job";
constexpr unsigned char kAes128GcmSha256[] = {0x13, 0x01};

std::string ssl_errors() {
    std::string s;
    while (const unsigned long e = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        if (!s.empty())
            s += "; ";
        s += buf;
    }
    return s.empty() ? std::string("no OpenSSL error recorded") : s;
}

SSL_SESSION* psk_session(SSL* ssl) {
    const auto* key = static_cast<const Key*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
    const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kAes128GcmSha256);
    if (!key || !cipher)
        return nullptr;
    SSL_SESSION* s = SSL_SESSION_new();
    if (!s)
        return nullptr;
    if (!SSL_SESSION_set1_master_key(s, reinterpret_cast<const unsigned char*>(key->data()),
                                     key->size()) ||
        !SSL_SESSION_set_cipher(s, cipher) ||
        !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
        SSL_SESSION_free(s);
        return nullptr;
    }
    return s;
}

int use_session(SSL* ssl, const EVP_MD* md, const unsigned char** id, std::size_t* idlen,
                SSL_SESSION** sess) {
    (void)md;
    *sess = psk_session(ssl);
    *id = reinterpret_cast<const unsigned char*>(kIdentity.data());
    *idlen = kIdentity.size();
    return *sess ? 1 : 0;
}

int find_session(SSL* ssl, const unsigned char* id, std::size_t idlen, SSL_SESSION** sess) {
    *sess = nullptr;
    if (std::string_view(reinterpret_cast<const char*>(id), idlen) != kIdentity)
        return 1; // unknown identity: no PSK, and no certificate either: refused
    *sess = psk_session(ssl);
    return *sess ? 1 : 0;
}

} // namespace

Result<Key> make_key() {
    Key k;
    std::size_t got = 0;
    while (got < k.size()) {
        const ssize_t n = ::getrandom(k.data() + got, k.size() - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return Error::from_errno(errno, fmt::format("getrandom: {}", std::strerror(errno)));
        got += static_cast<std::size_t>(n);
    }
    return k;
}

std::string key_hex(const Key& k) {
    std::string s;
    for (std::byte b : k)
        s += fmt::format("{:02x}", static_cast<unsigned>(b));
    return s;
}

Result<Key> key_from_hex(std::string_view hex) {
    Key k;
    if (hex.size() != 2 * k.size())
        return Error::from_errno(
            EINVAL, fmt::format("the job key has {} hex digits, not {}", hex.size(), 2 * k.size()));
    for (std::size_t i = 0; i < k.size(); ++i) {
        unsigned v = 0;
        for (char c : hex.substr(2 * i, 2)) {
            v <<= 4;
            if (c >= '0' && c <= '9')
                v |= static_cast<unsigned>(c - '0');
            else if (c >= 'a' && c <= 'f')
                v |= static_cast<unsigned>(c - 'a' + 10);
            else
                return Error::from_errno(EINVAL, "the job key is not lower-case hex");
        }
        k[i] = static_cast<std::byte>(v);
    }
    return k;
}

void SslFree::operator()(SSL* s) const {
    SSL_free(s);
}

void SslCtxFree::operator()(SSL_CTX* c) const {
    SSL_CTX_free(c);
}

Result<TlsContext> TlsContext::make(Role role, const Key& key) {
    TlsContext t;
    t.key_ = std::make_unique<Key>(key);
    t.ctx_.reset(SSL_CTX_new(role == Role::Client ? TLS_client_method() : TLS_server_method()));
    if (!t.ctx_)
        return Error::from_errno(EPROTO, fmt::format("SSL_CTX_new: {}", ssl_errors()));
    SSL_CTX* c = t.ctx_.get();
    if (!SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION) ||
        !SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION) ||
        !SSL_CTX_set_ciphersuites(c, "TLS_AES_128_GCM_SHA256"))
        return Error::from_errno(EPROTO, fmt::format("TLS 1.3 setup: {}", ssl_errors()));
    SSL_CTX_set_options(c, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET);
    // No NewSessionTicket after the handshake (TLS 1.3 sends stateful ones
    // even with SSL_OP_NO_TICKET): a peer that polls its connection must
    // not see a readable socket with no frame behind it.
    SSL_CTX_set_num_tickets(c, 0);
    SSL_CTX_set_app_data(c, t.key_.get());
    if (role == Role::Client)
        SSL_CTX_set_psk_use_session_callback(c, use_session);
    else
        SSL_CTX_set_psk_find_session_callback(c, find_session);
    return t;
}

bool Link::pending() const {
    return ssl_ && SSL_pending(ssl_.get()) > 0;
}

void Link::close() {
    if (ssl_) {
        ghost::NoSigpipe guard;
        SSL_shutdown(ssl_.get()); // our close_notify; we do not wait for theirs
    }
    ssl_.reset();
    fd_.reset();
}

Result<void> Link::write_all(const std::byte* p, std::size_t n) {
    if (!ssl_) {
        while (n > 0) {
            const ssize_t w = ::send(fd_.get(), p, n, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return Error::from_errno(errno, fmt::format("send: {}", std::strerror(errno)));
            p += w;
            n -= static_cast<std::size_t>(w);
        }
        return {};
    }
    ghost::NoSigpipe guard;
    while (n > 0) {
        std::size_t w = 0;
        errno = 0;
        if (SSL_write_ex(ssl_.get(), p, n, &w) != 1) {
            const int e = SSL_get_error(ssl_.get(), 0);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ||
                (e == SSL_ERROR_SYSCALL && errno == EINTR))
                continue;
            const int err = errno ? errno : EPIPE;
            return Error::from_errno(err, fmt::format("TLS write: {}", e == SSL_ERROR_SYSCALL
                                                                           ? std::strerror(err)
                                                                           : ssl_errors()));
        }
        p += w;
        n -= w;
    }
    return {};
}

Result<bool> Link::read_all(std::byte* p, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
        std::size_t r = 0;
        if (!ssl_) {
            const ssize_t k = ::recv(fd_.get(), p + got, n - got, 0);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                return Error::from_errno(errno, fmt::format("recv: {}", std::strerror(errno)));
            r = static_cast<std::size_t>(k);
        } else {
            errno = 0;
            if (SSL_read_ex(ssl_.get(), p + got, n - got, &r) != 1) {
                const int e = SSL_get_error(ssl_.get(), 0);
                // On a blocking socket OpenSSL retries by itself: "want" is
                // the socket's SO_RCVTIMEO expiring, not a reason to wait on.
                if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) &&
                    (errno == EAGAIN || errno == EWOULDBLOCK))
                    return Error::from_errno(ETIMEDOUT, "TLS read: timed out");
                if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ||
                    (e == SSL_ERROR_SYSCALL && errno == EINTR))
                    continue;
                if (e != SSL_ERROR_ZERO_RETURN && !(e == SSL_ERROR_SYSCALL && errno == 0) &&
                    ERR_peek_error() != 0)
                    return Error::from_errno(EPROTO, fmt::format("TLS read: {}", ssl_errors()));
                if (e == SSL_ERROR_SYSCALL && errno != 0)
                    return Error::from_errno(errno,
                                             fmt::format("TLS read: {}", std::strerror(errno)));
                ERR_clear_error();
                r = 0; // close_notify or EOF
            }
        }
        if (r == 0) {
            if (got == 0)
                return false;
            return Error::from_errno(EPROTO, "recv: the peer closed the connection inside a frame");
        }
        got += r;
    }
    return true;
}

Result<void> send_frame(Link& l, Type type, std::span<const std::byte> payload) {
    Writer h;
    h.u32(static_cast<std::uint32_t>(type));
    h.u32(0);
    h.u64(payload.size());
    if (!l.tls()) {
        if (auto r = l.write_all(h.data().data(), h.size()); !r)
            return r;
        return l.write_all(payload.data(), payload.size());
    }
    // One TLS record for a small frame instead of two.
    std::vector<std::byte> all(h.data().begin(), h.data().end());
    all.insert(all.end(), payload.begin(), payload.end());
    return l.write_all(all.data(), all.size());
}

Result<Frame> recv_frame(Link& l) {
    std::byte hdr[16];
    auto r = l.read_all(hdr, sizeof hdr);
    if (!r)
        return r.error();
    if (!*r)
        return Error::from_errno(ECONNRESET, "the peer closed the connection");
    auto f = decode_header(hdr);
    if (!f)
        return f.error();
    auto& fr = f->first;
    fr.payload.resize(f->second);
    if (f->second > 0) {
        auto p = l.read_all(fr.payload.data(), f->second);
        if (!p)
            return p.error();
        if (!*p)
            return Error::from_errno(EPROTO, "recv: the peer closed the connection inside a frame");
    }
    return std::move(fr);
}

namespace {

constexpr std::chrono::seconds kAcceptWithin{10};

Result<Link> handshake(const TlsContext& ctx, UniqueFd fd, bool server) {
    SslPtr ssl(SSL_new(ctx.get()));
    if (!ssl || !SSL_set_fd(ssl.get(), fd.get()))
        return Error::from_errno(EPROTO, fmt::format("SSL_new: {}", ssl_errors()));
    ERR_clear_error();
    // A server's handshake ends within kAcceptWithin whatever the client
    // sends: with the socket blocking, a byte every few seconds would hold
    // the caller (the hub's only thread) as long as the client liked, each
    // read under its own SO_RCVTIMEO. So it runs non-blocking, each wait
    // for the time left.
    const auto deadline = std::chrono::steady_clock::now() + kAcceptWithin;
    const int fl = server ? ::fcntl(fd.get(), F_GETFL) : 0;
    if (server)
        ::fcntl(fd.get(), F_SETFL, fl | O_NONBLOCK);
    int rc;
    {
        ghost::NoSigpipe guard;
        for (;;) {
            errno = 0;
            rc = server ? SSL_accept(ssl.get()) : SSL_connect(ssl.get());
            if (rc == 1)
                break;
            const int e = SSL_get_error(ssl.get(), rc);
            if (e == SSL_ERROR_SYSCALL && errno == EINTR)
                continue;
            if (!server || (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE))
                break;
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0)
                return Error::from_errno(
                    ETIMEDOUT,
                    fmt::format("TLS handshake not done within {} s", kAcceptWithin.count()));
            pollfd p{fd.get(), static_cast<short>(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
            (void)::poll(&p, 1, static_cast<int>(left.count()));
        }
    }
    if (server)
        ::fcntl(fd.get(), F_SETFL, fl);
    if (rc != 1) {
        const int e = SSL_get_error(ssl.get(), rc);
        std::string why = ERR_peek_error() != 0 ? ssl_errors()
                          : errno != 0          ? std::string(std::strerror(errno))
                                                : std::string("the peer closed the connection");
        (void)e;
        return Error::from_errno(EACCES, fmt::format("TLS handshake failed: {}", why));
    }
    return Link(std::move(fd), std::move(ssl));
}

} // namespace

Result<Link> tls_accept(const TlsContext& ctx, UniqueFd fd) {
    return handshake(ctx, std::move(fd), true);
}

Result<Link> tls_connect(const TlsContext& ctx, UniqueFd fd) {
    return handshake(ctx, std::move(fd), false);
}

Result<UniqueFd> listen_tcp(std::string_view addr, std::string* bound) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    const std::string s(addr);
    if (::inet_pton(AF_INET, s.c_str(), &a.sin_addr) != 1)
        return Error::from_errno(EINVAL, fmt::format("'{}' is not an IPv4 address", addr));
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd)
        return Error::from_errno(errno, fmt::format("socket: {}", std::strerror(errno)));
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
        return Error::from_errno(errno, fmt::format("bind {}: {}", addr, std::strerror(errno)));
    if (::listen(fd.get(), 512) != 0)
        return Error::from_errno(errno, fmt::format("listen: {}", std::strerror(errno)));
    socklen_t len = sizeof a;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
    if (bound)
        *bound = fmt::format("{}:{}", addr, ntohs(a.sin_port));
    return fd;
}

Result<UniqueFd> connect_tcp(std::string_view addr_port) {
    const auto colon = addr_port.rfind(':');
    sockaddr_in a{};
    a.sin_family = AF_INET;
    const std::string host(addr_port.substr(0, colon == std::string_view::npos ? 0 : colon));
    const long port = colon == std::string_view::npos
                          ? -1
                          : std::atol(std::string(addr_port.substr(colon + 1)).c_str());
    if (port <= 0 || port > 65535 || ::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1)
        return Error::from_errno(EINVAL,
                                 fmt::format("'{}' is not an IPv4 address:port", addr_port));
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd)
        return Error::from_errno(errno, fmt::format("socket: {}", std::strerror(errno)));
    int r;
    while ((r = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a)) != 0 &&
           errno == EINTR) {
    }
    if (r != 0)
        return Error::from_errno(errno,
                                 fmt::format("connect {}: {}", addr_port, std::strerror(errno)));
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    keep_alive(fd.get()); // a host that vanishes is noticed, not waited for
    return fd;
}

std::string peer_address(int fd) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET)
        return "?";
    char buf[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
    return fmt::format("{}:{}", buf, ntohs(a.sin_port));
}

Result<std::string> default_address() {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0)
        return Error::from_errno(errno, fmt::format("getifaddrs: {}", std::strerror(errno)));
    std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> guard(list, ::freeifaddrs);
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            (i->ifa_flags & IFF_LOOPBACK))
            continue;
        char buf[INET_ADDRSTRLEN];
        const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
        if (::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf))
            return std::string(buf);
    }
    return Error::from_errno(EADDRNOTAVAIL, "no interface is up with an IPv4 address other than "
                                            "loopback: give --hub-address");
}

} // namespace ghost::bsp::wire
