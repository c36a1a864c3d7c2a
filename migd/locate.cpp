// SPDX-License-Identifier: GPL-2.0
// The location table (PUB's link table): every host a process passed through
// keeps an entry for its gid, "local" where it runs and "moved" (a forwarding
// entry) where it left. A request for a gid follows the entries host to host;
// the answer updates the asker's entry so that the next request goes straight.
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ops.hpp"

namespace migd {

using ghost::Result;

namespace {

constexpr int max_hops = 16;
constexpr unsigned move_reply_timeout_ms = 30 * 60 * 1000;

std::string run_state(const Location& l) {
    auto p = proc_stat(l.pid);
    if (!p || p->starttime != l.starttime || p->state == 'Z' || p->state == 'X')
        return "exited";
    return p->state == 'T' || p->state == 't' ? "stopped" : "running";
}

// A process that exited says how, when this migd reaped it (it restored it):
// "exit_status" is the wait status, with "exit_code" or "signal" beside.
json local_entry_json(Daemon& d, const Location& l) {
    json r = {{"gid", l.gid},          {"host", l.host}, {"pid", l.pid},
              {"state", run_state(l)}, {"comm", l.comm}, {"uid", l.uid}};
    if (r["state"] != "exited")
        return r;
    if (const auto st = d.exit_status(l.pid)) {
        r["exit_status"] = *st;
        if (WIFEXITED(*st))
            r["exit_code"] = WEXITSTATUS(*st);
        else if (WIFSIGNALED(*st))
            r["signal"] = WTERMSIG(*st);
    }
    return r;
}

// The host that made gid (gids are HOST-N).
std::string origin_of(const std::string& gid) {
    const auto dash = gid.rfind('-');
    return dash == std::string::npos ? std::string() : gid.substr(0, dash);
}

// A move by gid (migrate, or dup --to) of a process that runs here: the same
// operation a local client asks for by pid, with the asker's uid.
bool is_move(const std::string& op) {
    return op == "migrate" || op == "dup";
}

json act_here(Daemon& d, const Location& l, const std::string& op, const json& extra) {
    if (is_move(op)) {
        if (run_state(l) == "exited")
            return error_reply(fmt::format("{} (pid {} on {}) has exited", l.gid, l.pid, l.host));
        const Client who{extra.value("uid", 0u), 0};
        json req = {{"op", op}, {"pid", l.pid}, {"to", extra.value("to", "")}};
        if (extra.contains("precopy"))
            req["precopy"] = extra["precopy"];
        return Ops::local_move(d, req, who, {});
    }
    const std::string rid = op == "kill" ? extra.value("rid", "") : std::string();
    if (!rid.empty())
        if (auto a = d.answers_.done(rid))
            return *a; // the same kill again: its signal went out once
    json r = local_entry_json(d, l);
    r["ok"] = true;
    if (op != "kill")
        return r;
    const uid_t uid = extra.value("uid", 0u);
    if (uid != 0 && uid != l.uid)
        return error_reply(fmt::format("{} (pid {} on {}) belongs to uid {}: a user may signal "
                                       "only their own processes",
                                       l.gid, l.pid, l.host, l.uid));
    if (r["state"] == "exited")
        return error_reply(fmt::format("{} (pid {} on {}) has exited", l.gid, l.pid, l.host));
    const int sig = extra.value("signal", SIGTERM);
    const auto signal = [&] {
        // The process as it is now, held by a pidfd (its pid cannot name
        // another process by the time the signal goes), and the kernel's
        // rule for kill(2) on its ids now: the asker's uid its real or
        // saved one (it may have become another user's since it arrived).
        const ghost::UniqueFd pidfd = pidfd_of(l.pid, l.starttime);
        if (!pidfd)
            return error_reply(fmt::format("{} (pid {} on {}) has exited", l.gid, l.pid, l.host));
        if (uid != 0) {
            const auto now = proc_info(l.pid);
            if (!now || (now->uid != uid && now->suid != uid))
                return error_reply(fmt::format("{} (pid {} on {}) runs as uid {} now: a user may "
                                               "signal only their own processes",
                                               l.gid, l.pid, l.host, now ? now->uid : l.uid));
        }
        if (::syscall(SYS_pidfd_send_signal, pidfd.get(), sig, nullptr, 0) != 0)
            return error_reply(
                fmt::format("cannot signal pid {} on {}: {}", l.pid, l.host, std::strerror(errno)));
        json done = r;
        done["signal"] = sig;
        return done;
    };
    return rid.empty() ? signal() : d.answers_.once(rid, signal);
}

// This host's processes: its local entries, and the copies it holds stopped
// while their migration is unresolved (say which source they wait for).
json local_processes(Daemon& d) {
    json list = json::array();
    for (const auto& l : d.locations_.local())
        list.push_back(local_entry_json(d, l));
    for (const auto& e : d.journal_.all()) {
        if (e.value("role", "") != "dest" || e.value("state", "") != "ready")
            continue;
        list.push_back({{"gid", e.value("gid", "")},
                        {"host", d.config().host},
                        {"pid", e.value("pid", 0)},
                        {"state", "stopped"},
                        {"waiting_for", e.value("peer", "")},
                        {"comm", e.value("comm", "")},
                        {"uid", e.value("uid", 0u)}});
    }
    return list;
}

// The peer whose table has gid as a process running there, asked when the
// host where it was last seen (or was made) does not answer: that host may
// be down while the process lives on elsewhere. "" when no peer has it.
std::string find_elsewhere(Daemon& d, const std::string& gid, const std::string& silent) {
    for (const auto& p : d.config().peers) {
        if (p.name == silent)
            continue;
        auto r = d.ask(p.name, {{"op", "list"}});
        if (!r || !said_yes(*r) || !(*r)["processes"].is_array())
            continue;
        // A peer's list is checked field by field: a malformed one must
        // not pass for the asker's own request being malformed.
        for (const auto& e : (*r)["processes"])
            if (e.is_object() && e.contains("gid") && e["gid"] == gid && !e.contains("waiting_for"))
                return p.name;
    }
    return {};
}

// Where a request for gid goes from here (hops: how many hosts it passed):
// nowhere when gid runs here (entry), else the host its entry points at or
// the host that made it. A host that was sent a request for a gid it does
// not know asks its peers instead. error is set when there is nowhere to go.
struct Hop {
    std::optional<Location> entry;
    std::string next;
    json error;
    bool here() const { return entry && entry->state == "local"; }
};

Hop next_hop(Daemon& d, const std::string& gid, int hops) {
    const Config& cfg = d.config();
    Hop h;
    h.entry = d.locations_.get(gid);
    if (h.here())
        return h;
    h.next = h.entry ? h.entry->host : origin_of(gid);
    if (!h.entry && (hops > 0 || h.next == cfg.host)) {
        // Sent here by a host that took it to be here, or made here, and
        // this host does not know it (it ended here and was forgotten, or
        // this host's table was lost): its origin would only send it back.
        // A peer where it runs says where it is; otherwise no host knows it.
        h.next = find_elsewhere(d, gid, "");
        if (h.next.empty()) {
            h.error = error_reply(
                cfg.forget_exited_s == 0
                    ? fmt::format("no process {} known on {} or its peers", gid, cfg.host)
                    : fmt::format("no process {} known on {} or its peers ({} forgets a process "
                                  "{} s after it ended)",
                                  gid, cfg.host, cfg.host, cfg.forget_exited_s));
            return h;
        }
    }
    if (h.next.empty() || h.next == cfg.host)
        h.error = error_reply(fmt::format("no process {} known on {}", gid, cfg.host));
    else if (hops >= max_hops)
        h.error =
            error_reply(fmt::format("{}: more than {} forwarding hops (a loop?)", gid, max_hops));
    return h;
}

// The answer when a request ends on this host: gid runs here (acted on
// now), or there is nowhere to send it. Nothing when it goes on to h.next.
std::optional<json> ends_here(Daemon& d, const Hop& h, const std::string& op, const json& extra,
                              int hops) {
    if (h.here()) {
        json r = act_here(d, *h.entry, op, extra);
        r["hops"] = hops;
        return r;
    }
    if (!h.error.is_null())
        return h.error;
    return std::nullopt;
}

// The error when h.next did not answer (why) and no other peer has gid.
json unanswered(const std::string& gid, const Hop& h, const ghost::Error& why) {
    return error_reply(fmt::format("{} was last seen on {}, which did not answer ({}), and no "
                                   "other peer has it",
                                   gid, h.next, why.what()));
}

// The request a host sends on for gid: the operation's own fields, one hop
// more.
json onward(const std::string& op, const std::string& gid, const json& extra, int hops) {
    json ask = extra;
    ask["op"] = op;
    ask["gid"] = gid;
    ask["hops"] = hops + 1;
    return ask;
}

// The answer r from the host where gid runs: this host now points there
// (not after a dup: its answer is the copy, with a gid of its own). A
// shortcut, kept in memory until the table's next durable change.
void learn(Daemon& d, const std::string& gid, const std::optional<Location>& entry, const json& r) {
    if (!r.value("ok", false) || r.value("gid", "") != gid || !r.contains("host") ||
        r["host"] == d.config().host)
        return;
    Location l = entry ? *entry : Location{};
    l.gid = gid;
    l.state = "moved";
    l.host = r.value("host", "");
    l.pid = r.value("pid", 0);
    l.uid = r.value("uid", 0u);
    l.comm = r.value("comm", "");
    if (!entry || entry->host != l.host || entry->pid != l.pid)
        d.locations_.hint(l, entry);
}

// After asking h.next: when it did not answer, the peer that has gid
// running is asked instead; then the answer is learnt and returned.
json settle(Daemon& d, const std::string& gid, const Hop& h, const json& ask, Result<json> r,
            std::chrono::milliseconds reply_timeout) {
    if (!r) {
        const std::string there = find_elsewhere(d, gid, h.next);
        if (there.empty())
            return unanswered(gid, h, r.error());
        spdlog::info("{}: {} did not answer ({}); {} has it", gid, h.next, r.error().what(), there);
        r = d.ask(there, ask, reply_timeout);
        if (!r)
            return error_reply(fmt::format("{} runs on {}, which did not answer: {}", gid, there,
                                           r.error().what()));
    }
    learn(d, gid, h.entry, *r);
    return *r;
}

// How long an asker waits for the answer of a lookup sent on with
// "answer_to" before it asks along the chain hop by hop instead (the host
// where it ended could not reach the asker, or the answer was lost).
std::chrono::milliseconds direct_wait(const Config& cfg) {
    return std::chrono::milliseconds(std::min(cfg.io_timeout_ms, 1000u));
}

// The fields of a peer's lookup that travel with it.
json carried(const json& req) {
    json extra = {{"uid", req.value("uid", 0u)}};
    for (const char* k : {"signal", "to", "precopy", "rid"})
        if (req.contains(k))
            extra[k] = req[k];
    return extra;
}

} // namespace

json Ops::route(Daemon& d, const std::string& op, const std::string& gid, const json& extra,
                int hops) {
    const Hop h = next_hop(d, gid, hops);
    if (auto r = ends_here(d, h, op, extra, hops))
        return *r;
    const json ask = onward(op, gid, extra, hops);
    // A forwarded move answers when the migration is over: as long as the
    // migration itself may take, not a short request's timeout.
    const auto reply_timeout =
        is_move(op)
            ? std::chrono::milliseconds(std::max(d.config().io_timeout_ms, move_reply_timeout_ms))
            : std::chrono::milliseconds(0);
    return settle(d, gid, h, ask, d.ask(h.next, ask, reply_timeout), reply_timeout);
}

// A lookup asked here (where, kill): the first hop is asked and answers
// itself when gid runs there; when it had to send the request on, it says
// "forwarded" and the host where the chain ends answers here directly, each
// further hop one message. Without that answer in time the chain is asked
// hop by hop, with the same request id (a signal is still sent once).
json Ops::lookup(Daemon& d, const std::string& op, const std::string& gid, json extra) {
    const Config& cfg = d.config();
    const Hop h = next_hop(d, gid, 0);
    if (auto r = ends_here(d, h, op, extra, 0))
        return *r;
    const std::string rid = d.answers_.new_id(cfg.host);
    extra["rid"] = rid;
    const json ask = onward(op, gid, extra, 0);
    json direct = ask;
    direct["answer_to"] = cfg.host;
    Answers::Wait wait(d.answers_, rid);
    auto r = d.ask(h.next, direct);
    if (r && r->value("forwarded", false)) {
        if (auto a = wait.get(direct_wait(cfg))) {
            learn(d, gid, h.entry, *a);
            return *a;
        }
        spdlog::info("{} {}: no answer from the end of the chain within {} ms; asking hop by hop",
                     op, gid, direct_wait(cfg).count());
        r = d.ask(h.next, ask);
    }
    return settle(d, gid, h, ask, std::move(r), {});
}

json Ops::local_hosts(Daemon& d) {
    const Config& cfg = d.config();
    json hosts = json::array();
    hosts.push_back(
        {{"name", cfg.host}, {"address", cfg.listen}, {"port", cfg.port}, {"self", true}});
    for (const auto& p : cfg.peers)
        hosts.push_back(
            {{"name", p.name}, {"address", p.address}, {"port", p.port}, {"self", false}});
    return {{"ok", true}, {"host", cfg.host}, {"hosts", hosts}};
}

json Ops::local_where(Daemon& d, const json& req, const Client& who) {
    return lookup(d, "where", req.value("gid", ""), {{"uid", who.uid}});
}

json Ops::local_move_gid(Daemon& d, const json& req, const Client& who) {
    const std::string op = req.value("op", "migrate");
    const std::string to = req.value("to", "");
    if (to.empty())
        return error_reply(
            fmt::format("{} of {} needs \"to\": the destination host", op, req.value("gid", "")));
    json extra = {{"uid", who.uid}, {"to", to}};
    if (req.contains("precopy"))
        extra["precopy"] = req["precopy"];
    return route(d, op, req.value("gid", ""), extra, 0);
}

json Ops::local_kill(Daemon& d, const json& req, const Client& who) {
    return lookup(d, "kill", req.value("gid", ""),
                  {{"uid", who.uid}, {"signal", req.value("signal", SIGTERM)}});
}

void Ops::peer_where(Daemon& d, Channel& ch, const json& req) {
    const std::string op = req.value("op", "where");
    if (req.contains("answer_to") && !is_move(op)) {
        peer_lookup(d, ch, req);
        return;
    }
    (void)send_json(ch, route(d, op, req.value("gid", ""), carried(req), req.value("hops", 1)));
}

// A lookup whose answer goes straight to its asker ("answer_to"). The first
// hop (asked by the asker itself) answers on its connection, either the
// answer or "forwarded"; a later hop ("one_way") answers nothing there.
void Ops::peer_lookup(Daemon& d, Channel& ch, const json& req) {
    const std::string op = req.value("op", "where");
    const std::string gid = req.value("gid", "");
    const int hops = req.value("hops", 1);
    const bool one_way = req.value("one_way", false);
    const auto reply = [&](json r) {
        if (!one_way) {
            (void)send_json(ch, r);
            return;
        }
        const std::string to = req.value("answer_to", "");
        const json a = {
            {"op", "answer"}, {"one_way", true}, {"rid", req.value("rid", "")}, {"reply", r}};
        if (auto t = d.tell(to, a); !t)
            spdlog::warn("{} {}: cannot answer {} ({}); it asks hop by hop after {} ms", op, gid,
                         to, t.error().what(), direct_wait(d.config()).count());
    };
    const Hop h = next_hop(d, gid, hops);
    if (auto r = ends_here(d, h, op, carried(req), hops)) {
        reply(std::move(*r));
        return;
    }
    json fwd = req;
    fwd["hops"] = hops + 1;
    fwd["one_way"] = true;
    if (auto t = d.tell(h.next, fwd); !t) {
        const std::string there = find_elsewhere(d, gid, h.next);
        if (there.empty()) {
            reply(unanswered(gid, h, t.error()));
            return;
        }
        if (auto t2 = d.tell(there, fwd); !t2) {
            reply(error_reply(fmt::format("{} runs on {}, which did not answer: {}", gid, there,
                                          t2.error().what())));
            return;
        }
        spdlog::info("{}: {} did not answer ({}); {} has it", gid, h.next, t.error().what(), there);
    }
    if (!one_way)
        (void)send_json(ch, {{"ok", true}, {"forwarded", true}});
}

void Ops::peer_answer(Daemon& d, Channel&, const json& req) {
    const std::string rid = req.value("rid", "");
    if (!req.contains("reply") || !req["reply"].is_object() ||
        !d.answers_.deliver(rid, req["reply"]))
        spdlog::info("answer {} from a peer: no lookup here waits for it (it gave up)", rid);
}

void Ops::peer_list(Daemon& d, Channel& ch, const json&) {
    (void)send_json(ch,
                    {{"ok", true}, {"host", d.config().host}, {"processes", local_processes(d)}});
}

json Ops::local_ps(Daemon& d, const json&, const Client&) {
    const Config& cfg = d.config();
    json all = local_processes(d);
    json unreachable = json::array();
    for (const auto& p : cfg.peers) {
        auto r = d.ask(p.name, {{"op", "list"}});
        if (!r || !r->value("ok", false)) {
            unreachable.push_back(
                {{"host", p.name}, {"error", r ? r->value("error", "refused") : r.error().what()}});
            continue;
        }
        for (const auto& e : r->value("processes", json::array()))
            all.push_back(e);
    }
    return {{"ok", true}, {"processes", all}, {"unreachable", unreachable}};
}

} // namespace migd
