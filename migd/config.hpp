// SPDX-License-Identifier: GPL-2.0
// migd's configuration: migd.toml (toml++), documented in migd(8) and
// Documentation/migd-protocol.md. Every field has a default but the TLS
// files, which have none: a migd without certificates serves only its local
// socket and refuses every peer operation with a reason.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ghost/result.hpp"

namespace migd {

inline constexpr std::uint16_t default_port = 7470;

struct PeerConfig {
    std::string name;    // host name, as in its certificate (CN and DNS SAN)
    std::string address; // IPv4/IPv6 address or resolvable name
    std::uint16_t port = default_port;
};

struct Config {
    // [host]
    std::string host;                  // this host's name; default: gethostname()
    std::string listen = "0.0.0.0";    // peer listener address
    std::uint16_t port = default_port; // peer listener port
    // [paths]
    std::string socket = "/run/ghost/migd.sock";   // local control socket
    std::string state_dir = "/var/lib/ghost/migd"; // journal, location table
    std::string restore_stub;                      // "" : libghost's default
    // [engine]
    std::string engine = "auto"; // auto | kernel | user
    std::string device = "/dev/ghost";
    // [tls]: PEM files; relative paths are relative to the config file
    std::string tls_ca, tls_cert, tls_key;
    // Image streams outside TLS with peers that say so too (a trusted
    // network: Documentation/migd-protocol.md, "Image streams in the clear")
    bool clear_images = false;
    // [[peer]]: the static peer list (the embedded default membership)
    std::vector<PeerConfig> peers;
    // [checkpoint_server]
    std::string server_dir = "/var/lib/ghost/images"; // "" : not a checkpoint server
    std::uint64_t server_max_bytes = 0;               // store quota, 0: the disk's
    // [limits]
    bool allow_root = false;           // accept root-owned processes from peers
    std::uint64_t max_image_bytes = 0; // refuse larger incoming images, 0: none
    unsigned max_transfers = 4;        // concurrent incoming + outgoing streams
    unsigned io_timeout_ms = 10000;    // a peer silent this long is gone
    // TLS handshakes under way from addresses that are not a [[peer]]'s:
    // together, and from one source (an IPv4 address, an IPv6 /64)
    unsigned max_handshakes = 32;
    unsigned max_handshakes_per_address = 4;
    unsigned max_clients = 256;         // local control connections at once
    unsigned max_clients_per_user = 16; // of those, one uid's (root: no own limit)
    // A process that ended here leaves the location table this long after
    // migd saw it gone (seconds; 0: never): until then `where` says it
    // exited, and `ps --cluster` lists it.
    std::uint64_t forget_exited_s = 86400;
    // [migration]: pre-copy (Documentation/migd-protocol.md, "Pre-copy")
    std::uint64_t precopy_min_bytes = 64ULL << 20; // pre-copy by default from this size
    unsigned precopy_max_rounds = 8;               // images before the last, at most
    std::uint64_t precopy_stop_bytes = 1ULL << 20; // a round this small ends the pre-copy
    std::string source; // where this config came from (file path or "defaults")

    const PeerConfig* peer(std::string_view name) const {
        for (const auto& p : peers)
            if (p.name == name)
                return &p;
        return nullptr;
    }
};

// Parses migd.toml text; origin names the file in errors ("FILE:LINE: ...").
// Unknown keys and tables are errors, so a typo never goes unnoticed.
ghost::Result<Config> parse_config(std::string_view text, std::string_view origin);

// Reads and parses path.
ghost::Result<Config> load_config(const std::string& path);

} // namespace migd
