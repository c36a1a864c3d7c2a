// SPDX-License-Identifier: GPL-2.0
// migd.toml: every table and key is known here; anything else is an error
// naming the file, the line and the key, so a typo never goes unnoticed.
#include "config.hpp"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace migd {

namespace {

using ghost::Error;

Error config_error(std::string message) {
    return Error::from_errno(EINVAL, std::move(message));
}

// The rule ghost-ca applies to the names it puts into certificates.
bool valid_host_name(const std::string& s) {
    static const std::regex rule("^[A-Za-z0-9][A-Za-z0-9.-]*$");
    return std::regex_match(s, rule);
}

std::string node_type(const toml::node& n) {
    switch (n.type()) {
    case toml::node_type::table:
        return "a table";
    case toml::node_type::array:
        return "an array";
    case toml::node_type::string:
        return "a string";
    case toml::node_type::integer:
        return "an integer";
    case toml::node_type::floating_point:
        return "a number";
    case toml::node_type::boolean:
        return "a boolean";
    default:
        return "a date or time";
    }
}

// Reads one table against its list of keys; the first problem wins.
class Reader {
  public:
    Reader(std::string origin, const toml::table& tbl, std::string where)
        : origin_(std::move(origin)), tbl_(tbl), where_(std::move(where)) {}

    std::string at(const toml::node& n) const {
        return fmt::format("{}:{}", origin_, n.source().begin.line);
    }
    std::string key(std::string_view k) const { return fmt::format("{} {}", where_, k); }

    void fail(const toml::node& n, std::string_view k, std::string what) {
        if (!error_)
            error_ = fmt::format("{}: {}: {}", at(n), key(k), what);
    }

    void string(std::string_view k, std::string& out, bool allow_empty = true) {
        seen_.insert(std::string(k));
        const toml::node* n = tbl_.get(k);
        if (!n)
            return;
        if (!n->is_string())
            return fail(*n, k, fmt::format("expected a string, got {}", node_type(*n)));
        out = **n->as_string();
        if (!allow_empty && out.empty())
            fail(*n, k, "must not be empty");
    }

    void integer(std::string_view k, std::int64_t lo, std::int64_t hi,
                 const std::function<void(std::int64_t)>& set) {
        seen_.insert(std::string(k));
        const toml::node* n = tbl_.get(k);
        if (!n)
            return;
        if (!n->is_integer())
            return fail(*n, k, fmt::format("expected an integer, got {}", node_type(*n)));
        const std::int64_t v = **n->as_integer();
        if (v < lo || v > hi)
            return fail(*n, k, fmt::format("{} is out of range {}..{}", v, lo, hi));
        set(v);
    }

    void boolean(std::string_view k, bool& out) {
        seen_.insert(std::string(k));
        const toml::node* n = tbl_.get(k);
        if (!n)
            return;
        if (!n->is_boolean())
            return fail(*n, k, fmt::format("expected true or false, got {}", node_type(*n)));
        out = **n->as_boolean();
    }

    // Call last: every key not read above is unknown.
    void no_others() {
        for (const auto& [k, v] : tbl_)
            if (!seen_.count(std::string(k.str())))
                fail(v, k.str(), "unknown key");
    }

    const std::optional<std::string>& error() const { return error_; }

  private:
    std::string origin_;
    const toml::table& tbl_;
    std::string where_;
    std::set<std::string> seen_;
    std::optional<std::string> error_;
};

std::string resolve(const std::string& path, const std::string& base) {
    if (path.empty() || base.empty() || path.front() == '/')
        return path;
    return (std::filesystem::path(base) / path).lexically_normal().string();
}

std::string own_host_name() {
    char buf[HOST_NAME_MAX + 1] = {};
    if (::gethostname(buf, sizeof(buf) - 1) != 0)
        return "localhost";
    return buf;
}

} // namespace

ghost::Result<Config> parse_config(std::string_view text, std::string_view origin_view) {
    const std::string origin(origin_view);
    toml::table root;
    try {
        root = toml::parse(text, origin_view);
    } catch (const toml::parse_error& e) {
        return config_error(
            fmt::format("{}:{}: {}", origin, e.source().begin.line, e.description()));
    }

    Config cfg;
    cfg.source = origin;
    std::optional<std::string> err;
    auto keep = [&](const std::optional<std::string>& e) {
        if (e && !err)
            err = e;
    };
    auto table = [&](std::string_view name) -> const toml::table* {
        const toml::node* n = root.get(name);
        if (!n)
            return nullptr;
        if (!n->is_table()) {
            keep(fmt::format("{}:{}: [{}]: expected a table, got {}", origin,
                             n->source().begin.line, name, node_type(*n)));
            return nullptr;
        }
        return n->as_table();
    };
    auto u16 = [](std::uint16_t& out) {
        return [&out](std::int64_t v) { out = static_cast<std::uint16_t>(v); };
    };
    auto u64 = [](std::uint64_t& out) {
        return [&out](std::int64_t v) { out = static_cast<std::uint64_t>(v); };
    };
    auto uint = [](unsigned& out) {
        return [&out](std::int64_t v) { out = static_cast<unsigned>(v); };
    };
    std::map<std::string, int> lines; // key -> line, for the checks of values below
    auto line_of = [&](const toml::table& t, std::string_view k) {
        const toml::node* n = t.get(k);
        return n ? static_cast<int>(n->source().begin.line) : 0;
    };

    if (const auto* t = table("host")) {
        Reader r(origin, *t, "[host]");
        r.string("name", cfg.host, false);
        r.string("listen", cfg.listen, false);
        r.integer("port", 1, 65535, u16(cfg.port));
        r.no_others();
        keep(r.error());
        lines["host"] = line_of(*t, "name");
    }
    if (const auto* t = table("paths")) {
        Reader r(origin, *t, "[paths]");
        r.string("socket", cfg.socket, false);
        r.string("state_dir", cfg.state_dir, false);
        r.string("restore_stub", cfg.restore_stub);
        r.no_others();
        keep(r.error());
    }
    if (const auto* t = table("engine")) {
        Reader r(origin, *t, "[engine]");
        r.string("kind", cfg.engine);
        r.string("device", cfg.device, false);
        r.no_others();
        keep(r.error());
        if (!err && cfg.engine != "auto" && cfg.engine != "kernel" && cfg.engine != "user")
            keep(fmt::format("{}:{}: [engine] kind: \"{}\" is not one of auto, kernel, user",
                             origin, line_of(*t, "kind"), cfg.engine));
    }
    const std::string base = std::filesystem::path(origin).parent_path().string();
    if (const auto* t = table("tls")) {
        Reader r(origin, *t, "[tls]");
        r.string("ca", cfg.tls_ca, false);
        r.string("cert", cfg.tls_cert, false);
        r.string("key", cfg.tls_key, false);
        r.boolean("clear_images", cfg.clear_images);
        r.no_others();
        keep(r.error());
        const int given = !cfg.tls_ca.empty() + !cfg.tls_cert.empty() + !cfg.tls_key.empty();
        if (!err && given != 0 && given != 3)
            keep(fmt::format("{}:{}: [tls]: ca, cert and key go together (all three or none)",
                             origin, t->source().begin.line));
        cfg.tls_ca = resolve(cfg.tls_ca, base);
        cfg.tls_cert = resolve(cfg.tls_cert, base);
        cfg.tls_key = resolve(cfg.tls_key, base);
    }
    if (const toml::node* n = root.get("peer")) {
        const toml::array* arr = n->as_array();
        if (!arr || !arr->is_array_of_tables()) {
            keep(fmt::format("{}:{}: [[peer]]: expected an array of tables ([[peer]] sections)",
                             origin, n->source().begin.line));
        } else {
            for (const toml::node& e : *arr) {
                const toml::table& t = *e.as_table();
                PeerConfig p;
                Reader r(origin, t, "[[peer]]");
                r.string("name", p.name, false);
                r.string("address", p.address, false);
                r.integer("port", 1, 65535, u16(p.port));
                r.no_others();
                keep(r.error());
                const auto here = fmt::format("{}:{}: [[peer]]", origin, t.source().begin.line);
                if (err)
                    break;
                if (p.name.empty() || p.address.empty())
                    keep(fmt::format("{}: name and address are required", here));
                else if (!valid_host_name(p.name))
                    keep(fmt::format("{} name \"{}\": letters, digits, '.' and '-' only, "
                                     "starting with a letter or digit",
                                     here, p.name));
                else if (cfg.peer(p.name))
                    keep(fmt::format("{} name \"{}\" is listed twice", here, p.name));
                cfg.peers.push_back(std::move(p));
                lines["peer:" + cfg.peers.back().name] = static_cast<int>(t.source().begin.line);
            }
        }
    }
    if (const auto* t = table("checkpoint_server")) {
        Reader r(origin, *t, "[checkpoint_server]");
        r.string("dir", cfg.server_dir);
        r.integer("max_bytes", 0, INT64_MAX, u64(cfg.server_max_bytes));
        r.no_others();
        keep(r.error());
    }
    if (const auto* t = table("limits")) {
        Reader r(origin, *t, "[limits]");
        r.boolean("allow_root", cfg.allow_root);
        r.integer("max_image_bytes", 0, INT64_MAX, u64(cfg.max_image_bytes));
        r.integer("max_transfers", 1, 1024, uint(cfg.max_transfers));
        r.integer("io_timeout_ms", 100, 3600 * 1000, uint(cfg.io_timeout_ms));
        r.integer("max_handshakes", 1, 65536, uint(cfg.max_handshakes));
        r.integer("max_handshakes_per_address", 1, 65536, uint(cfg.max_handshakes_per_address));
        r.integer("max_clients", 1, 65536, uint(cfg.max_clients));
        r.integer("max_clients_per_user", 1, 65536, uint(cfg.max_clients_per_user));
        r.integer("forget_exited_s", 0, 100LL * 365 * 86400, u64(cfg.forget_exited_s));
        r.no_others();
        keep(r.error());
    }
    if (const auto* t = table("migration")) {
        Reader r(origin, *t, "[migration]");
        r.integer("precopy_min_bytes", 0, INT64_MAX, u64(cfg.precopy_min_bytes));
        r.integer("precopy_max_rounds", 1, 64, uint(cfg.precopy_max_rounds));
        r.integer("precopy_stop_bytes", 0, INT64_MAX, u64(cfg.precopy_stop_bytes));
        r.no_others();
        keep(r.error());
    }
    for (const auto& [k, v] : root) {
        static const std::set<std::string_view> known{
            "host", "paths", "engine", "tls", "peer", "checkpoint_server", "limits", "migration"};
        if (!known.count(k.str()))
            keep(fmt::format("{}:{}: {}: unknown {}", origin, v.source().begin.line, k.str(),
                             v.is_table() ? "table" : "key"));
    }
    if (err)
        return config_error(*err);

    if (cfg.host.empty())
        cfg.host = own_host_name();
    if (!valid_host_name(cfg.host))
        return config_error(fmt::format("{}:{}: [host] name \"{}\": letters, digits, '.' and '-' "
                                        "only, starting with a letter or digit",
                                        origin, lines["host"], cfg.host));
    if (cfg.peer(cfg.host))
        return config_error(fmt::format("{}:{}: [[peer]] name \"{}\" is this host's own name",
                                        origin, lines["peer:" + cfg.host], cfg.host));
    return cfg;
}

ghost::Result<Config> load_config(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
        const int e = errno ? errno : ENOENT;
        return Error::from_errno(e, fmt::format("cannot read {}: {}", path, std::strerror(e)));
    }
    std::stringstream ss;
    ss << in.rdbuf();
    auto cfg = parse_config(ss.str(), path);
    // Relative to the file's directory already; absolute, so that they do
    // not depend on the daemon's working directory.
    if (cfg)
        for (std::string* p : {&cfg->tls_ca, &cfg->tls_cert, &cfg->tls_key})
            if (!p->empty())
                *p = std::filesystem::absolute(*p).lexically_normal().string();
    return cfg;
}

} // namespace migd
