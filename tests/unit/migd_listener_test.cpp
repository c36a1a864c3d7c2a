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
    c.io_timeout_ms = 5000;
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

TEST(MigdListener, ExcessConnectionsAreRefusedAndStopEndsOpenOnes) {
    Capture cap;
    std::atomic<int> handler_errors{0};
    auto l = start(config(1), [&](std::unique_ptr<migd::Channel> ch) {
        char buf[8];
        if (!ch->read(std::as_writable_bytes(std::span(buf)))) // blocks until stop()
            ++handler_errors;
    });
    // One authenticated connection in its handler, the rest stuck before
    // their handshake: the limit (max_transfers 1 + 4 spare + what the one
    // peer may keep idle) is reached.
    const unsigned limit = 1 + 4 + unsigned(migd::kept_per_peer);
    auto h2 = client("h2")->connect("127.0.0.1", l->port(), "h1", 5s);
    ASSERT_TRUE(h2) << h2.error().what();
    std::vector<ghost::UniqueFd> idle;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(l->port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    auto tcp = [&] {
        ghost::UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        EXPECT_EQ(::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
        return s;
    };
    for (unsigned i = 1; i < limit; ++i)
        idle.push_back(tcp());
    for (int i = 0; i < 100 && l->active() < limit; ++i)
        std::this_thread::sleep_for(10ms);
    EXPECT_EQ(l->active(), limit);
    ghost::UniqueFd extra = tcp();
    const timeval tv{3, 0}; // not closed: fail, do not hang
    ::setsockopt(extra.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char b;
    EXPECT_EQ(::recv(extra.get(), &b, 1, 0), 0) << "the connection past the limit should be closed";
    cap.log->wait_for(fmt::format("too many connections ({} at once, limit {}", limit, limit));

    const auto t0 = steady_clock::now();
    l->stop(); // the handshakes would wait 5 s; stop() must not
    EXPECT_LT(steady_clock::now() - t0, 2s);
    EXPECT_EQ(l->active(), 0u);
    EXPECT_EQ(handler_errors.load(), 1);
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
