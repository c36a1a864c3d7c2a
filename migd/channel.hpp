// SPDX-License-Identifier: GPL-2.0
// A byte stream to a peer migd: mutual TLS 1.3 over TCP (tls.cpp), or a plain
// descriptor where a test drives the protocol without certificates.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ghost/fd.hpp"
#include "ghost/result.hpp"

namespace migd {

class Channel {
  public:
    virtual ~Channel() = default;
    // Up to buf.size() bytes; 0 at the peer's orderly end. A timeout (no byte
    // for the channel's timeout) is an error with ETIMEDOUT.
    virtual ghost::Result<std::size_t> read(std::span<std::byte> buf) = 0;
    // All of data, or an error (EPIPE/ECONNRESET/ETIMEDOUT and what TLS said).
    virtual ghost::Result<void> write(std::span<const std::byte> data) = 0;
    // Orderly end of what this side sends (TLS close_notify, then SHUT_WR).
    virtual ghost::Result<void> finish() = 0;
    // The peer's verified host name (its certificate's CN), "" when the
    // channel is not authenticated (tests only).
    virtual const std::string& peer() const = 0;
    virtual int fd() const = 0;
    virtual void set_timeout(std::chrono::milliseconds t) = 0;
    virtual std::chrono::milliseconds timeout() const = 0;

    // Image streams in the clear, for a trusted network ([tls] clear_images
    // on both hosts, agreed per request inside TLS; migd-protocol.md, "Image
    // streams in the clear"). While clear() holds, an image's DATA, END and
    // ABORT frames (wire.hpp's stream functions) go on the TCP connection
    // itself, outside TLS; every JSON message stays in TLS records.
    //
    // The side that will receive a clear stream calls receive_clear() before
    // it sends the message that asks for or agrees to one: TLS then reads
    // its records one at a time and never reads ahead into clear bytes that
    // follow one. Whether this channel can carry clear streams at all:
    virtual bool clear_capable() const { return false; }
    virtual void receive_clear() {}
    // The image streams that follow go clear (true) or inside TLS (false).
    void set_clear(bool on) { clear_ = on && clear_capable(); }
    bool clear() const { return clear_; }

    // The stream plane: what wire.hpp's image frames are read from and
    // written to. Inside TLS, read() and write(); clear, the connection.
    virtual ghost::Result<std::size_t> stream_read(std::span<std::byte> buf) { return read(buf); }
    virtual ghost::Result<void> stream_write(std::span<const std::byte> data) {
        return write(data);
    }
    // The connection's descriptor when stream frames may be moved on it
    // with splice(2) and sendfile(2) (no byte through user space), else -1.
    // Blocking; the caller waits with poll(2) for at most timeout().
    virtual int stream_fd() const { return -1; }

  private:
    bool clear_ = false;
};

// A channel over a connected descriptor without TLS: for tests of the
// protocol, and for a host talking to itself (never to a peer). peer is the
// name peer() reports.
std::unique_ptr<Channel> plain_channel(ghost::UniqueFd fd, std::string peer = "");

struct TlsFiles {
    std::string ca, cert, key; // PEM
};

// The TLS side of migd: one context for both directions. TLS 1.3 only; both
// sides present a certificate signed by the cluster CA.
class TlsContext {
  public:
    // Loads and checks the files (the key matches the certificate, the
    // certificate is signed by the CA); errors name the file and the cause.
    static ghost::Result<std::shared_ptr<TlsContext>> load(const TlsFiles& files);
    virtual ~TlsContext() = default;

    // The name in this host's own certificate (CN).
    virtual const std::string& own_name() const = 0;

    // Connects to address:port and completes the handshake; the server's
    // certificate must name expected_peer. Errors say which step failed and
    // why (refused, timed out, certificate not from the cluster CA, wrong
    // name, ...).
    virtual ghost::Result<std::unique_ptr<Channel>> connect(std::string_view address,
                                                            std::uint16_t port,
                                                            std::string_view expected_peer,
                                                            std::chrono::milliseconds timeout) = 0;

    // Server side of the handshake on an accepted TCP connection. A client
    // without a certificate of the cluster CA is refused, and the error says
    // why (e.g. "certificate verify failed: unable to get local issuer
    // certificate", "peer sent no certificate").
    virtual ghost::Result<std::unique_ptr<Channel>> accept(ghost::UniqueFd tcp,
                                                           std::chrono::milliseconds timeout) = 0;
};

// A listening TCP socket (SO_REUSEADDR, CLOEXEC) on address:port.
ghost::Result<ghost::UniqueFd> tcp_listen(std::string_view address, std::uint16_t port);

} // namespace migd
