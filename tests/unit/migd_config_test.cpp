// SPDX-License-Identifier: GPL-2.0
// migd.toml: every key read, defaults, and errors that name FILE:LINE and the key.
#include <gtest/gtest.h>

#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>

#include "config.hpp"

namespace {

using migd::parse_config;

std::string error_of(std::string_view text) {
    auto r = parse_config(text, "/etc/ghost/migd.toml");
    EXPECT_FALSE(r) << "accepted:\n" << text;
    return r ? "" : r.error().what();
}

TEST(MigdConfig, EveryKeyIsRead) {
    const auto r = parse_config(R"(
[host]
name = "h1"
listen = "10.0.0.1"
port = 7471
[paths]
socket = "/run/x.sock"
state_dir = "/var/lib/x"
restore_stub = "/usr/lib/ghost/ghost-restore"
[engine]
kind = "user"
device = "/dev/ghost0"
[tls]
ca = "tls/ca.pem"
cert = "/abs/h1.pem"
key = "tls/../tls/h1.key"
clear_images = true
[[peer]]
name = "h2"
address = "10.0.0.2"
[[peer]]
name = "h3.example"
address = "fd00::3"
port = 9000
[checkpoint_server]
dir = "/srv/images"
max_bytes = 1073741824
[limits]
allow_root = true
max_image_bytes = 4096
max_transfers = 8
io_timeout_ms = 2500
max_handshakes = 12
max_handshakes_per_address = 2
max_clients = 40
max_clients_per_user = 5
forget_exited_s = 600
)",
                                "/etc/ghost/migd.toml");
    ASSERT_TRUE(r) << r.error().what();
    const migd::Config& c = *r;
    EXPECT_EQ(c.host, "h1");
    EXPECT_EQ(c.listen, "10.0.0.1");
    EXPECT_EQ(c.port, 7471);
    EXPECT_EQ(c.socket, "/run/x.sock");
    EXPECT_EQ(c.state_dir, "/var/lib/x");
    EXPECT_EQ(c.restore_stub, "/usr/lib/ghost/ghost-restore");
    EXPECT_EQ(c.engine, "user");
    EXPECT_EQ(c.device, "/dev/ghost0");
    // Relative TLS paths are relative to the config file's directory.
    EXPECT_EQ(c.tls_ca, "/etc/ghost/tls/ca.pem");
    EXPECT_EQ(c.tls_cert, "/abs/h1.pem");
    EXPECT_EQ(c.tls_key, "/etc/ghost/tls/h1.key");
    EXPECT_TRUE(c.clear_images);
    ASSERT_EQ(c.peers.size(), 2u);
    EXPECT_EQ(c.peers[0].name, "h2");
    EXPECT_EQ(c.peers[0].address, "10.0.0.2");
    EXPECT_EQ(c.peers[0].port, migd::default_port);
    EXPECT_EQ(c.peers[1].port, 9000);
    ASSERT_NE(c.peer("h3.example"), nullptr);
    EXPECT_EQ(c.peer("h3.example")->address, "fd00::3");
    EXPECT_EQ(c.peer("h9"), nullptr);
    EXPECT_EQ(c.server_dir, "/srv/images");
    EXPECT_EQ(c.server_max_bytes, 1073741824u);
    EXPECT_TRUE(c.allow_root);
    EXPECT_EQ(c.max_image_bytes, 4096u);
    EXPECT_EQ(c.max_transfers, 8u);
    EXPECT_EQ(c.io_timeout_ms, 2500u);
    EXPECT_EQ(c.max_handshakes, 12u);
    EXPECT_EQ(c.max_handshakes_per_address, 2u);
    EXPECT_EQ(c.max_clients, 40u);
    EXPECT_EQ(c.max_clients_per_user, 5u);
    EXPECT_EQ(c.forget_exited_s, 600u);
    EXPECT_EQ(c.source, "/etc/ghost/migd.toml");
}

TEST(MigdConfig, EmptyFileGivesTheDefaultsAndTheHostName) {
    const auto r = parse_config("", "defaults");
    ASSERT_TRUE(r) << r.error().what();
    char name[HOST_NAME_MAX + 1] = {};
    ASSERT_EQ(::gethostname(name, sizeof(name) - 1), 0);
    EXPECT_EQ(r->host, name);
    EXPECT_EQ(r->listen, "0.0.0.0");
    EXPECT_EQ(r->port, migd::default_port);
    EXPECT_EQ(r->socket, "/run/ghost/migd.sock");
    EXPECT_EQ(r->state_dir, "/var/lib/ghost/migd");
    EXPECT_EQ(r->engine, "auto");
    EXPECT_TRUE(r->tls_ca.empty() && r->tls_cert.empty() && r->tls_key.empty());
    EXPECT_TRUE(r->peers.empty());
    EXPECT_FALSE(r->allow_root);
    EXPECT_FALSE(r->clear_images);
    EXPECT_EQ(r->max_transfers, 4u);
    EXPECT_EQ(r->io_timeout_ms, 10000u);
    EXPECT_EQ(r->max_handshakes, 32u);
    EXPECT_EQ(r->max_handshakes_per_address, 4u);
    EXPECT_EQ(r->max_clients, 256u);
    EXPECT_EQ(r->max_clients_per_user, 16u);
    EXPECT_EQ(r->forget_exited_s, 86400u);
}

TEST(MigdConfig, UnknownKeysAndTablesNameFileLineAndKey) {
    EXPECT_EQ(error_of("[host]\nname = \"h1\"\nprot = 7470\n"),
              "/etc/ghost/migd.toml:3: [host] prot: unknown key");
    EXPECT_EQ(error_of("\n[hots]\nname = \"h1\"\n"), "/etc/ghost/migd.toml:2: hots: unknown table");
    EXPECT_EQ(error_of("verbose = true\n"), "/etc/ghost/migd.toml:1: verbose: unknown key");
    EXPECT_EQ(error_of("[[peer]]\nname = \"h2\"\naddress = \"a\"\nkey = \"x\"\n"),
              "/etc/ghost/migd.toml:4: [[peer]] key: unknown key");
}

TEST(MigdConfig, WrongTypesNameTheKeyAndBothTypes) {
    EXPECT_EQ(error_of("[host]\nport = \"7470\"\n"),
              "/etc/ghost/migd.toml:2: [host] port: expected an integer, got a string");
    EXPECT_EQ(error_of("[limits]\n\nallow_root = 1\n"),
              "/etc/ghost/migd.toml:3: [limits] allow_root: expected true or false, got an "
              "integer");
    EXPECT_EQ(error_of("[tls]\nca = [\"a\"]\n"),
              "/etc/ghost/migd.toml:2: [tls] ca: expected a string, got an array");
    EXPECT_EQ(error_of("host = 3\n"), "/etc/ghost/migd.toml:1: [host]: expected a table, got an "
                                      "integer");
    EXPECT_NE(error_of("[peer]\nname = \"h2\"\n").find("[[peer]]: expected an array of tables"),
              std::string::npos);
}

TEST(MigdConfig, ValuesAreChecked) {
    EXPECT_EQ(error_of("[host]\nport = 70000\n"),
              "/etc/ghost/migd.toml:2: [host] port: 70000 is out of range 1..65535");
    EXPECT_EQ(error_of("[[peer]]\nname = \"h2\"\naddress = \"a\"\nport = 0\n"),
              "/etc/ghost/migd.toml:4: [[peer]] port: 0 is out of range 1..65535");
    EXPECT_EQ(error_of("[engine]\nkind = \"kmod\"\n"),
              "/etc/ghost/migd.toml:2: [engine] kind: \"kmod\" is not one of auto, kernel, user");
    EXPECT_EQ(error_of("[limits]\nmax_transfers = 0\n"),
              "/etc/ghost/migd.toml:2: [limits] max_transfers: 0 is out of range 1..1024");
    EXPECT_EQ(error_of("[checkpoint_server]\nmax_bytes = -1\n"),
              "/etc/ghost/migd.toml:2: [checkpoint_server] max_bytes: -1 is out of range "
              "0..9223372036854775807");
    EXPECT_EQ(error_of("[host]\nname = \"\"\n"),
              "/etc/ghost/migd.toml:2: [host] name: must not be empty");
    EXPECT_NE(error_of("[tls]\nca = \"ca.pem\"\ncert = \"h1.pem\"\n")
                  .find("/etc/ghost/migd.toml:1: [tls]: ca, cert and key go together"),
              std::string::npos);
}

TEST(MigdConfig, HostAndPeerNamesFollowGhostCaRules) {
    const char* peers = "[host]\nname = \"h1\"\n[[peer]]\nname = \"h2\"\naddress = \"a\"\n";
    EXPECT_TRUE(parse_config(peers, "f"));
    EXPECT_EQ(error_of(std::string(peers) + "[[peer]]\nname = \"h2\"\naddress = \"b\"\n"),
              "/etc/ghost/migd.toml:6: [[peer]] name \"h2\" is listed twice");
    EXPECT_EQ(error_of(std::string(peers) + "[[peer]]\nname = \"h1\"\naddress = \"b\"\n"),
              "/etc/ghost/migd.toml:6: [[peer]] name \"h1\" is this host's own name");
    EXPECT_NE(error_of("[[peer]]\nname = \"h_2\"\naddress = \"a\"\n")
                  .find("/etc/ghost/migd.toml:1: [[peer]] name \"h_2\": letters, digits"),
              std::string::npos);
    EXPECT_NE(error_of("[host]\nname = \"-h1\"\n").find("[host] name \"-h1\": letters, digits"),
              std::string::npos);
    EXPECT_EQ(error_of("[[peer]]\nname = \"h2\"\n"),
              "/etc/ghost/migd.toml:1: [[peer]]: name and address are required");
}

TEST(MigdConfig, SyntaxErrorsNameTheLine) {
    const std::string e = error_of("[host]\nname = \"h1\"\nport = \n");
    EXPECT_EQ(e.rfind("/etc/ghost/migd.toml:3: ", 0), 0u) << e;
}

TEST(MigdConfig, LoadReadsTheFileAndResolvesAgainstItsDirectory) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("migd-config-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto file = (dir / "migd.toml").string();
    std::ofstream(file) << "[host]\nname = \"h1\"\n[tls]\nca = \"ca.pem\"\ncert = \"h1.pem\"\n"
                           "key = \"h1.key\"\n";
    const auto r = migd::load_config(file);
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_EQ(r->tls_ca, (dir / "ca.pem").string());
    EXPECT_EQ(r->source, file);
    // A relative config path still gives absolute TLS paths.
    const auto cwd = std::filesystem::current_path();
    std::filesystem::current_path(dir.parent_path());
    const auto rel = migd::load_config((dir.filename() / "migd.toml").string());
    std::filesystem::current_path(cwd);
    ASSERT_TRUE(rel) << rel.error().what();
    EXPECT_EQ(rel->tls_key, (dir / "h1.key").string());
    const auto missing = migd::load_config((dir / "nope.toml").string());
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().what(),
              "cannot read " + (dir / "nope.toml").string() + ": No such file or directory");
    std::filesystem::remove_all(dir);
}

TEST(MigdConfig, MigrationTableSetsThePrecopyRule) {
    const auto d = parse_config("", "/etc/ghost/migd.toml");
    ASSERT_TRUE(d) << d.error().what();
    EXPECT_EQ(d->precopy_min_bytes, 64ULL << 20);
    EXPECT_EQ(d->precopy_max_rounds, 8u);
    EXPECT_EQ(d->precopy_stop_bytes, 1ULL << 20);
    const auto r = parse_config("[migration]\nprecopy_min_bytes = 0\nprecopy_max_rounds = 3\n"
                                "precopy_stop_bytes = 4096\n",
                                "/etc/ghost/migd.toml");
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_EQ(r->precopy_min_bytes, 0u);
    EXPECT_EQ(r->precopy_max_rounds, 3u);
    EXPECT_EQ(r->precopy_stop_bytes, 4096u);
    const std::string e = error_of("[migration]\nprecopy_max_rounds = 0\n");
    EXPECT_NE(e.find("/etc/ghost/migd.toml:2"), std::string::npos) << e;
    EXPECT_NE(e.find("precopy_max_rounds"), std::string::npos) << e;
    EXPECT_NE(error_of("[migration]\nrounds = 3\n").find("rounds"), std::string::npos);
}

} // namespace
