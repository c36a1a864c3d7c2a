// SPDX-License-Identifier: GPL-2.0
// Mutual TLS 1.3 between migds (OpenSSL 3). Only the cluster CA is trusted
// (never the system store); both sides present a certificate; the client
// checks the server's name, the server reads the client's from its CN. Every
// refusal is a sentence saying why, on both sides.
//
// I/O: the handshake runs on a non-blocking socket against one deadline; the
// established channel is a blocking socket with SO_RCVTIMEO/SO_SNDTIMEO, so a
// silent peer gives ETIMEDOUT and a cut link never hangs a thread. A channel
// destroyed without finish() ends without close_notify: the peer reads that
// as a truncated stream, never as an orderly end.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "channel.hpp"
#include "ktls.hpp"
#include "net.hpp"

namespace migd {

namespace {

using ghost::Error;
using ghost::Result;
using ghost::UniqueFd;
using namespace std::chrono;

// What the callbacks saw during one handshake.
struct Handshake {
    int verify_error = X509_V_OK;
    std::string verify_cn; // CN of the certificate the error is about
    bool ticket = false;   // the server sent a session ticket: it accepted us
};

int handshake_index() {
    static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
    return index;
}

Handshake* handshake_of(SSL* ssl) {
    return static_cast<Handshake*>(SSL_get_ex_data(ssl, handshake_index()));
}

std::string common_name(X509* cert) {
    char buf[256] = {};
    if (!cert || X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf,
                                           sizeof(buf)) < 0)
        return {};
    return buf;
}

int verify_cb(int ok, X509_STORE_CTX* store) {
    SSL* ssl =
        static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
    Handshake* hs = ssl ? handshake_of(ssl) : nullptr;
    if (!ok && hs && hs->verify_error == X509_V_OK) {
        hs->verify_error = X509_STORE_CTX_get_error(store);
        // The name is the leaf's, whatever certificate of the chain failed.
        STACK_OF(X509)* chain = X509_STORE_CTX_get0_chain(store);
        X509* leaf = chain && sk_X509_num(chain) > 0 ? sk_X509_value(chain, 0)
                                                     : X509_STORE_CTX_get0_cert(store);
        hs->verify_cn = common_name(leaf);
    }
    return ok;
}

int new_session_cb(SSL* ssl, SSL_SESSION*) {
    if (Handshake* hs = handshake_of(ssl))
        hs->ticket = true;
    return 0; // not kept: migd does not resume sessions
}

// The first OpenSSL error on this thread's queue, as words; clears the queue.
unsigned long first_error(std::string* text) {
    const unsigned long e = ERR_peek_error();
    if (text) {
        const char* reason = e ? ERR_reason_error_string(e) : nullptr;
        *text = reason ? reason : (e ? fmt::format("OpenSSL error {:#x}", e) : "");
    }
    ERR_clear_error();
    return e;
}

std::string version_name(int v) {
    switch (v) {
    case TLS1_3_VERSION:
        return "TLS 1.3";
    case TLS1_2_VERSION:
        return "TLS 1.2";
    case TLS1_1_VERSION:
        return "TLS 1.1";
    case TLS1_VERSION:
        return "TLS 1.0";
    case SSL3_VERSION:
        return "SSL 3.0";
    default:
        return fmt::format("protocol version {:#x}", v);
    }
}

// Why a handshake (or the wait for the server's acceptance) failed.
Error handshake_error(SSL* ssl, int rc, const Handshake& hs, std::string_view expected,
                      bool server) {
    const int saved_errno = errno;
    const int kind = SSL_get_error(ssl, rc);
    std::string text;
    const unsigned long e = first_error(&text);
    const int reason = ERR_GET_REASON(e);
    auto fail = [](int code, std::string msg) { return Error::from_errno(code, std::move(msg)); };

    if (hs.verify_error == X509_V_ERR_HOSTNAME_MISMATCH)
        return fail(EACCES, fmt::format("certificate names {}, expected {}",
                                        hs.verify_cn.empty() ? "no host" : hs.verify_cn, expected));
    if (hs.verify_error != X509_V_OK) {
        const int v = hs.verify_error;
        const bool foreign = v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                             v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT ||
                             v == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
                             v == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT;
        return fail(EACCES, fmt::format("certificate verify failed: {} (certificate of \"{}\"{})",
                                        X509_verify_cert_error_string(v), hs.verify_cn,
                                        foreign ? ", not signed by this cluster's CA" : ""));
    }
    if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE)
        return fail(EACCES, "peer sent no certificate");
    if (server && reason == SSL_R_UNSUPPORTED_PROTOCOL)
        return fail(EPROTO, fmt::format("{} offered: only TLS 1.3 is accepted",
                                        version_name(SSL_client_version(ssl))));
    if (!server &&
        (reason == SSL_R_UNSUPPORTED_PROTOCOL || reason == SSL_R_TLSV1_ALERT_PROTOCOL_VERSION))
        return fail(EPROTO, "the server does not speak TLS 1.3: only TLS 1.3 is accepted");
    if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED)
        return fail(EACCES, "the server requires a certificate and this host sent none");
    if (text.find("alert") != std::string::npos)
        return fail(EACCES, fmt::format("the peer refused the handshake ({}): it does not "
                                        "accept this host's certificate or protocol",
                                        text));
    if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_HTTP_REQUEST ||
        reason == SSL_R_PACKET_LENGTH_TOO_LONG || reason == SSL_R_RECORD_LENGTH_MISMATCH)
        return fail(EPROTO, fmt::format("not a TLS 1.3 handshake ({})", text));
    if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING ||
        (kind == SSL_ERROR_SYSCALL && saved_errno == 0))
        return fail(ECONNRESET, "the peer closed the connection during the TLS handshake");
    if (kind == SSL_ERROR_SYSCALL)
        return fail(saved_errno, fmt::format("TLS handshake: {}", std::strerror(saved_errno)));
    return fail(EPROTO, fmt::format("TLS handshake failed: {}", text.empty() ? "unknown" : text));
}

class TlsChannel final : public Channel {
  public:
    TlsChannel(UniqueFd fd, SSL* ssl, std::string peer, milliseconds timeout)
        : fd_(std::move(fd)), ssl_(ssl), peer_(std::move(peer)) {
        set_timeout(timeout);
        buffer_writes();
    }
    ~TlsChannel() override { SSL_free(ssl_); }

    Result<std::size_t> read(std::span<std::byte> buf) override {
        if (buf.empty())
            return std::size_t{0};
        std::size_t got = 0;
        errno = 0;
        const int rc = SSL_read_ex(ssl_, buf.data(), buf.size(), &got);
        if (rc == 1)
            return got;
        if (SSL_get_error(ssl_, rc) == SSL_ERROR_ZERO_RETURN) {
            ERR_clear_error();
            return std::size_t{0};
        }
        return io_error(rc, "read");
    }

    Result<void> write(std::span<const std::byte> data) override {
        while (!data.empty()) {
            std::size_t put = 0;
            errno = 0;
            const int rc = SSL_write_ex(ssl_, data.data(), data.size(), &put);
            if (rc != 1)
                return io_error(rc, "write");
            data = data.subspan(put);
        }
        return flush();
    }

    Result<void> finish() override {
        errno = 0;
        const int rc = SSL_shutdown(ssl_); // 0: our close_notify sent, the peer's not yet read
        if (rc < 0)
            return io_error(rc, "close_notify");
        if (auto r = flush(); !r)
            return r;
        if (::shutdown(fd_.get(), SHUT_WR) != 0 && errno != ENOTCONN) {
            const int e = errno;
            return Error::from_errno(e, fmt::format("shutdown: {}", std::strerror(e)));
        }
        return {};
    }

    const std::string& peer() const override { return peer_; }
    int fd() const override { return fd_.get(); }
    SSL* ssl() const { return ssl_; }
    milliseconds timeout() const override { return timeout_; }

    bool clear_capable() const override { return true; }
    // Without read-ahead OpenSSL asks the socket for a record's header, then
    // for exactly its body: the clear frames after a record stay in the
    // socket. The messages read that way are few and small.
    void receive_clear() override { SSL_set_read_ahead(ssl_, 0); }

    Result<std::size_t> stream_read(std::span<std::byte> buf) override {
        if (!clear())
            return read(buf);
        if (auto p = nothing_pending(); !p)
            return p.error();
        for (;;) {
            const ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
            if (n >= 0)
                return static_cast<std::size_t>(n);
            if (errno != EINTR)
                return socket_error("receive");
        }
    }

    Result<void> stream_write(std::span<const std::byte> data) override {
        if (!clear())
            return write(data);
        while (!data.empty()) {
            const ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return socket_error("send");
            data = data.subspan(static_cast<std::size_t>(n));
        }
        return {};
    }

    int stream_fd() const override { return clear() && !SSL_has_pending(ssl_) ? fd_.get() : -1; }
    // Two setsockopt(2) calls, made only when the limit changes: a kept
    // connection sets the same one around every short request.
    void set_timeout(milliseconds t) override {
        if (t == timeout_)
            return;
        timeout_ = t;
        net::set_socket_timeout(fd_.get(), t);
    }

  private:
    // OpenSSL writes each record (16 KiB at most) with its own write(2): a
    // buffer under it sends many records per system call. Not with kernel
    // TLS, whose records the kernel makes.
    void buffer_writes() {
        BIO* sock = SSL_get_wbio(ssl_);
        if (BIO_get_ktls_send(sock) > 0)
            return;
        BIO* buf = BIO_new(BIO_f_buffer());
        if (!buf || BIO_set_write_buffer_size(buf, write_buffer) != 1 || !BIO_up_ref(sock)) {
            BIO_free(buf);
            return;
        }
        SSL_set0_wbio(ssl_, BIO_push(buf, sock));
    }

    Result<void> flush() {
        errno = 0;
        if (BIO_flush(SSL_get_wbio(ssl_)) == 1)
            return {};
        const int saved = errno;
        ERR_clear_error();
        if (saved == EAGAIN || saved == EWOULDBLOCK)
            return Error::from_errno(
                ETIMEDOUT, fmt::format("TLS write timed out: {} read nothing for {} ms",
                                       peer_.empty() ? "the peer" : peer_, timeout_.count()));
        return Error::from_errno(saved ? saved : EIO,
                                 fmt::format("TLS write: {}", std::strerror(saved ? saved : EIO)));
    }

    static constexpr int write_buffer = 256 * 1024;

    // A clear stream begins where a TLS record ended: bytes TLS holds but
    // has not handed out mean it read into the stream (the receiver did not
    // call receive_clear() in time, or the peer sent records it should not).
    Result<void> nothing_pending() const {
        if (!SSL_has_pending(ssl_))
            return {};
        return Error::from_errno(EPROTO, fmt::format("TLS holds bytes read ahead of the clear "
                                                     "image stream from {}: the two sides are "
                                                     "out of step",
                                                     peer_.empty() ? "the peer" : peer_));
    }

    Error socket_error(const char* what) const {
        const int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK)
            return Error::from_errno(ETIMEDOUT, fmt::format("clear image stream: {} was silent "
                                                            "for {} ms",
                                                            peer_.empty() ? "the peer" : peer_,
                                                            timeout_.count()));
        return Error::from_errno(e,
                                 fmt::format("clear image stream: {}: {}", what, std::strerror(e)));
    }

    Error io_error(int rc, const char* what) {
        const int saved = errno;
        const int kind = SSL_get_error(ssl_, rc);
        std::string text;
        const unsigned long e = first_error(&text);
        const std::string who = peer_.empty() ? "the peer" : peer_;
        if (kind == SSL_ERROR_WANT_READ || kind == SSL_ERROR_WANT_WRITE)
            return Error::from_errno(ETIMEDOUT,
                                     fmt::format("TLS {} timed out: {} was silent for {} ms", what,
                                                 who, timeout_.count()));
        if (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING ||
            (kind == SSL_ERROR_SYSCALL && saved == 0))
            return Error::from_errno(ECONNRESET, "connection closed without TLS close_notify: "
                                                 "stream truncated");
        if (kind == SSL_ERROR_SYSCALL)
            return Error::from_errno(saved, fmt::format("TLS {}: {}", what, std::strerror(saved)));
        if (kind == SSL_ERROR_ZERO_RETURN)
            return Error::from_errno(
                EPIPE, fmt::format("TLS {}: {} has closed the connection", what, who));
        return Error::from_errno(EPROTO, fmt::format("TLS {}: {}", what, text));
    }

    UniqueFd fd_;
    SSL* ssl_;
    std::string peer_;
    milliseconds timeout_{0};
};

struct SslCtxFree {
    void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
struct SslFree {
    void operator()(SSL* s) const { SSL_free(s); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

// Drives SSL_do_handshake on a non-blocking socket until done or the deadline.
int drive(SSL* ssl, net::Clock::time_point deadline, bool& timed_out) {
    for (;;) {
        errno = 0;
        const int rc = SSL_do_handshake(ssl);
        if (rc == 1)
            return rc;
        const int kind = SSL_get_error(ssl, rc);
        if (kind != SSL_ERROR_WANT_READ && kind != SSL_ERROR_WANT_WRITE)
            return rc;
        if (!net::wait_fd(SSL_get_fd(ssl), kind == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                          deadline)) {
            timed_out = true;
            return rc;
        }
    }
}

class TlsCtx final : public TlsContext {
  public:
    TlsCtx(SSL_CTX* ctx, std::string name) : ctx_(ctx), name_(std::move(name)) {}

    const std::string& own_name() const override { return name_; }
    SSL_CTX* ctx() const { return ctx_.get(); }

    Result<std::unique_ptr<Channel>> connect(std::string_view address, std::uint16_t port,
                                             std::string_view expected_peer,
                                             milliseconds timeout) override {
        const auto deadline = net::Clock::now() + timeout;
        auto tcp = net::tcp_connect(address, port, timeout);
        if (!tcp)
            return tcp.error();
        const std::string expected(expected_peer);
        auto where = [&](const Error& e) {
            return Error{e.code, fmt::format("{} ({}:{}): {}", expected, address, port, e.what())};
        };
        Handshake hs;
        SslPtr ssl(SSL_new(ctx_.get()));
        if (!ssl || !SSL_set_fd(ssl.get(), tcp->get()) ||
            !SSL_set1_host(ssl.get(), expected.c_str()))
            return where(Error::from_errno(ENOMEM, "cannot set up a TLS connection"));
        SSL_set_hostflags(ssl.get(), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        SSL_set_ex_data(ssl.get(), handshake_index(), &hs);
        SSL_set_connect_state(ssl.get());
        net::set_nonblocking(tcp->get(), true);
        bool timed_out = false;
        int rc = drive(ssl.get(), deadline, timed_out);
        // TLS 1.3: the client is done before the server has checked its
        // certificate. The server's session ticket (sent once it accepted
        // us) or its alert tells which, so a refusal is reported here.
        char byte;
        while (rc == 1 && !hs.ticket && !timed_out) {
            errno = 0;
            const int n = SSL_peek(ssl.get(), &byte, 1);
            if (n > 0 || hs.ticket)
                break;
            if (SSL_get_error(ssl.get(), n) != SSL_ERROR_WANT_READ) {
                rc = n;
                break;
            }
            if (!net::wait_fd(tcp->get(), POLLIN, deadline))
                timed_out = true;
        }
        if (timed_out) {
            ERR_clear_error();
            return where(Error::from_errno(
                ETIMEDOUT, fmt::format("TLS handshake timed out after {} ms", timeout.count())));
        }
        if (rc != 1)
            return where(handshake_error(ssl.get(), rc, hs, expected, false));
        SSL_set_ex_data(ssl.get(), handshake_index(), nullptr);
        net::set_nonblocking(tcp->get(), false);
        return std::unique_ptr<Channel>(
            std::make_unique<TlsChannel>(std::move(*tcp), ssl.release(), expected, timeout));
    }

    Result<std::unique_ptr<Channel>> accept(UniqueFd tcp, milliseconds timeout) override {
        const auto deadline = net::Clock::now() + timeout;
        Handshake hs;
        SslPtr ssl(SSL_new(ctx_.get()));
        if (!ssl || !SSL_set_fd(ssl.get(), tcp.get()))
            return Error::from_errno(ENOMEM, "cannot set up a TLS connection");
        SSL_set_ex_data(ssl.get(), handshake_index(), &hs);
        SSL_set_accept_state(ssl.get());
        net::set_nonblocking(tcp.get(), true);
        bool timed_out = false;
        const int rc = drive(ssl.get(), deadline, timed_out);
        if (timed_out) {
            ERR_clear_error();
            return Error::from_errno(
                ETIMEDOUT, fmt::format("TLS handshake timed out after {} ms", timeout.count()));
        }
        if (rc != 1)
            return handshake_error(ssl.get(), rc, hs, "", true);
        SSL_set_ex_data(ssl.get(), handshake_index(), nullptr);
        X509* cert = SSL_get0_peer_certificate(ssl.get());
        std::string name = common_name(cert);
        if (name.empty())
            return Error::from_errno(EACCES, "peer certificate has no common name (CN)");
        net::set_nonblocking(tcp.get(), false);
        const int one = 1;
        ::setsockopt(tcp.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return std::unique_ptr<Channel>(
            std::make_unique<TlsChannel>(std::move(tcp), ssl.release(), std::move(name), timeout));
    }

  private:
    std::unique_ptr<SSL_CTX, SslCtxFree> ctx_;
    std::string name_;
};

Error file_error(const std::string& what, const std::string& path, std::string why = {}) {
    if (why.empty()) {
        if (std::FILE* f = std::fopen(path.c_str(), "r"))
            std::fclose(f);
        else
            why = std::strerror(errno);
    }
    if (why.empty())
        first_error(&why);
    else
        ERR_clear_error();
    return Error::from_errno(EINVAL, fmt::format("{} {}: {}", what, path, why));
}

} // namespace

void set_ktls(TlsContext& ctx, bool on) {
    if (auto* c = dynamic_cast<TlsCtx*>(&ctx)) {
        if (on)
            SSL_CTX_set_options(c->ctx(), SSL_OP_ENABLE_KTLS);
        else
            SSL_CTX_clear_options(c->ctx(), SSL_OP_ENABLE_KTLS);
    }
}

KtlsState ktls_state(const Channel& ch) {
    KtlsState st;
#ifndef OPENSSL_NO_KTLS
    if (const auto* t = dynamic_cast<const TlsChannel*>(&ch)) {
        st.send = BIO_get_ktls_send(SSL_get_wbio(t->ssl())) > 0;
        st.receive = BIO_get_ktls_recv(SSL_get_rbio(t->ssl())) > 0;
    }
#else
    (void)ch;
#endif
    return st;
}

Result<std::shared_ptr<TlsContext>> TlsContext::load(const TlsFiles& files) {
    // A peer that goes away must not kill migd with SIGPIPE: OpenSSL writes
    // with write(2), which cannot say MSG_NOSIGNAL.
    static std::once_flag sigpipe;
    std::call_once(sigpipe, [] {
        struct sigaction old {};
        if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL)
            ::signal(SIGPIPE, SIG_IGN);
    });

    std::unique_ptr<SSL_CTX, SslCtxFree> ctx(SSL_CTX_new(TLS_method()));
    if (!ctx)
        return Error::from_errno(ENOMEM, "cannot create a TLS context");
    SSL_CTX* c = ctx.get();
    SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION);
    // AES-GCM first: AES-NI makes it the fastest where there is one.
    SSL_CTX_set_ciphersuites(
        c, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
    if (SSL_CTX_load_verify_file(c, files.ca.c_str()) != 1)
        return file_error("cannot load the cluster CA", files.ca);
    if (SSL_CTX_use_certificate_chain_file(c, files.cert.c_str()) != 1)
        return file_error("cannot load the certificate", files.cert);
    if (SSL_CTX_use_PrivateKey_file(c, files.key.c_str(), SSL_FILETYPE_PEM) != 1 &&
        ERR_GET_REASON(ERR_peek_error()) != X509_R_KEY_VALUES_MISMATCH)
        return file_error("cannot load the private key", files.key);
    if (SSL_CTX_check_private_key(c) != 1)
        return file_error("the private key does not match the certificate", files.key,
                          "it belongs to another certificate than " + files.cert);

    // The own certificate must come from the cluster CA, or no peer would
    // accept it: say so now rather than at every connection.
    X509* own = SSL_CTX_get0_certificate(c);
    X509_STORE_CTX* check = X509_STORE_CTX_new();
    if (!check)
        return Error::from_errno(ENOMEM, "cannot check the certificate");
    X509_STORE_CTX_init(check, SSL_CTX_get_cert_store(c), own, nullptr);
    const bool ok = X509_verify_cert(check) == 1;
    const int verr = X509_STORE_CTX_get_error(check);
    X509_STORE_CTX_free(check);
    if (!ok)
        return file_error("the certificate is not valid for the cluster CA", files.cert,
                          fmt::format("{} (CA {})", X509_verify_cert_error_string(verr), files.ca));
    std::string name = common_name(own);
    if (name.empty())
        return file_error("the certificate has no common name (CN)", files.cert, "no host name");

    SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_cb);
    SSL_CTX_set_verify_depth(c, 4);
    // One ticket, sent by the server once it has accepted the client: the
    // client waits for it to know it was accepted (see connect()).
    SSL_CTX_set_num_tickets(c, 1);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(c, new_session_cb);
    // Big reads: a whole socket buffer's worth of records per recv(2).
    SSL_CTX_set_read_ahead(c, 1);
    SSL_CTX_set_default_read_buffer_len(c, 256 * 1024);
    SSL_CTX_set_mode(c, SSL_MODE_AUTO_RETRY);
    ERR_clear_error();
    return std::shared_ptr<TlsContext>(std::make_shared<TlsCtx>(ctx.release(), std::move(name)));
}

} // namespace migd
