// SPDX-License-Identifier: GPL-2.0
// What the location table forgets, and when. A process that ended where it
// ran is forgotten there forget_exited_s after migd saw it gone; each host
// that still forwards to it (a "moved" entry) learns that by asking the host
// its entry points at ("known"), and forgets its own entry in turn. So a
// chain of forwarding entries is taken down from its end, one host per
// sweep, and a table holds what still leads somewhere rather than every gid
// that ever passed through.
#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "ops.hpp"

namespace migd {

namespace {

// Gids asked about in one sweep, in all: bounds a sweep's messages and the
// time a table's lock is held to pick them.
constexpr std::size_t kAskedPerSweep = 4096;

// The gids the peers' tables have (any state), or nothing if a peer did
// not answer: then no forwarding entry is forgotten this time.
std::optional<std::set<std::string>> listed_by_peers(Daemon& d) {
    std::set<std::string> listed;
    for (const auto& p : d.config().peers) {
        auto r = d.ask(p.name, {{"op", "list"}});
        if (!r || !said_yes(*r) || !(*r)["processes"].is_array())
            return std::nullopt;
        for (const auto& e : (*r)["processes"])
            if (e.is_object() && e.contains("gid") && e["gid"].is_string())
                listed.insert(e["gid"].get<std::string>());
    }
    return listed;
}

} // namespace

// {"op":"known","gids":[...]}: which of them this host has no entry for,
// neither in its table nor in its journal (a migration in flight).
void Ops::peer_known(Daemon& d, Channel& ch, const json& req) {
    std::set<std::string> in_flight;
    for (const auto& e : d.journal_.all())
        in_flight.insert(e.value("gid", ""));
    json unknown = json::array();
    for (const auto& g : req.value("gids", json::array())) {
        const std::string gid = g.is_string() ? g.get<std::string>() : std::string();
        if (!gid.empty() && !d.locations_.get(gid) && !in_flight.contains(gid))
            unknown.push_back(gid);
    }
    (void)send_json(ch, {{"ok", true}, {"unknown", unknown}});
}

void Daemon::sweep() {
    const std::uint64_t keep_ms = cfg_.forget_exited_s * 1000;
    const auto gone = [](const Location& l) { return !proc_alive(l.pid, l.starttime); };
    for (const auto& gid : locations_.forget_exited(keep_ms, gone))
        spdlog::info("{}: ended here over {} s ago; forgotten", gid, cfg_.forget_exited_s);

    // Entries that forwarded to the same host, unchanged for as long: a
    // host that forgot the process does not know it any more. One that is
    // down or refuses ("unknown peer op" from an older migd) keeps them.
    std::map<std::string, std::vector<Locations::Asked>> unknown;
    for (const auto& [host, asked] : locations_.moved_to_ask(keep_ms, kAskedPerSweep)) {
        if (stopping())
            return;
        json gids = json::array();
        for (const auto& a : asked)
            gids.push_back(a.gid);
        auto r = ask(host, {{"op", "known"}, {"gids", gids}});
        if (!r || !said_yes(*r) || !(*r)["unknown"].is_array())
            continue;
        std::set<std::string> said;
        for (const auto& g : (*r)["unknown"])
            if (g.is_string())
                said.insert(g.get<std::string>());
        for (const auto& a : asked)
            if (said.contains(a.gid))
                unknown[host].push_back(a);
    }
    if (unknown.empty() || stopping())
        return;
    // A host whose table was lost does not know a process that runs on
    // past it: the entry is kept while any peer still has the gid.
    const auto listed = listed_by_peers(*this);
    if (!listed)
        return;
    for (auto& [host, asked] : unknown) {
        std::erase_if(asked, [&](const Locations::Asked& a) { return listed->contains(a.gid); });
        for (const auto& gid : locations_.forget_moved(host, asked))
            spdlog::info("{}: {} no longer knows it (it ended and was forgotten there); "
                         "forgotten here",
                         gid, host);
    }
}

// Ended processes are looked for at most every minute, and at least twice
// within forget_exited_s (once to see them gone, once to forget). On a
// thread of its own: asking a peer that is down must not hold up the
// resolver's migrations.
std::chrono::milliseconds Daemon::sweep_period() const {
    if (cfg_.forget_exited_s == 0)
        return std::chrono::milliseconds(0);
    return std::chrono::milliseconds(
        std::clamp<std::uint64_t>(cfg_.forget_exited_s * 500, 1000, 60000));
}

} // namespace migd
