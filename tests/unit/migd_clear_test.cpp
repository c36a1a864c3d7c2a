// SPDX-License-Identifier: GPL-2.0
// Image streams in the clear ([tls] clear_images): after the mutual-TLS
// handshake and TLS messages, an image's frames go on the socket itself
// (splice, sendfile, and splice into the restore stub's pipe) and the
// messages after them are TLS again; a receiver that let TLS read ahead
// fails the stream instead of misreading it; both hosts must agree.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "migd_certs.hpp"
#include "ops.hpp"
#include "wire.hpp"

namespace {

using namespace std::chrono;
using migd::Channel;
using migd::json;
using migd_test::Certs;
using migd_test::ctx;
using migd_test::Server;

struct Pair {
    std::unique_ptr<Channel> client, server; // h2 connected to h1
};

Pair tls_pair() {
    auto h1 = ctx(Certs::get().host("h1"));
    auto h2 = ctx(Certs::get().host("h2"));
    Server srv(h1);
    auto c = h2->connect("127.0.0.1", srv.port, "h1", 5s);
    auto s = srv.get();
    EXPECT_TRUE(c && s);
    return {c ? std::move(*c) : nullptr, s ? std::move(*s) : nullptr};
}

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
    std::vector<std::byte> v(n);
    std::mt19937_64 rng(seed);
    for (auto& b : v)
        b = static_cast<std::byte>(rng());
    return v;
}

// The exporter's side: a pipe that a thread fills with data, then closes.
struct Feeder {
    ghost::UniqueFd rd;
    std::thread t;
    explicit Feeder(std::span<const std::byte> data) {
        int p[2];
        EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
        rd.reset(p[0]);
        t = std::thread(
            [w = ghost::UniqueFd(p[1]), data] { EXPECT_TRUE(ghost::write_all(w.get(), data)); });
    }
    ~Feeder() { t.join(); }
};

// The restore stub's side: a pipe whose every byte a thread keeps.
struct Collector {
    ghost::UniqueFd wr;
    std::thread t;
    std::vector<std::byte> got;
    Collector() {
        int p[2];
        EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
        wr.reset(p[1]);
        t = std::thread([this, r = ghost::UniqueFd(p[0])] {
            std::byte buf[65536];
            ssize_t n;
            while ((n = ::read(r.get(), buf, sizeof(buf))) > 0)
                got.insert(got.end(), buf, buf + n);
        });
    }
    std::vector<std::byte>& finish() {
        wr.reset();
        t.join();
        return got;
    }
};

// Reads exactly n bytes of src (0: to its END).
std::vector<std::byte> read_n(migd::FrameSource& src, std::size_t n) {
    std::vector<std::byte> out;
    std::vector<std::byte> buf(1 << 20);
    while (n == 0 || out.size() < n) {
        const std::size_t want = n ? std::min(buf.size(), n - out.size()) : buf.size();
        auto r = src.read(std::span(buf).first(want));
        EXPECT_TRUE(r) << r.error().what();
        if (!r || *r == 0)
            break;
        out.insert(out.end(), buf.begin(), buf.begin() + static_cast<long>(*r));
    }
    return out;
}

std::vector<std::byte> slice(const std::vector<std::byte>& v, std::size_t from, std::size_t n) {
    return {v.begin() + static_cast<long>(from), v.begin() + static_cast<long>(from + n)};
}

TEST(MigdClear, ImageFramesGoOutsideTlsBetweenTlsMessages) {
    auto [c, s] = tls_pair();
    ASSERT_TRUE(c && s);
    s->receive_clear(); // the server receives the stream
    ASSERT_TRUE(migd::send_json(*c, {{"op", "import"}}));
    ASSERT_TRUE(migd::recv_json(*s));
    ASSERT_TRUE(migd::send_json(*s, {{"ok", true}}));
    ASSERT_TRUE(migd::recv_json(*c));
    c->set_clear(true);
    s->set_clear(true);
    EXPECT_GE(c->stream_fd(), 0);
    EXPECT_GE(s->stream_fd(), 0);

    const auto data = pattern((8u << 20) + 12345, 7);
    std::thread sender([&, &c = c] {
        // A message, then the stream at once: no pause for the receiver.
        EXPECT_TRUE(migd::send_json(*c, {{"op", "image"}}));
        Feeder f(data);
        auto st = migd::send_stream(*c, f.rd.get());
        EXPECT_TRUE(st) << st.error().what();
        EXPECT_TRUE(migd::send_end(*c));
        auto r = migd::recv_json(*c);
        ASSERT_TRUE(r) << r.error().what();
        EXPECT_EQ(r->value("bytes", 0u), data.size());
    });
    // The stream's first bytes wait in the socket behind the message: TLS
    // must read the message's record and no further.
    std::this_thread::sleep_for(100ms);
    auto head = migd::recv_json(*s);
    ASSERT_TRUE(head) << head.error().what();
    EXPECT_EQ(head->value("op", ""), "image");
    Collector stub;
    migd::FrameSource src(*s, stub.wr.get());
    const auto first = read_n(src, 4096); // read by migd and written to the stub
    auto skipped = src.skip(6u << 20);    // spliced to the stub, unread
    ASSERT_TRUE(skipped) << skipped.error().what();
    EXPECT_TRUE(*skipped);
    const auto rest = read_n(src, 0);
    EXPECT_TRUE(src.ended());
    EXPECT_EQ(src.bytes(), data.size());
    EXPECT_FALSE(src.pipe_gone());
    // (== rather than EXPECT_EQ: a mismatch would print megabytes)
    EXPECT_TRUE(stub.finish() == data) << "the stub's pipe got other bytes";
    EXPECT_TRUE(first == slice(data, 0, 4096));
    EXPECT_TRUE(rest == slice(data, 4096 + (6u << 20), data.size() - 4096 - (6u << 20)));
    // And TLS again for the answer.
    ASSERT_TRUE(migd::send_json(*s, {{"ok", true}, {"bytes", src.bytes()}}));
    sender.join();
}

// A restore stub that stops taking bytes without exiting (its pipe full,
// its reader open) is given up after the channel's timeout, both where
// migd writes what it read and where it splices page data: the rest of the
// stream is read and dropped, and stalled() says why (import_from then
// kills the stub). Nothing waits for ever.
TEST(MigdClear, AStubThatTakesNothingIsGivenUpAfterTheTimeout) {
    for (const bool splice : {false, true}) {
        SCOPED_TRACE(splice ? "page data spliced" : "bytes written by migd");
        auto [c, s] = tls_pair();
        ASSERT_TRUE(c && s);
        s->receive_clear();
        ASSERT_TRUE(migd::send_json(*c, {{"op", "import"}}));
        ASSERT_TRUE(migd::recv_json(*s));
        c->set_clear(true);
        s->set_clear(true);
        s->set_timeout(300ms);
        const auto data = pattern(4u << 20, 11);
        std::thread sender([&, &c = c] {
            Feeder f(data);
            EXPECT_TRUE(migd::send_stream(*c, f.rd.get()));
            EXPECT_TRUE(migd::send_end(*c));
        });
        int p[2];
        ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
        ghost::UniqueFd stub_rd(p[0]), wr(p[1]); // nobody reads stub_rd
        ASSERT_EQ(::fcntl(wr.get(), F_SETFL, O_NONBLOCK), 0);
        migd::FrameSource src(*s, wr.get());
        const auto t0 = steady_clock::now();
        if (splice) {
            auto k = src.skip(3u << 20);
            ASSERT_TRUE(k) << k.error().what();
        }
        const auto rest = read_n(src, 0);
        const auto waited = steady_clock::now() - t0;
        EXPECT_TRUE(src.ended());
        EXPECT_EQ(src.bytes(), data.size());
        EXPECT_TRUE(src.pipe_gone());
        EXPECT_TRUE(src.stalled());
        EXPECT_GE(waited, 300ms);
        EXPECT_LT(waited, 5s);
        sender.join();
    }
}

TEST(MigdClear, AStoredImageIsSentWithSendfile) {
    auto [c, s] = tls_pair();
    ASSERT_TRUE(c && s);
    c->receive_clear(); // the client fetches: it receives
    c->set_clear(true);
    s->set_clear(true);
    const auto data = pattern((3u << 20) + 777, 9);
    char path[] = "/tmp/migd-clear-XXXXXX";
    ghost::UniqueFd f(::mkstemp(path));
    ASSERT_TRUE(f);
    ::unlink(path);
    ASSERT_TRUE(ghost::write_all(f.get(), data));
    ASSERT_EQ(::lseek(f.get(), 0, SEEK_SET), 0);
    std::thread server([&, &s = s] {
        EXPECT_TRUE(migd::send_json(*s, {{"ok", true}}));
        auto st = migd::send_stream(*s, f.get());
        EXPECT_TRUE(st) << st.error().what();
        EXPECT_TRUE(migd::send_end(*s));
    });
    ASSERT_TRUE(migd::recv_json(*c));
    std::vector<std::byte> got;
    migd::FrameSource src(*c, [&](std::span<const std::byte> b) -> ghost::Result<void> {
        got.insert(got.end(), b.begin(), b.end());
        return {};
    });
    EXPECT_TRUE(read_n(src, 0) == data);
    EXPECT_TRUE(got == data);
    server.join();
}

TEST(MigdClear, AReceiverThatLetTlsReadAheadFailsTheStream) {
    auto [c, s] = tls_pair();
    ASSERT_TRUE(c && s);
    // No receive_clear() on the server: its TLS reads ahead of the message.
    c->set_clear(true);
    s->set_clear(true);
    const auto data = pattern(65536, 3);
    ASSERT_TRUE(migd::send_json(*c, {{"op", "image"}}));
    {
        Feeder f(data);
        ASSERT_TRUE(migd::send_stream(*c, f.rd.get()));
    }
    ASSERT_TRUE(migd::send_end(*c));
    std::this_thread::sleep_for(200ms); // all of it in the server's socket
    ASSERT_TRUE(migd::recv_json(*s));
    EXPECT_LT(s->stream_fd(), 0);
    migd::FrameSource src(*s, migd::FrameSource::Tee{});
    std::byte buf[16];
    auto r = src.read(buf);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code.value(), EPROTO);
    EXPECT_NE(r.error().what().find("out of step"), std::string::npos) << r.error().what();
}

TEST(MigdClear, BothHostsMustSayClearAndOnlyInsideTls) {
    migd::Config on, off;
    on.clear_images = true;
    for (const bool asker : {false, true})
        for (const bool answerer : {false, true}) {
            auto [c, s] = tls_pair();
            ASSERT_TRUE(c && s);
            json req = {{"op", "import"}};
            migd::offer_clear(asker ? on : off, *c, req, false);
            EXPECT_EQ(req.contains("clear"), asker);
            json reply = {{"ok", true}};
            const bool both = asker && answerer;
            EXPECT_EQ(migd::accept_clear(answerer ? on : off, *s, req, reply, true), both);
            EXPECT_EQ(reply.contains("clear"), both);
            EXPECT_EQ(s->clear(), both);
            EXPECT_EQ(migd::follow_clear(*c, req, reply), both);
            EXPECT_EQ(c->clear(), both);
        }
    // A reply cannot turn on what was not asked for.
    auto [c, s] = tls_pair();
    ASSERT_TRUE(c && s);
    const json plain_req = {{"op", "import"}};
    EXPECT_FALSE(migd::follow_clear(*c, plain_req, {{"ok", true}, {"clear", true}}));
    EXPECT_FALSE(c->clear());
    // A plain channel (a host talking to itself) has no TLS to leave.
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    auto a = migd::plain_channel(ghost::UniqueFd(sv[0]));
    auto b = migd::plain_channel(ghost::UniqueFd(sv[1]));
    json req = {{"op", "import"}};
    migd::offer_clear(on, *a, req, true);
    EXPECT_FALSE(req.contains("clear"));
    EXPECT_FALSE(a->clear());
}

} // namespace
