// SPDX-License-Identifier: GPL-2.0
// A cluster CA and host certificates made by tools/ghost-ca in a temporary
// directory, once per test program (tests only).
#pragma once

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>

#include "channel.hpp"
#include "subprocess.hpp"

namespace migd_test {

struct Certs {
    std::filesystem::path dir;   // cluster CA "ca" with hosts h1 h2 h3 h9
    std::filesystem::path other; // another CA with a host named h2

    static const Certs& get() {
        static Certs c = make();
        static Remover r{c.dir.parent_path()}; // destroyed before c
        return c;
    }
    migd::TlsFiles host(const std::string& name) const {
        return {(dir / "ca.pem").string(), (dir / (name + ".pem")).string(),
                (dir / (name + ".key")).string()};
    }
    // h2 of the other CA, trusting both CAs (so that it accepts our servers).
    migd::TlsFiles rogue() const {
        return {(other / "both.pem").string(), (other / "h2.pem").string(),
                (other / "h2.key").string()};
    }

  private:
    struct Remover {
        std::filesystem::path p;
        ~Remover() { std::filesystem::remove_all(p); }
    };
    static void ca(const std::string& d, std::initializer_list<const char*> hosts) {
        auto r = testing_util::run({GHOST_CA_PATH, "init", d});
        if (r.status != 0)
            throw std::runtime_error("ghost-ca init: " + r.err);
        for (const char* h : hosts) {
            r = testing_util::run({GHOST_CA_PATH, "add-host", d, h, "127.0.0.1"});
            if (r.status != 0)
                throw std::runtime_error("ghost-ca add-host: " + r.err);
        }
    }
    static Certs make() {
        Certs c;
        const auto base =
            std::filesystem::temp_directory_path() / ("migd-certs-" + std::to_string(::getpid()));
        std::filesystem::remove_all(base);
        c.dir = base / "cluster";
        c.other = base / "other";
        ca(c.dir.string(), {"h1", "h2", "h3", "h9"});
        ca(c.other.string(), {"h2"});
        std::ofstream both(c.other / "both.pem");
        both << std::ifstream(c.dir / "ca.pem").rdbuf()
             << std::ifstream(c.other / "ca.pem").rdbuf();
        return c;
    }
};

inline std::uint16_t port_of(int fd) {
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    return ntohs(a.sin_port);
}

inline std::shared_ptr<migd::TlsContext> ctx(const migd::TlsFiles& f) {
    auto r = migd::TlsContext::load(f);
    if (!r)
        ADD_FAILURE() << r.error().what();
    return r ? *r : nullptr;
}

// A loopback server accepting one connection with a TlsContext.
struct Server {
    ghost::UniqueFd lfd;
    std::uint16_t port = 0;
    std::future<ghost::Result<std::unique_ptr<migd::Channel>>> result;

    explicit Server(std::shared_ptr<migd::TlsContext> tls,
                    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
        auto l = migd::tcp_listen("127.0.0.1", 0);
        EXPECT_TRUE(l) << l.error().what();
        lfd = std::move(*l);
        port = port_of(lfd.get());
        result = std::async(std::launch::async, [this, tls, timeout] {
            ghost::UniqueFd c(::accept4(lfd.get(), nullptr, nullptr, SOCK_CLOEXEC));
            return tls->accept(std::move(c), timeout);
        });
    }
    ghost::Result<std::unique_ptr<migd::Channel>> get() { return result.get(); }
};

} // namespace migd_test
