// SPDX-License-Identifier: GPL-2.0
// migd's transport against raw TCP, in the same run: the same N MiB sent
// over loopback through a plain TCP socket and through a migd TLS channel
// (TlsContext: mutual TLS 1.3, certificates made by tools/ghost-ca), with
// and without kernel TLS where the kernel and OpenSSL offer it. Prints MB/s
// of each and the ratio TLS/raw. Documentation/performance.md, "migd
// transport".
//   build/bin/ghost_bench_migd_transport [--mib N] [--chunk KIB] [--repeat R]
// Sender and receiver are two threads of this process: on loopback both ends
// (encryption and decryption) share the machine's cores, as two hosts would
// not; between hosts the network, not TLS, is the usual limit.
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "channel.hpp"
#include "ktls.hpp"

namespace {

using namespace std::chrono;

struct Options {
    std::size_t mib = 1024, chunk_kib = 1024;
    int repeat = 3;
};

std::uint16_t port_of(int fd) {
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    return ntohs(a.sin_port);
}

[[noreturn]] void die(const std::string& why) {
    fmt::print(stderr, "ghost_bench_migd_transport: {}\n", why);
    std::exit(1);
}

// Sends total bytes from one thread to another through a pair of channels;
// seconds from the first write to the last byte read.
double run(std::unique_ptr<migd::Channel> tx, std::unique_ptr<migd::Channel> rx, const Options& o) {
    const std::size_t total = o.mib << 20;
    std::vector<std::byte> out(o.chunk_kib << 10, std::byte{0x5a});
    const auto t0 = steady_clock::now();
    auto sender = std::async(std::launch::async, [&] {
        for (std::size_t done = 0; done < total;) {
            const std::size_t n = std::min(out.size(), total - done);
            if (auto r = tx->write(std::span(out).first(n)); !r)
                die("send: " + r.error().what());
            done += n;
        }
        if (auto r = tx->finish(); !r)
            die("finish: " + r.error().what());
    });
    std::vector<std::byte> in(o.chunk_kib << 10);
    std::size_t got = 0;
    for (;;) {
        auto n = rx->read(in);
        if (!n)
            die("receive: " + n.error().what());
        if (*n == 0)
            break;
        got += *n;
    }
    const double secs = duration<double>(steady_clock::now() - t0).count();
    sender.get();
    if (got != total)
        die(fmt::format("received {} of {} bytes", got, total));
    return secs;
}

using Pair = std::pair<std::unique_ptr<migd::Channel>, std::unique_ptr<migd::Channel>>;

Pair raw_pair() {
    auto l = migd::tcp_listen("127.0.0.1", 0);
    if (!l)
        die(l.error().what());
    ghost::UniqueFd c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_of(l->get()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(c.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
        die("connect");
    ghost::UniqueFd s(::accept4(l->get(), nullptr, nullptr, SOCK_CLOEXEC));
    return {migd::plain_channel(std::move(c)), migd::plain_channel(std::move(s))};
}

Pair tls_pair(migd::TlsContext& client, migd::TlsContext& server, migd::KtlsState& st) {
    auto l = migd::tcp_listen("127.0.0.1", 0);
    if (!l)
        die(l.error().what());
    auto accepted = std::async(std::launch::async, [&] {
        ghost::UniqueFd s(::accept4(l->get(), nullptr, nullptr, SOCK_CLOEXEC));
        return server.accept(std::move(s), 10s);
    });
    auto c = client.connect("127.0.0.1", port_of(l->get()), "h1", 10s);
    auto s = accepted.get();
    if (!c || !s)
        die("TLS: " + (c ? s.error().what() : c.error().what()));
    st = migd::ktls_state(**c);
    const auto rs = migd::ktls_state(**s);
    st.receive = rs.receive;
    return {std::move(*c), std::move(*s)};
}

struct Mode {
    std::string name;
    std::function<Pair()> make;
    double best_secs = 1e9, best_cpu = 1e9; // the best run's wall and CPU seconds
};

double cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
    return s(u.ru_utime) + s(u.ru_stime);
}

// The modes take turns, so that a busy moment of the machine does not fall
// on one of them only; the best run of each is kept.
void measure(const Options& o, std::vector<Mode>& modes) {
    for (int i = 0; i < o.repeat; ++i)
        for (auto& m : modes) {
            auto [tx, rx] = m.make();
            const double c0 = cpu_seconds();
            const double secs = run(std::move(tx), std::move(rx), o);
            if (secs < m.best_secs) {
                m.best_secs = secs;
                m.best_cpu = cpu_seconds() - c0;
            }
        }
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    std::string ghost_ca = GHOST_CA_PATH;
    CLI::App app{"migd transport throughput: raw TCP against migd's TLS channel over loopback"};
    app.add_option("--mib", o.mib, "MiB sent per run (default 1024)");
    app.add_option("--chunk", o.chunk_kib, "KiB per write and read call (default 1024)");
    app.add_option("--repeat", o.repeat, "runs of each, the best is kept (default 3)");
    app.add_option("--ghost-ca", ghost_ca, "the ghost-ca script");
    std::string certs;
    app.add_option("--certs", certs,
                   "use ca.pem, h1.{pem,key}, h2.{pem,key} of DIR (made by ghost-ca) instead of "
                   "making them (where openssl is missing, e.g. in the test VM)")
        ->type_name("DIR");
    CLI11_PARSE(app, argc, argv);

    const auto dir = certs.empty() ? std::filesystem::temp_directory_path() /
                                         fmt::format("ghost-transport-bench-{}", ::getpid())
                                   : std::filesystem::path(certs);
    const std::string d = dir.string();
    const std::string mk = fmt::format("'{0}' init '{1}' >/dev/null && '{0}' add-host '{1}' h1 "
                                       ">/dev/null && '{0}' add-host '{1}' h2 >/dev/null",
                                       ghost_ca, d);
    if (certs.empty() && std::system(mk.c_str()) != 0)
        die("ghost-ca could not make the certificates in " + d);
    auto files = [&](const char* h) {
        return migd::TlsFiles{d + "/ca.pem", fmt::format("{}/{}.pem", d, h),
                              fmt::format("{}/{}.key", d, h)};
    };
    auto h1 = migd::TlsContext::load(files("h1"));
    auto h2 = migd::TlsContext::load(files("h2"));
    if (certs.empty())
        std::filesystem::remove_all(dir);
    if (!h1 || !h2)
        die((h1 ? h2 : h1).error().what());

    fmt::print("migd transport, loopback, {} MiB per run, {} KiB writes, best of {}\n", o.mib,
               o.chunk_kib, o.repeat);
    fmt::print("kernel TLS: OpenSSL built with it: {}; kernel tls ULP loaded: {}\n",
               migd::openssl_has_ktls() ? "yes" : "no", migd::kernel_has_tls_ulp() ? "yes" : "no");
    migd::KtlsState st;
    std::vector<Mode> modes;
    modes.push_back({"raw TCP", raw_pair});
    modes.push_back({"TLS 1.3 (migd)", [&] { return tls_pair(**h2, **h1, st); }});
    measure(o, modes);
    migd::set_ktls(**h1, true);
    migd::set_ktls(**h2, true);
    std::vector<Mode> ktls{
        {"TLS 1.3 + SSL_OP_ENABLE_KTLS", [&] { return tls_pair(**h2, **h1, st); }}};
    measure(o, ktls);
    modes.push_back(ktls.front());

    const double bytes = static_cast<double>(o.mib << 20);
    const double raw = bytes / 1e6 / modes[0].best_secs;
    fmt::print("{:<30} {:>9} {:>8} {:>12}\n", "transport", "MB/s", "vs raw", "CPU s/GB");
    for (const auto& m : modes) {
        const double mbs = bytes / 1e6 / m.best_secs;
        fmt::print("{:<30} {:>9.0f} {:>8.2f} {:>12.2f}\n", m.name, mbs, mbs / raw,
                   m.best_cpu / (bytes / 1e9));
    }
    fmt::print("kernel TLS in use with SSL_OP_ENABLE_KTLS: send {}, receive {}\n",
               st.send ? "yes" : "no", st.receive ? "yes" : "no");
    return 0;
}
