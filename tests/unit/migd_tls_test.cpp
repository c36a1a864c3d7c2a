// SPDX-License-Identifier: GPL-2.0
// migd's mutual TLS: who is accepted, why others are refused (on both sides),
// timeouts, a large transfer, orderly and abrupt ends.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <thread>

#include <openssl/ssl.h>

#include "channel.hpp"
#include "migd_certs.hpp"

namespace {

using namespace std::chrono;
using migd::Channel;
using migd::TlsContext;
using migd_test::Certs;
using migd_test::ctx;
using migd_test::Server;

std::span<const std::byte> bytes(std::string_view s) {
    return std::as_bytes(std::span(s));
}

std::string read_some(Channel& ch) {
    char buf[256];
    auto n = ch.read(std::as_writable_bytes(std::span(buf)));
    return n ? std::string(buf, *n) : "error: " + n.error().what();
}

TEST(MigdTls, HandshakeBothWaysWithTheRightNames) {
    auto h1 = ctx(Certs::get().host("h1"));
    auto h2 = ctx(Certs::get().host("h2"));
    ASSERT_TRUE(h1 && h2);
    EXPECT_EQ(h1->own_name(), "h1");
    Server srv(h1);
    auto c = h2->connect("127.0.0.1", srv.port, "h1", 5s);
    ASSERT_TRUE(c) << c.error().what();
    auto s = srv.get();
    ASSERT_TRUE(s) << s.error().what();
    EXPECT_EQ((*c)->peer(), "h1");
    EXPECT_EQ((*s)->peer(), "h2");
    ASSERT_TRUE((*c)->write(bytes("hello h1")));
    EXPECT_EQ(read_some(**s), "hello h1");
    ASSERT_TRUE((*s)->write(bytes("hello h2")));
    EXPECT_EQ(read_some(**c), "hello h2");
}

TEST(MigdTls, ClientOfAnotherCaIsRefusedAndBothSidesSayWhy) {
    auto h1 = ctx(Certs::get().host("h1"));
    auto rogue = ctx(Certs::get().rogue());
    ASSERT_TRUE(h1 && rogue);
    Server srv(h1);
    auto c = rogue->connect("127.0.0.1", srv.port, "h1", 5s);
    auto s = srv.get();
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().what().find("(certificate of \"h2\", not signed by this cluster's CA)"),
              std::string::npos)
        << s.error().what();
    ASSERT_FALSE(c);
    EXPECT_NE(c.error().what().find("refused the handshake (tlsv1 alert unknown ca)"),
              std::string::npos)
        << c.error().what();
}

// A raw OpenSSL client: no certificate, or TLS 1.2 at most.
ghost::Result<void> raw_client(std::uint16_t port, bool with_cert, int max_version) {
    SSL_CTX* c = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_max_proto_version(c, max_version);
    const auto f = Certs::get().host("h2");
    SSL_CTX_load_verify_file(c, f.ca.c_str());
    if (with_cert) {
        SSL_CTX_use_certificate_chain_file(c, f.cert.c_str());
        SSL_CTX_use_PrivateKey_file(c, f.key.c_str(), SSL_FILETYPE_PEM);
    }
    ghost::UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
    const timeval tv{5, 0}; // a server that wrongly accepts must not hang the test
    ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    SSL* ssl = SSL_new(c);
    SSL_set_fd(ssl, s.get());
    int rc = SSL_connect(ssl);
    char b;
    if (rc == 1)
        rc = SSL_read(ssl, &b, 1); // the server's verdict arrives after the client's Finished
    SSL_free(ssl);
    SSL_CTX_free(c);
    if (rc <= 0)
        return ghost::Error::from_errno(EPROTO, "refused");
    return {};
}

TEST(MigdTls, ClientWithoutCertificateIsRefused) {
    auto h1 = ctx(Certs::get().host("h1"));
    Server srv(h1);
    EXPECT_FALSE(raw_client(srv.port, false, TLS1_3_VERSION));
    auto s = srv.get();
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().what(), "peer sent no certificate");
}

TEST(MigdTls, Tls12OnlyClientIsRefused) {
    auto h1 = ctx(Certs::get().host("h1"));
    Server srv(h1);
    EXPECT_FALSE(raw_client(srv.port, true, TLS1_2_VERSION));
    auto s = srv.get();
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().what(), "TLS 1.2 offered: only TLS 1.3 is accepted");
}

TEST(MigdTls, WrongExpectedNameIsRefused) {
    auto h1 = ctx(Certs::get().host("h1"));
    auto h2 = ctx(Certs::get().host("h2"));
    Server srv(h1);
    auto c = h2->connect("127.0.0.1", srv.port, "h3", 5s);
    ASSERT_FALSE(c);
    EXPECT_NE(c.error().what().find("certificate names h1, expected h3"), std::string::npos)
        << c.error().what();
    auto s = srv.get();
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().what().find("refused the handshake"), std::string::npos)
        << s.error().what();
}

TEST(MigdTls, LoadRefusesFilesThatDoNotBelongTogether) {
    auto f = Certs::get().host("h1");
    f.key = Certs::get().host("h2").key;
    auto r = TlsContext::load(f);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what().find("the private key does not match the certificate " + f.key),
              std::string::npos)
        << r.error().what();
    auto o = Certs::get().rogue();
    o.ca = Certs::get().host("h1").ca;
    r = TlsContext::load(o);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what().find("the certificate is not valid for the cluster CA " + o.cert +
                                    ": unable to get local issuer certificate"),
              std::string::npos)
        << r.error().what();
    f = Certs::get().host("h1");
    f.ca += ".missing";
    r = TlsContext::load(f);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().what(),
              "cannot load the cluster CA " + f.ca + ": No such file or directory");
}

TEST(MigdTls, SilentPeerTimesOut) {
    auto h2 = ctx(Certs::get().host("h2"));
    // A listening socket nobody accepts on: TCP connects, TLS never answers.
    auto l = migd::tcp_listen("127.0.0.1", 0);
    ASSERT_TRUE(l);
    auto t0 = steady_clock::now();
    auto c = h2->connect("127.0.0.1", migd_test::port_of(l->get()), "h1", 300ms);
    auto took = steady_clock::now() - t0;
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code.value(), ETIMEDOUT) << c.error().what();
    EXPECT_GE(took, 290ms);
    EXPECT_LT(took, 3s);

    // An established channel whose peer says nothing.
    auto h1 = ctx(Certs::get().host("h1"));
    Server srv(h1);
    auto ch = h2->connect("127.0.0.1", srv.port, "h1", 5s);
    ASSERT_TRUE(ch) << ch.error().what();
    auto s = srv.get();
    ASSERT_TRUE(s);
    (*ch)->set_timeout(300ms);
    char buf[16];
    t0 = steady_clock::now();
    auto n = (*ch)->read(std::as_writable_bytes(std::span(buf)));
    took = steady_clock::now() - t0;
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error().code.value(), ETIMEDOUT) << n.error().what();
    EXPECT_NE(n.error().what().find("h1 was silent for 300 ms"), std::string::npos);
    EXPECT_GE(took, 250ms);
    EXPECT_LT(took, 3s);

    // A peer that reads nothing: once the socket buffers are full, a write
    // fails within the timeout instead of blocking for ever.
    std::vector<std::byte> big(1 << 20);
    t0 = steady_clock::now();
    ghost::Result<void> w;
    for (int i = 0; i < 256 && w; ++i)
        w = (*ch)->write(big);
    ASSERT_FALSE(w) << "256 MiB went into a peer that reads nothing";
    EXPECT_EQ(w.error().code.value(), ETIMEDOUT) << w.error().what();
    EXPECT_LT(steady_clock::now() - t0, 5s);
}

std::uint64_t fnv(std::uint64_t h, std::span<const std::byte> d) {
    for (auto b : d)
        h = (h ^ static_cast<std::uint8_t>(b)) * 0x100000001b3ull;
    return h;
}

TEST(MigdTls, Transfer64MiBIntact) {
    auto h1 = ctx(Certs::get().host("h1"));
    auto h2 = ctx(Certs::get().host("h2"));
    Server srv(h1);
    auto c = h2->connect("127.0.0.1", srv.port, "h1", 5s);
    ASSERT_TRUE(c) << c.error().what();
    auto s = srv.get();
    ASSERT_TRUE(s);
    constexpr std::size_t total = 64u << 20;
    auto sent = std::async(std::launch::async, [&] {
        std::vector<std::byte> buf(1 << 20);
        std::mt19937_64 rng(42);
        std::uint64_t h = 0xcbf29ce484222325ull;
        for (std::size_t done = 0; done < total;) {
            const std::size_t n = std::min<std::size_t>(total - done, 1 + rng() % buf.size());
            for (std::size_t i = 0; i < n; ++i)
                buf[i] = static_cast<std::byte>(rng());
            if (!(*c)->write(std::span(buf).first(n)))
                return std::uint64_t{0};
            h = fnv(h, std::span(buf).first(n));
            done += n;
        }
        return (*c)->finish() ? h : 0;
    });
    std::vector<std::byte> buf(300000);
    std::uint64_t h = 0xcbf29ce484222325ull;
    std::size_t got = 0;
    for (;;) {
        auto n = (*s)->read(buf);
        ASSERT_TRUE(n) << n.error().what();
        if (*n == 0)
            break;
        h = fnv(h, std::span(buf).first(*n));
        got += *n;
    }
    EXPECT_EQ(got, total);
    EXPECT_EQ(h, sent.get());
}

TEST(MigdTls, CloseNotifyEndsTheStreamAnAbruptCloseIsAnError) {
    auto h1 = ctx(Certs::get().host("h1"));
    auto h2 = ctx(Certs::get().host("h2"));
    for (const bool orderly : {true, false}) {
        Server srv(h1);
        auto c = h2->connect("127.0.0.1", srv.port, "h1", 5s);
        ASSERT_TRUE(c) << c.error().what();
        auto s = srv.get();
        ASSERT_TRUE(s);
        ASSERT_TRUE((*c)->write(bytes("last words")));
        if (orderly)
            ASSERT_TRUE((*c)->finish());
        else
            c->reset(); // destroyed without finish(): no close_notify
        EXPECT_EQ(read_some(**s), "last words");
        char b[8];
        auto n = (*s)->read(std::as_writable_bytes(std::span(b)));
        if (orderly) {
            ASSERT_TRUE(n) << n.error().what();
            EXPECT_EQ(*n, 0u);
            // The other direction is still open after the peer's close_notify.
            ASSERT_TRUE((*s)->write(bytes("reply")));
            EXPECT_EQ(read_some(**c), "reply");
        } else {
            ASSERT_FALSE(n);
            EXPECT_EQ(n.error().what(),
                      "connection closed without TLS close_notify: stream truncated");
        }
    }
}

TEST(MigdTls, PlainChannelCarriesBytesAndTimesOut) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    auto a = migd::plain_channel(ghost::UniqueFd(sv[0]));
    auto b = migd::plain_channel(ghost::UniqueFd(sv[1]));
    EXPECT_EQ(a->peer(), "");
    ASSERT_TRUE(a->write(bytes("plain")));
    EXPECT_EQ(read_some(*b), "plain");
    b->set_timeout(100ms);
    char buf[4];
    auto n = b->read(std::as_writable_bytes(std::span(buf)));
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error().code.value(), ETIMEDOUT);
    ASSERT_TRUE(a->finish());
    n = b->read(std::as_writable_bytes(std::span(buf)));
    ASSERT_TRUE(n);
    EXPECT_EQ(*n, 0u);
}

} // namespace
