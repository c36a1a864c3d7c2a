// SPDX-License-Identifier: GPL-2.0
// migd's peer listener: only [[peer]] hosts reach the handler, every refusal
// is logged with the address and the reason, the connection limit holds, and
// stop() ends even with connections open.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "listener.hpp"
#include "migd_certs.hpp"
#include "net.hpp"
#include "pool.hpp"

namespace {

using namespace std::chrono;
using migd_test::Certs;

// Collects log lines; restores the previous default logger when done.
class Log : public spdlog::sinks::base_sink<std::mutex> {
  public:
    bool wait_for(const std::string& s, milliseconds t = 5s) {
        const auto end = steady_clock::now() + t;
        while (steady_clock::now() < end) {
            {
                std::lock_guard lock(mutex_);
                if (text_.find(s) != std::string::npos)
                    return true;
            }
            std::this_thread::sleep_for(10ms);
        }
        std::lock_guard lock(mutex_);
        ADD_FAILURE() << "not logged: " << s << "\nlog:\n" << text_;
        return false;
    }

  protected:
    void sink_it_(const spdlog::details::log_msg& m) override {
        text_.append(m.payload.data(), m.payload.size()).append("\n");
    }
    void flush_() override {}

  private:
    std::string text_;
};

struct Capture {
    std::shared_ptr<Log> log = std::make_shared<Log>();
    std::shared_ptr<spdlog::logger> old = spdlog::default_logger();
    Capture() { spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", log)); }
    ~Capture() { spdlog::set_default_logger(old); }
};

migd::Config config(unsigned max_transfers = 4) {
    migd::Config c;
    c.host = "h1";
    c.peers = {{"h2", "127.0.0.1", 0}};
    c.max_transfers = max_transfers;
    // Long: a handshake or a handler's read that timed out under load
    // would free a slot the tests count; stop() ends them anyway.
    c.io_timeout_ms = 60000;
    return c;
}

std::unique_ptr<migd::Listener> start(const migd::Config& cfg, migd::PeerHandler h) {
    auto tls = migd::TlsContext::load(Certs::get().host("h1"));
    EXPECT_TRUE(tls) << tls.error().what();
    auto fd = migd::tcp_listen("127.0.0.1", 0);
    EXPECT_TRUE(fd);
    auto l = migd::Listener::start(cfg, *tls, std::move(h), std::move(*fd));
    EXPECT_TRUE(l) << l.error().what();
    return std::move(*l);
}

std::shared_ptr<migd::TlsContext> client(const std::string& name) {
    auto r = migd::TlsContext::load(Certs::get().host(name));
    EXPECT_TRUE(r);
    return *r;
}

TEST(MigdListener, OnlyPeersReachTheHandlerOthersAreRefusedAndLogged) {
    Capture cap;
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::string> seen;
    auto l = start(config(), [&](std::unique_ptr<migd::Channel> ch) {
        char buf[64];
        auto n = ch->read(std::as_writable_bytes(std::span(buf)));
        std::lock_guard lock(mu);
        seen.push_back(ch->peer() + ":" + (n ? std::string(buf, *n) : n.error().what()));
        cv.notify_all();
    });

    // h9 has a certificate of the cluster CA but is not in [[peer]].
    auto h9 = client("h9")->connect("127.0.0.1", l->port(), "h1", 5s);
    ASSERT_TRUE(h9) << h9.error().what();
    char b;
    auto n = (*h9)->read(std::as_writable_bytes(std::span(&b, 1)));
    EXPECT_TRUE(n && *n == 0) << "h9 should see the connection closed";
    cap.log->wait_for("refused peer 127.0.0.1:");
    cap.log->wait_for("h9 is not a peer of this host");

    // A certificate of another CA never gets as far.
    auto rogue = migd::TlsContext::load(Certs::get().rogue());
    ASSERT_TRUE(rogue);
    EXPECT_FALSE((*rogue)->connect("127.0.0.1", l->port(), "h1", 5s));
    cap.log->wait_for("certificate verify failed: self-signed certificate in certificate chain "
                      "(certificate of \"h2\", not signed by this cluster's CA)");

    auto h2 = client("h2")->connect("127.0.0.1", l->port(), "h1", 5s);
    ASSERT_TRUE(h2) << h2.error().what();
    const std::string hello = "hello";
    ASSERT_TRUE((*h2)->write(std::as_bytes(std::span(hello))));
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return !seen.empty(); }));
    EXPECT_EQ(seen, std::vector<std::string>{"h2:hello"});
    lock.unlock();
    cap.log->wait_for("peer h2 connected from 127.0.0.1:");
    l->stop();
}

// A TCP connection to the listener from source (any 127/8 address is this
// host's), silent: it holds a handshake slot until its timeout.
ghost::UniqueFd silent(std::uint16_t port, const char* source) {
    ghost::UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &from.sin_addr);
    EXPECT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(s.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
    return s;
}

// True when the listener closes s (within 3 s).
bool closed_by_listener(const ghost::UniqueFd& s) {
    const timeval tv{3, 0}; // not closed: fail, do not hang
    ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char b;
    return ::recv(s.get(), &b, 1, 0) == 0;
}

template <class F> bool eventually(F f) {
    for (int i = 0; i < 300 && !f(); ++i)
        std::this_thread::sleep_for(10ms);
    return f();
}

TEST(MigdListener, ExcessConnectionsAreRefusedAndStopEndsOpenOnes) {
    Capture cap;
    std::atomic<int> handler_errors{0};
    auto l = start(config(1), [&](std::unique_ptr<migd::Channel> ch) {
        char buf[8];
        if (!ch->read(std::as_writable_bytes(std::span(buf)))) // blocks until stop()
            ++handler_errors;
    });
    // max_transfers 1 + 4 spare + what the one peer may keep idle.
    const unsigned limit = 1 + 4 + unsigned(migd::kept_per_peer);
    EXPECT_EQ(l->limit(), limit);
    std::vector<std::unique_ptr<migd::Channel>> open;
    for (unsigned i = 0; i < limit; ++i) {
        auto h2 = client("h2")->connect("127.0.0.1", l->port(), "h1", 5s);
        ASSERT_TRUE(h2) << h2.error().what();
        open.push_back(std::move(*h2));
    }
    EXPECT_TRUE(eventually([&] { return l->active() == limit; })) << l->active();
    // One more authenticated connection is closed after its handshake.
    auto extra = client("h2")->connect("127.0.0.1", l->port(), "h1", 5s);
    if (extra) {
        char b;
        auto n = (*extra)->read(std::as_writable_bytes(std::span(&b, 1)));
        EXPECT_TRUE(!n || *n == 0) << "the connection past the limit should be closed";
    }
    cap.log->wait_for(fmt::format("too many connections: {} of this peer's", limit));
    EXPECT_EQ(l->active(), limit);

    // A silent connection: stop() must not wait for its handshake's 5 s.
    ghost::UniqueFd idle = silent(l->port(), "127.0.0.1");
    EXPECT_TRUE(eventually([&] { return l->handshaking() == 1u; }));
    const auto t0 = steady_clock::now();
    l->stop();
    EXPECT_LT(steady_clock::now() - t0, 2s);
    EXPECT_EQ(l->active(), 0u);
    EXPECT_EQ(l->handshaking(), 0u);
    EXPECT_EQ(handler_errors.load(), int(limit));
}

// One peer taking every place it can (every shared one, and its own) leaves
// each other peer its own: h3 still connects, though h2 is refused.
TEST(MigdListener, APeerCannotTakeAnotherPeersOwnPlaces) {
    Capture cap;
    migd::Config c = config(1);
    c.peers = {{"h2", "127.0.0.1", 0}, {"h3", "127.0.0.1", 0}};
    auto l = start(c, [&](std::unique_ptr<migd::Channel> ch) {
        char buf[8];
        (void)ch->read(std::as_writable_bytes(std::span(buf))); // until stop()
    });
    const unsigned own = unsigned(migd::kept_per_peer);
    const unsigned h2_most = l->shared_places() + own;
    EXPECT_EQ(l->limit(), l->shared_places() + 2 * own);
    std::vector<std::unique_ptr<migd::Channel>> open;
    for (unsigned i = 0; i < h2_most; ++i) {
        auto h2 = client("h2")->connect("127.0.0.1", l->port(), "h1", 5s);
        ASSERT_TRUE(h2) << h2.error().what();
        open.push_back(std::move(*h2));
    }
    EXPECT_TRUE(eventually([&] { return l->active() == h2_most; })) << l->active();
    auto extra = client("h2")->connect("127.0.0.1", l->port(), "h1", 5s);
    if (extra) {
        char b;
        auto n = (*extra)->read(std::as_writable_bytes(std::span(&b, 1)));
        EXPECT_TRUE(!n || *n == 0) << "h2's connection past its places should be closed";
    }
    cap.log->wait_for(fmt::format("too many connections: {} of this peer's", h2_most));
    for (unsigned i = 0; i < own; ++i) {
        auto h3 = client("h3")->connect("127.0.0.1", l->port(), "h1", 5s);
        ASSERT_TRUE(h3) << h3.error().what();
        open.push_back(std::move(*h3));
    }
    EXPECT_TRUE(eventually([&] { return l->active() == h2_most + own; }))
        << "h3 did not get its own places: " << l->active() << " active";
    // h2 lets one go: its place is a shared one again, and h3 may take it.
    open.front().reset();
    EXPECT_TRUE(eventually([&] { return l->active() == h2_most + own - 1; })) << l->active();
    auto h3 = client("h3")->connect("127.0.0.1", l->port(), "h1", 5s);
    ASSERT_TRUE(h3) << h3.error().what();
    EXPECT_TRUE(eventually([&] { return l->active() == h2_most + own; })) << l->active();
    l->stop();
    EXPECT_EQ(l->active(), 0u);
}

TEST(MigdListener, SilentStrangersCannotLockThePeersOut) {
    Capture cap;
    std::atomic<int> served{0};
    migd::Config c = config(1);
    // The strangers together may hold more than the whole limit (7).
    c.max_handshakes = 8;
    c.max_handshakes_per_address = 3;
    auto l = start(c, [&](std::unique_ptr<migd::Channel>) { ++served; });
    ASSERT_GT(c.max_handshakes, l->limit());
    // Three silent connections from one address take its budget; a fourth
    // is closed at once.
    std::vector<ghost::UniqueFd> strangers;
    for (int i = 0; i < 3; ++i)
        strangers.push_back(silent(l->port(), "127.0.0.3"));
    EXPECT_TRUE(eventually([&] { return l->handshaking() == 3u; }));
    EXPECT_TRUE(closed_by_listener(silent(l->port(), "127.0.0.3")));
    cap.log->wait_for("3 TLS handshakes from 127.0.0.3 under way, the limit for an address that "
                      "is no [[peer]]'s ([limits] max_handshakes_per_address)");
    // More addresses reach the strangers' budget together.
    for (const char* from : {"127.0.0.4", "127.0.0.4", "127.0.0.4", "127.0.0.5", "127.0.0.5"})
        strangers.push_back(silent(l->port(), from));
    EXPECT_TRUE(eventually([&] { return l->handshaking() == 8u; }));
    EXPECT_TRUE(closed_by_listener(silent(l->port(), "127.0.0.6")));
    cap.log->wait_for("8 TLS handshakes from addresses that are no [[peer]]'s under way, their "
                      "limit ([limits] max_handshakes)");

    // The peer, from its configured address, still gets in, again and again
    // (more connections than its budget and the whole limit).
    for (unsigned i = 0; i < l->limit() + 2; ++i) {
        auto h2 = client("h2")->connect("127.0.0.1", l->port(), "h1", 5s);
        ASSERT_TRUE(h2) << i << ": " << h2.error().what();
        (void)(*h2)->finish();
    }
    EXPECT_TRUE(eventually([&] { return served.load() == int(l->limit()) + 2; })) << served.load();

    // A stranger's slot frees when its connection ends.
    strangers.pop_back();
    EXPECT_TRUE(eventually([&] { return l->handshaking() == 7u; }));
    ghost::UniqueFd again = silent(l->port(), "127.0.0.6");
    EXPECT_TRUE(eventually([&] { return l->handshaking() == 8u; }));

    // The peer's own address has a budget too: what one peer may use.
    const unsigned budget = 1 + 4 + unsigned(migd::kept_per_peer);
    std::vector<ghost::UniqueFd> from_peer;
    for (unsigned i = 0; i < budget; ++i)
        from_peer.push_back(silent(l->port(), "127.0.0.1"));
    EXPECT_TRUE(eventually([&] { return l->handshaking() == 8u + budget; }));
    EXPECT_TRUE(closed_by_listener(silent(l->port(), "127.0.0.1")));
    cap.log->wait_for(fmt::format("{} TLS handshakes from 127.0.0.1, a peer's address, under way: "
                                  "the limit for one peer",
                                  budget));
    l->stop();
}

TEST(MigdListener, HostsAreAddressesAndSourcesIPv4AddressesOrIPv6Prefixes) {
    using V = std::vector<std::string>;
    EXPECT_EQ(migd::net::hosts_of("127.0.0.1").value_or(V{}), V{"127.0.0.1"});
    EXPECT_EQ(migd::net::hosts_of("::ffff:10.1.2.3").value_or(V{}), V{"10.1.2.3"});
    EXPECT_EQ(migd::net::hosts_of("2001:db8:1:2:3:4:5:6").value_or(V{}), V{"2001:db8:1:2:3:4:5:6"});
    auto bad = migd::net::hosts_of("no-such-host.invalid");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().what().find("cannot resolve no-such-host.invalid"), std::string::npos);

    auto origin = [](const char* listen, const char* to) {
        auto l = migd::tcp_listen(listen, 0);
        if (!l)
            return migd::net::Origin{};
        sockaddr_storage ss{};
        socklen_t len = sizeof(ss);
        ::getsockname(l->get(), reinterpret_cast<sockaddr*>(&ss), &len);
        const auto port =
            ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
        auto c = migd::net::tcp_connect(to, port, 2s);
        if (!c)
            return migd::net::Origin{};
        ghost::UniqueFd a(::accept4(l->get(), nullptr, nullptr, SOCK_CLOEXEC));
        return migd::net::origin_of(a.get());
    };
    const auto v4 = origin("127.0.0.1", "127.0.0.1");
    EXPECT_EQ(v4.host, "127.0.0.1");
    EXPECT_EQ(v4.source, "127.0.0.1");
    const auto v6 = origin("::1", "::1");
    if (v6.host.empty())
        return; // no IPv6 here
    EXPECT_EQ(v6.host, "::1");
    EXPECT_EQ(v6.source, "::/64");
}

TEST(MigdListener, LoadTlsChecksTheCertificateNamesTheHost) {
    migd::Config c = config();
    auto none = migd::load_tls(c);
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().what().find("peer operations are disabled"), std::string::npos);
    const auto f = Certs::get().host("h2");
    c.tls_ca = f.ca;
    c.tls_cert = f.cert;
    c.tls_key = f.key;
    auto wrong = migd::load_tls(c);
    ASSERT_FALSE(wrong);
    EXPECT_NE(wrong.error().what().find("names host \"h2\" but [host] name is \"h1\""),
              std::string::npos)
        << wrong.error().what();
    c.host = "h2";
    c.peers.clear();
    EXPECT_TRUE(migd::load_tls(c));
}

} // namespace
