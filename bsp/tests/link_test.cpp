// SPDX-License-Identifier: GPL-2.0
// The VP-hub link over TCP with TLS 1.3 and the job key (bsp/wire/link.hpp):
// frames arrive whole and in order, a wrong key is refused on both sides,
// close() is an end of stream, keys round-trip through hex.
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <thread>

#include "link.hpp"

using namespace ghost;
using namespace ghost::bsp;
using namespace ghost::bsp::wire;

namespace {

struct Pair {
    Result<Link> server = Error{};
    Result<Link> client = Error{};
};

// A TLS handshake on 127.0.0.1 between a server with skey and a client
// with ckey.
Pair handshake(const Key& skey, const Key& ckey) {
    std::string addr;
    auto l = listen_tcp("127.0.0.1", &addr);
    EXPECT_TRUE(l) << (l ? "" : l.error().what());
    auto sctx = TlsContext::make(TlsContext::Role::Server, skey);
    auto cctx = TlsContext::make(TlsContext::Role::Client, ckey);
    EXPECT_TRUE(sctx && cctx);
    Pair p;
    std::thread srv([&] {
        UniqueFd fd(::accept4(l->get(), nullptr, nullptr, SOCK_CLOEXEC));
        p.server = tls_accept(*sctx, std::move(fd));
    });
    auto fd = connect_tcp(addr);
    EXPECT_TRUE(fd) << (fd ? "" : fd.error().what());
    p.client = tls_connect(*cctx, std::move(*fd));
    srv.join();
    return p;
}

Key key_of(std::uint8_t b) {
    Key k;
    k.fill(static_cast<std::byte>(b));
    return k;
}

std::vector<std::byte> pattern(std::size_t n) {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = static_cast<std::byte>(i * 7 + 3);
    return v;
}

} // namespace

TEST(BspLink, TheJobKeyCarriesFramesBothWaysInOrder) {
    auto p = handshake(key_of(1), key_of(1));
    ASSERT_TRUE(p.server) << p.server.error().what();
    ASSERT_TRUE(p.client) << p.client.error().what();
    EXPECT_TRUE(p.client->tls());
    const auto big = pattern(3 << 20); // several TLS records
    std::thread tx([&] {
        ASSERT_TRUE(send_frame(*p.client, Type::Sync, big));
        ASSERT_TRUE(send_frame(*p.client, Type::End));
    });
    auto a = recv_frame(*p.server);
    auto b = recv_frame(*p.server);
    tx.join();
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->type, Type::Sync);
    EXPECT_EQ(a->payload, big);
    EXPECT_EQ(b->type, Type::End);
    EXPECT_TRUE(b->payload.empty());
    ASSERT_TRUE(send_frame(*p.server, Type::EndOk, pattern(10)));
    auto c = recv_frame(*p.client);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->type, Type::EndOk);
    EXPECT_EQ(c->payload, pattern(10));
}

TEST(BspLink, AWrongKeyIsRefusedOnBothSides) {
    auto wrong = key_of(1);
    wrong[31] = std::byte{2}; // one bit off
    auto p = handshake(key_of(1), wrong);
    ASSERT_FALSE(p.server);
    EXPECT_NE(p.server.error().what().find("TLS handshake failed"), std::string::npos)
        << p.server.error().what();
    EXPECT_FALSE(p.client);
}

TEST(BspLink, CloseIsTheEndOfTheStream) {
    auto p = handshake(key_of(9), key_of(9));
    ASSERT_TRUE(p.server && p.client);
    ASSERT_TRUE(send_frame(*p.client, Type::Detached));
    p.client->close();
    auto f = recv_frame(*p.server);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->type, Type::Detached);
    auto eof = recv_frame(*p.server);
    ASSERT_FALSE(eof);
    EXPECT_EQ(eof.error().code.value(), ECONNRESET) << eof.error().what();
    // Writing to a closed peer is an error, not SIGPIPE.
    std::vector<std::byte> lots(1 << 20);
    Result<void> w;
    for (int i = 0; i < 16 && w; ++i)
        w = send_frame(*p.server, Type::Deliver, lots);
    EXPECT_FALSE(w);
}

TEST(BspLink, KeysRoundTripThroughHexAndBadHexIsRefused) {
    auto k = make_key();
    ASSERT_TRUE(k);
    EXPECT_NE(*k, key_of(0));
    const std::string hex = key_hex(*k);
    EXPECT_EQ(hex.size(), 64u);
    auto back = key_from_hex(hex);
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, *k);
    EXPECT_FALSE(key_from_hex(hex.substr(1)));
    EXPECT_FALSE(key_from_hex(std::string(64, 'g')));
}
