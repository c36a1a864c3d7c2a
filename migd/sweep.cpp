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
#include <set>

#include <spdlog/spdlog.h>

#include "ops.hpp"

namespace migd {

namespace {

// Gids asked about in one sweep, in all: bounds a sweep's messages and the
// time a table's lock is held to pick them.
constexpr std::size_t kAskedPerSweep = 4096;

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
    for (const auto& [host, asked] : locations_.moved_to_ask(keep_ms, kAskedPerSweep)) {
        json gids = json::array();
        for (const auto& a : asked)
            gids.push_back(a.gid);
        auto r = ask(host, {{"op", "known"}, {"gids", gids}});
        if (!r || !r->value("ok", false))
            continue;
        const auto unknown = r->value("unknown", std::vector<std::string>{});
        std::vector<Locations::Asked> forget;
        for (const auto& a : asked)
            if (std::find(unknown.begin(), unknown.end(), a.gid) != unknown.end())
                forget.push_back(a);
        for (const auto& gid : locations_.forget_moved(host, forget))
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
