// SPDX-License-Identifier: GPL-2.0
// Migration and duplication between hosts (the ghost-process paper's
// Listing 5): export to the network, import on the destination, which keeps
// the copy stopped and acknowledges a complete, valid image; only then the
// source kills the original (migration) and tells the destination to let
// the copy run. Both sides journal each step, so that after any single
// failure exactly one copy runs (Documentation/migd-protocol.md).
#include <signal.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ghost/precopy.hpp"
#include "ghost/process.hpp"
#include "ops.hpp"

namespace migd {

using ghost::Error;
using ghost::Result;

namespace {

// The location table's entry for the gid of a journaled migration: "local"
// on the destination, "moved" (forwarding to host) on the source.
Location location_of(const json& entry, std::string state, std::string host, pid_t pid,
                     std::uint64_t starttime = 0) {
    Location l;
    l.gid = entry.value("gid", "");
    l.state = std::move(state);
    l.host = std::move(host);
    l.pid = pid;
    l.starttime = starttime;
    l.uid = entry.value("uid", 0u);
    l.comm = entry.value("comm", "");
    return l;
}

// The destination's end of a migration: the copy runs (commit) or is
// killed (abort), and the entry leaves the journal. Three threads may get
// here for one migration (the import's own, a commit from the source's
// resolver, this host's resolver); only one that still finds the entry in
// the journal acts. A resolver that read the entry just before the verdict
// came would otherwise ask the source, hear "no record" (the source drops
// its record once the commit is done) and kill the running copy.
// Returns when the copy was let go, if this call let it go.
std::optional<std::chrono::steady_clock::time_point> finish_dest(Daemon& d, const json& entry,
                                                                 bool commit) {
    const pid_t pid = entry.value("pid", 0);
    const std::uint64_t start = entry.value("starttime", std::uint64_t{0});
    const std::string id = entry.value("id", "");
    const auto claim = d.claim(id);
    if (!claim) {
        spdlog::info("{} {}: already finished here", entry.value("kind", ""), id);
        return std::nullopt;
    }
    std::optional<std::chrono::steady_clock::time_point> let_go;
    if (commit) {
        if (pid > 0 && proc_alive(pid, start) && ::kill(pid, SIGCONT) == 0)
            let_go = std::chrono::steady_clock::now();
        const Location l = location_of(entry, "local", d.config().host, pid, start);
        (void)d.locations_.set(l);
        spdlog::info("{} {}: copy {} runs as pid {}", entry.value("kind", ""), id, l.gid, pid);
    } else {
        if (pid > 0)
            (void)kill_process(pid, start);
        spdlog::info("{} {}: rolled back, copy killed", entry.value("kind", ""), id);
    }
    d.journal_.remove(id);
    return let_go;
}

// The answer to a verdict: with how long the copy has run by now (the
// source's downtime ends when the copy was let go, not when it hears so).
json verdict_reply(const std::optional<std::chrono::steady_clock::time_point>& let_go) {
    json r = {{"ok", true}};
    if (let_go)
        r["running_ms"] =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - *let_go)
                .count();
    return r;
}

json move_reply(const std::string& gid, const std::string& host, pid_t pid, const ProcInfo& proc,
                const ghost::ExportStats& st, std::uint64_t total_ms) {
    return {{"ok", true},          {"gid", gid},
            {"host", host},        {"pid", pid},
            {"uid", proc.uid},     {"comm", proc.comm},
            {"bytes", st.bytes},   {"frozen_ms", st.frozen_ns / 1000000},
            {"total_ms", total_ms}};
}

double ms_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// What a request says of pre-copy: "precopy": true or false, else nothing
// (a value of another type is not trusted either way).
std::optional<bool> asked_precopy(const json& req) {
    const auto a = req.find("precopy");
    if (a == req.end() || !a->is_boolean())
        return std::nullopt;
    return a->get<bool>();
}

// Whether a migration pre-copies: as asked, else when the engine can and
// the process is large; the reason when not.
std::pair<bool, std::string> want_precopy(Daemon& d, const json& req, pid_t pid) {
    const auto asked = asked_precopy(req);
    if (asked == false)
        return {false, "not asked"};
    auto engine = d.engine();
    if (!engine || (*engine)->name() != "user")
        return {false, "only the user engine pre-copies"};
    if (auto s = ghost::Precopy::supported(); !s)
        return {false, s.error().what()};
    if (asked == true)
        return {true, {}};
    if (ghost::estimate_image_bytes(pid) < d.config().precopy_min_bytes)
        return {false, "smaller than [migration] precopy_min_bytes"};
    return {true, {}};
}

// Images of the running process until the stop rule holds (P.Haul's: at
// most precopy_max_rounds, or a round of at most precopy_stop_bytes, or
// one that did not shrink by a tenth); each announced and acknowledged.
// The caller then sends the last image, the process held.
Result<json> precopy_rounds(Daemon& d, Channel& c, const ProcStat& proc, ghost::Precopy& pc,
                            const Emit& emit) {
    const Config& cfg = d.config();
    json rounds = json::array();
    std::uint64_t before = ~std::uint64_t{0};
    for (;;) {
        const auto t0 = std::chrono::steady_clock::now();
        if (auto s = send_json(c, {{"op", "image"}, {"last", false}}); !s)
            return s.error();
        auto ex = export_to(
            d, c, proc, ghost::Fate::Run, [] { return Result<void>{}; }, emit, &pc);
        if (!ex)
            return Error{ex.error().code,
                         fmt::format("pre-copy round {}: {}", pc.rounds() + 1, ex.error().what())};
        auto ack = recv_json(c);
        if (!ack)
            return Error{ack.error().code, fmt::format("{} did not acknowledge pre-copy image "
                                                       "{}: {}",
                                                       c.peer(), pc.rounds(), ack.error().what())};
        if (!ack->value("ok", false))
            return Error::from_errno(EIO, fmt::format("{} refused pre-copy image {}: {}", c.peer(),
                                                      pc.rounds(),
                                                      ack->value("error", "no reason given")));
        const std::uint64_t fresh = pc.last_page_bytes();
        rounds.push_back({{"bytes", ex->stats.bytes},
                          {"page_bytes", fresh},
                          {"held_ms", ex->stats.frozen_ns / 1e6},
                          {"ms", ms_since(t0)}});
        if (pc.rounds() >= cfg.precopy_max_rounds)
            break;
        if (pc.rounds() >= 2 && (fresh <= cfg.precopy_stop_bytes || fresh * 10 > before * 9))
            break;
        if (pc.rounds() >= 2)
            before = fresh;
    }
    return rounds;
}

// A committing source entry's original is gone: a migration's killed now
// if it is still there (pid and start time; a duplicate's goes on). False,
// logged, if it cannot be.
bool original_gone(const json& entry) {
    const std::string kind = entry.value("kind", "");
    if (kind != "migrate")
        return true;
    auto k = kill_process(entry.value("pid", 0), entry.value("starttime", std::uint64_t{0}));
    if (!k)
        spdlog::warn("{} {}: {}", kind, entry.value("id", ""), k.error().what());
    return k.has_value();
}

} // namespace

json Ops::local_move(Daemon& d, const json& req, const Client& who, const Emit& emit) {
    const std::string op = req.value("op", "");
    const bool dup = op == "dup";
    const pid_t pid = req.value("pid", 0);
    const std::string to = req.value("to", "");
    const Config& cfg = d.config();
    if (pid <= 0)
        return error_reply(fmt::format("{} needs \"pid\": a process id", op));
    if (to == cfg.host)
        return error_reply(
            fmt::format("process {} is on {} already: --to names another host", pid, to));
    if (!cfg.peer(to))
        return error_reply(
            fmt::format("{} is not a peer of {} (see [[peer]] in {})", to, cfg.host, cfg.source));
    auto proc = owned_process(pid, who);
    if (!proc)
        return error_reply(proc.error());
    if (auto m = check_movable_fds(pid); !m)
        return error_reply(m.error());

    // A process that came here by migration keeps its gid; a copy gets a new one.
    std::string gid = d.locations_.local_gid(pid, proc->starttime).value_or("");
    if (dup || gid.empty())
        gid = d.locations_.new_gid();

    const std::string id = d.new_op_id();
    json entry = {
        {"id", id},         {"role", "source"},  {"kind", op}, {"state", "sending"},
        {"peer", to},       {"gid", gid},        {"pid", pid}, {"starttime", proc->starttime},
        {"uid", proc->uid}, {"comm", proc->comm}};
    Daemon::Busy busy(d, id);
    if (auto j = d.journal_.put(entry); !j)
        return error_reply(j.error());
    const auto t0 = std::chrono::steady_clock::now();
    auto fail = [&](const std::string& why) {
        d.journal_.remove(id);
        spdlog::warn("{} {} of pid {} ({}) to {}: failed, the original runs on: {}", op, id, pid,
                     proc->comm, to, why);
        return error_reply(why);
    };

    // Pre-copy only moves (a duplicate's original runs on anyway).
    const auto [precopy, no_precopy] =
        dup ? std::pair<bool, std::string>{false, "a duplicate"} : want_precopy(d, req, pid);
    if (asked_precopy(req) == true && !precopy)
        return fail(fmt::format("cannot pre-copy process {}: {}", pid, no_precopy));

    auto ch = d.connect(to);
    if (!ch)
        return fail(ch.error().what());
    Channel& c = **ch;
    json ask = {{"op", "import"},     {"id", id},          {"kind", op},
                {"gid", gid},         {"uid", proc->uid},  {"comm", proc->comm},
                {"origin", cfg.host}, {"precopy", precopy}};
    offer_clear(cfg, c, ask, false);
    if (auto s = send_json(c, ask); !s)
        return fail(fmt::format("cannot reach {}: {}", to, s.error().what()));
    auto yes = recv_json(c);
    if (!yes)
        return fail(fmt::format("{} did not answer: {}", to, yes.error().what()));
    if (!yes->value("ok", false))
        return fail(fmt::format("{} refused: {}", to, yes->value("error", "no reason given")));
    const bool clear = follow_clear(c, ask, *yes);
    spdlog::info("{} {}: pid {} ({}, uid {}) to {} as {}{}", op, id, pid, proc->comm, proc->uid, to,
                 gid, clear ? ", image in the clear ([tls] clear_images)" : "");

    ghost::Precopy pc;
    json rounds = json::array();
    if (precopy) {
        auto r = precopy_rounds(d, c, *proc, pc, emit);
        if (!r)
            return fail(fmt::format("{} of process {} to {} failed, the original runs on: {}", op,
                                    pid, to, r.error().what()));
        rounds = std::move(*r);
        if (auto s = send_json(c, {{"op", "image"}, {"last", true}}); !s)
            return fail(fmt::format("cannot reach {}: {}", to, s.error().what()));
    }
    const auto held = std::chrono::steady_clock::now();

    pid_t dest_pid = 0;
    auto confirm = [&]() -> Result<void> {
        // The destination restores as the stream arrives; what is left after
        // END is the last pages and the check, which may take a while.
        c.set_timeout(import_answer_within(cfg.io_timeout_ms));
        auto ack = recv_json(c);
        if (!ack)
            return Error::from_errno(
                ack.error().code.value(),
                fmt::format("{} did not confirm the import: {}", to, ack.error().what()));
        // Read field by field: this runs on the exporter's thread, where a
        // field of another type must not throw.
        if (!said_yes(*ack)) {
            const auto why = ack->find("error");
            return Error::from_errno(EIO, fmt::format("{} refused the image: {}", to,
                                                      why != ack->end() && why->is_string()
                                                          ? why->get<std::string>()
                                                          : std::string("no reason given")));
        }
        const auto p = ack->find("pid");
        dest_pid = p != ack->end() && p->is_number_integer() ? p->get<pid_t>() : 0;
        entry["state"] = "committing";
        entry["dest_pid"] = dest_pid;
        if (auto j = d.journal_.put(entry); !j)
            return j.error();
        maybe_crash("source-after-ack");
        return {};
    };
    auto ex = export_to(d, c, *proc, dup ? ghost::Fate::Run : ghost::Fate::Kill, confirm, emit,
                        precopy ? &pc : nullptr);
    if (!ex) {
        auto cur = d.journal_.get(id);
        if (cur && cur->value("state", "") == "committing") {
            // Past the commit point but the original could not be killed:
            // the resolver retries; the copy stays stopped meanwhile.
            d.wake_resolver();
            return error_reply(fmt::format("{} confirmed the copy but process {} could not be "
                                           "killed: {} (migd retries; the copy stays stopped "
                                           "until then)",
                                           to, pid, ex.error().what()));
        }
        (void)send_json(c, {{"op", "abort"}, {"id", id}}); // the copy, if any, is killed
        return fail(fmt::format("{} of process {} to {} failed, the original runs on: {}", op, pid,
                                to, ex.error().what()));
    }

    // The commit goes first: the journal's "committing" entry already makes
    // it durable (a restarted migd sends it again and records the move), so
    // the copy need not wait for the location table's write.
    c.set_timeout(std::chrono::milliseconds(cfg.io_timeout_ms));
    auto done = send_json(c, {{"op", "commit"}, {"id", id}});
    Result<json> ok = done ? recv_json(c) : Result<json>(done.error());
    (void)d.locations_.set(location_of(entry, "moved", to, dest_pid));
    const auto total_ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count());
    json reply = move_reply(gid, to, dest_pid, *proc, ex->stats, total_ms);
    // From the last capture to the copy let go on the destination: for a
    // migration the time the process does not run. (Less the time the last
    // image watched the process still running, and the time the copy ran
    // before the destination answered.)
    const double running_ms = ok ? ok->value("running_ms", 0.0) : 0.0;
    const double downtime_ms =
        ms_since(held) - static_cast<double>(ex->stats.watched_ns) / 1e6 - running_ms;
    if (!dup)
        reply["downtime_ms"] = downtime_ms;
    if (precopy)
        reply["precopy"] = {{"rounds", rounds},
                            {"last_page_bytes", pc.last_page_bytes()},
                            {"last_watched_ms", static_cast<double>(ex->stats.watched_ns) / 1e6}};
    else if (!dup)
        reply["precopy"] = no_precopy;
    if (!dup)
        if (auto k = kill_process(pid, proc->starttime); !k)
            spdlog::warn("{} {}: {}", op, id, k.error().what());
    if (!ok || !ok->value("ok", false)) {
        d.wake_resolver();
        reply["pending"] = fmt::format("{} has not confirmed the commit yet; it lets the copy run "
                                       "as soon as it hears from {}",
                                       to, cfg.host);
    } else {
        d.journal_.remove(id);
    }
    spdlog::info("{} {}: done, {} bytes{}, held {} ms, down {:.1f} ms, {} ms in all; {} now {}:{}",
                 op, id, ex->stats.bytes,
                 precopy ? fmt::format(" after {} pre-copy images", rounds.size()) : "",
                 ex->stats.frozen_ns / 1000000, downtime_ms, total_ms, gid, to, dest_pid);
    return reply;
}

void Ops::peer_import(Daemon& d, Channel& ch, const json& req) {
    const std::string id = req.value("id", "");
    const std::string kind = req.value("kind", "");
    const uid_t uid = req.value("uid", 0u);
    if (!Journal::valid_id(id) || (kind != "migrate" && kind != "dup" && kind != "restart")) {
        (void)send_json(ch, error_reply("malformed import request"));
        return;
    }
    // A peer names its own migrations (HOST.TIME.N): it cannot reach
    // another's journal entry through the id.
    if (!id.starts_with(ch.peer() + ".") || d.journal_.get(id)) {
        (void)send_json(
            ch, error_reply(fmt::format("migration id {} is not {}'s to start", id, ch.peer())));
        return;
    }
    auto owner = incoming_owner(d.config(), uid);
    if (!owner) {
        (void)send_json(ch, error_reply(owner.error()));
        return;
    }
    Daemon::Busy busy(d, id);
    json entry = {{"id", id},          {"role", "dest"},
                  {"kind", kind},      {"state", "receiving"},
                  {"peer", ch.peer()}, {"gid", req.value("gid", "")},
                  {"uid", uid},        {"comm", req.value("comm", "")}};
    if (auto j = d.journal_.put(entry); !j) {
        (void)send_json(ch, error_reply(j.error()));
        return;
    }
    json yes = {{"ok", true}};
    const bool clear = accept_clear(d.config(), ch, req, yes, true);
    if (auto s = send_json(ch, yes); !s) {
        d.journal_.remove(id);
        return;
    }
    maybe_crash("dest-mid-stream");
    // The stub's pid goes to the journal at once: a migd that dies before
    // the copy is journaled as ready kills it when it starts again.
    auto im = import_from(d, ch, *owner, true, journal_stub(d, entry), asked_precopy(req) == true);
    // It runs as the announced user and nothing more, or not at all: the
    // stub refused any other image before it opened a file the image
    // names (import_from); what this side read of the stream says the same
    // before the copy may run.
    if (im)
        if (auto c = ghost::image::check_owner(im->image, *owner); !c) {
            d.adopt(im->pid); // reaped by the resolver once killed
            (void)kill_process(im->pid, im->starttime);
            im = c.error();
        }
    if (!im) {
        d.journal_.remove(id);
        spdlog::warn("{} {} from {}: import refused: {}", kind, id, ch.peer(), im.error().what());
        (void)send_json(ch, error_reply(fmt::format("{} could not import the image: {}",
                                                    d.config().host, im.error().what())));
        return;
    }
    d.adopt(im->pid);
    entry["state"] = "ready";
    entry["pid"] = im->pid;
    entry["starttime"] = im->starttime;
    if (auto j = d.journal_.put(entry); !j) {
        finish_dest(d, entry, false);
        (void)send_json(ch, error_reply(j.error()));
        return;
    }
    maybe_crash("dest-after-import");
    spdlog::info("{} {} from {}: {} bytes imported{}, copy stopped as pid {}", kind, id, ch.peer(),
                 im->bytes, clear ? " in the clear" : "", im->pid);
    if (auto s = send_json(ch, {{"ok", true}, {"pid", im->pid}, {"bytes", im->bytes}}); !s) {
        d.wake_resolver();
        return;
    }
    auto verdict = recv_json(ch);
    if (!verdict) {
        spdlog::warn("{} {}: lost {} before its verdict ({}); the copy stays stopped until it "
                     "answers",
                     kind, id, ch.peer(), verdict.error().what());
        d.wake_resolver();
        return;
    }
    const auto let_go = finish_dest(d, entry, verdict->value("op", "") == "commit");
    (void)send_json(ch, verdict_reply(let_go));
}

void Ops::peer_resolve(Daemon& d, Channel& ch, const json& req) {
    auto e = d.journal_.lookup(req.value("id", ""));
    if (!e) {
        // Not "no record": the destination must go on waiting, not kill.
        (void)send_json(ch, error_reply(e.error()));
        return;
    }
    std::string state = "aborted"; // no record: the source gave the migration up
    if (*e && (*e)->value("role", "") == "source") {
        if ((*e)->value("peer", "") != ch.peer()) {
            (void)send_json(ch, error_reply("not this migration's destination"));
            return;
        }
        state = (*e)->value("state", "") == "committing" ? "committed" : "pending";
        // "committed" lets the copy run: only once the original is dead. Its
        // export may still be killing it (the export's thread holds the id),
        // or a kill may have failed: the destination asks again later.
        if (state == "committed" && (d.busy(req.value("id", "")) || !original_gone(**e)))
            state = "pending";
    }
    (void)send_json(ch, {{"ok", true}, {"state", state}});
}

void Ops::peer_commit(Daemon& d, Channel& ch, const json& req) {
    if (d.busy(req.value("id", ""))) {
        // The import's own thread still waits for its verdict: ask again.
        (void)send_json(ch, error_reply("the migration is still in progress here"));
        return;
    }
    auto e = d.journal_.get(req.value("id", ""));
    if (e && e->value("peer", "") != ch.peer()) {
        (void)send_json(ch, error_reply("not this migration's source"));
        return;
    }
    std::optional<std::chrono::steady_clock::time_point> let_go;
    if (e && e->value("role", "") == "dest" && e->value("state", "") == "ready")
        let_go = finish_dest(d, *e, req.value("op", "") == "commit");
    (void)send_json(ch, verdict_reply(let_go));
}

bool Ops::resolve_dest(Daemon& d, const json& entry) {
    auto a = d.ask(entry.value("peer", ""), {{"op", "resolve"}, {"id", entry.value("id", "")}});
    if (!a || !a->value("ok", false))
        return false;
    const std::string state = a->value("state", "");
    if (state == "pending")
        return false;
    finish_dest(d, entry, state == "committed");
    return true;
}

bool Ops::resolve_source(Daemon& d, const json& entry) {
    if (!original_gone(entry))
        return false;
    const Location l =
        location_of(entry, "moved", entry.value("peer", ""), entry.value("dest_pid", 0));
    (void)d.locations_.set(l);
    auto a = d.ask(l.host, {{"op", "commit"}, {"id", entry.value("id", "")}});
    if (!a || !a->value("ok", false))
        return false;
    spdlog::info("{} {}: commit delivered to {}", entry.value("kind", ""), entry.value("id", ""),
                 l.host);
    d.journal_.remove(entry.value("id", ""));
    return true;
}

void Ops::recover_entry(Daemon& d, const json& e) {
    const std::string role = e.value("role", ""), state = e.value("state", "");
    const std::string id = e.value("id", "");
    if (role == "source" && state == "sending") {
        // Before the commit point: the original goes on (it was held
        // stopped for its export); the destination learns "aborted".
        const pid_t pid = e.value("pid", 0);
        if (proc_alive(pid, e.value("starttime", std::uint64_t{0}))) {
            ::kill(pid, SIGCONT);
            // A process that ran on during its export (dup, checkpoint)
            // keeps the snapshot our death killed as a zombie child.
            if (auto n = ghost::reap_leftover_snapshots(pid); !n)
                spdlog::warn("recovery: {} {}: pid {} keeps a snapshot we left: {}",
                             e.value("kind", ""), id, pid, n.error().what());
            else if (*n)
                spdlog::info("recovery: {} {}: reaped {} snapshot(s) we left in pid {}",
                             e.value("kind", ""), id, *n, pid);
        }
        spdlog::info("recovery: {} {} rolled back, pid {} runs on", e.value("kind", ""), id, pid);
        d.journal_.remove(id);
    } else if (role == "server" && state == "stored") {
        // Stored whole (and maybe announced): kept.
        spdlog::info("recovery: stored image of {} kept", id);
        d.journal_.remove(id);
    } else if ((role == "dest" && state == "receiving") || role == "server") {
        // Before the copy was ready: the stub (or the copy it became) is
        // killed; a partial stored image is removed.
        if (e.contains("stub_pid"))
            (void)kill_process(e.value("stub_pid", 0), e.value("stub_starttime", std::uint64_t{0}));
        if (e.contains("tmp"))
            ::unlink(e.value("tmp", "").c_str());
        // A stored image whose entry is still here was never announced
        // (the entry goes before the answer): its metadata and, if the
        // rename was done, the image go with it.
        if (role == "server")
            for (const char* key : {"meta", "image"})
                if (e.contains(key))
                    ::unlink(e.value(key, "").c_str());
        spdlog::info("recovery: incomplete {} {} dropped", e.value("kind", ""), id);
        d.journal_.remove(id);
    }
    // "committing" sources and "ready" destinations are the resolver's.
}

} // namespace migd
