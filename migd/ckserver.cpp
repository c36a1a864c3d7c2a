// SPDX-License-Identifier: GPL-2.0
// The checkpoint server (Hector's): images stored on a host's disk with the
// care of local checkpoints (temporary name, fsync, rename, mode 0600, owner
// recorded), listed, removed, and restarted on any host. Three schedules for
// many processes at once, as Hector measured them: one-at-a-time (a session
// per process, in turn), combined (one session announcing every process and
// its size, then the images in turn), all-at-once (a session per process,
// all at the same time).
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <regex>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ghost/process.hpp"
#include "guarded.hpp"
#include "json_text.hpp"
#include "ops.hpp"

namespace migd {

using ghost::Error;
using ghost::Result;
using ghost::UniqueFd;

namespace {

// One request's processes at most: an all-at-once schedule runs a thread
// and a session each, and a request may not make migd use up the host's.
constexpr std::size_t kMaxCheckpointPids = 256;

bool valid_id(const std::string& id) {
    static const std::regex re("[0-9]+-[0-9]+");
    return std::regex_match(id, re);
}

std::string image_path(const Config& cfg, const std::string& id) {
    return fmt::format("{}/{}.ghost", cfg.server_dir, id);
}

std::string meta_path(const Config& cfg, const std::string& id) {
    return fmt::format("{}/{}.json", cfg.server_dir, id);
}

std::optional<json> read_meta(const Config& cfg, const std::string& id) {
    auto text = read_file(meta_path(cfg, id));
    if (!text)
        return std::nullopt;
    auto j = parse_bounded(*text);
    if (j.is_discarded())
        return std::nullopt;
    return j;
}

// Image id's metadata, when uid may act on it: its owner or root. what is
// the act ("remove", "restart"), for the refusal.
Result<json> owned_image(const Config& cfg, const std::string& id, uid_t uid,
                         std::string_view what) {
    auto meta = valid_id(id) ? read_meta(cfg, id) : std::nullopt;
    if (!meta)
        return Error::from_errno(ENOENT, fmt::format("no image {} on {}", id, cfg.host));
    if (uid != 0 && meta->value("owner", 0u) != uid)
        return Error::from_errno(EPERM, fmt::format("image {} belongs to uid {}: only its owner "
                                                    "or root may {} it",
                                                    id, meta->value("owner", 0u), what));
    return *meta;
}

Result<void> server_ready(const Config& cfg) {
    if (cfg.server_dir.empty())
        return Error::from_errno(EOPNOTSUPP, fmt::format("{} is not a checkpoint server "
                                                         "([checkpoint_server] dir is empty)",
                                                         cfg.host));
    std::error_code ec;
    std::filesystem::create_directories(cfg.server_dir, ec);
    if (ec)
        return Error::from_errno(ec.value(), fmt::format("checkpoint server {}: cannot create "
                                                         "{}: {}",
                                                         cfg.host, cfg.server_dir, ec.message()));
    ::chmod(cfg.server_dir.c_str(), 0700);
    return {};
}

// One image from ch into the store: written under a temporary name while
// checked, synced, renamed; on any failure nothing is left. The stream is
// read to its END even when writing fails, so the session stays in step.
Result<std::string> store_one(Daemon& d, Channel& ch, const json& item, uid_t owner,
                              const std::string& id) {
    const Config& cfg = d.config();
    const std::string tmp = fmt::format("{}/.{}.tmp", cfg.server_dir, id);
    json jentry = {{"id", "store-" + id},         {"role", "server"}, {"kind", "checkpoint"},
                   {"state", "receiving"},        {"tmp", tmp},       {"meta", meta_path(cfg, id)},
                   {"image", image_path(cfg, id)}};
    Error werr;
    bool werr_set = false;
    UniqueFd fd;
    // Without its entry a crash would leave files no one names: refused
    // (the stream is still read to its END).
    if (auto j = d.journal_.put(jentry); !j) {
        werr = j.error();
        werr_set = true;
    } else {
        fd.reset(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    }
    if (!werr_set && !fd) {
        werr = Error::from_errno(errno,
                                 fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
        werr_set = true;
    }
    std::uint64_t written = 0;
    // The quota counts every session's bytes: ours are reserved in
    // store_writing_ before they are written (so two sessions cannot both
    // take the last room), and given back when this image is stored (then
    // counted in the store, which is read again once any image was stored
    // or removed) or dropped.
    std::uint64_t reserved = 0;
    struct GiveBack {
        Daemon& d;
        const std::uint64_t& n;
        ~GiveBack() {
            d.store_changes_.fetch_add(1);
            d.store_writing_.fetch_sub(n);
        }
    } give_back{d, reserved};
    std::uint64_t seen = d.store_changes_.load();
    std::uint64_t stored = cfg.server_max_bytes ? stored_bytes(cfg) : 0;
    FrameSource src(ch, [&](std::span<const std::byte> b) -> Result<void> {
        if (werr_set)
            return {};
        if (cfg.server_max_bytes) {
            if (const auto now = d.store_changes_.load(); now != seen) {
                seen = now;
                stored = stored_bytes(cfg);
            }
            const std::uint64_t writing = d.store_writing_.fetch_add(b.size()) + b.size();
            reserved += b.size();
            if (stored + writing > cfg.server_max_bytes) {
                werr = Error::from_errno(EDQUOT, fmt::format("checkpoint server {} is over its "
                                                             "quota of {} bytes",
                                                             cfg.host, cfg.server_max_bytes));
                werr_set = true;
                return {};
            }
        }
        std::size_t off = 0;
        if (auto w = write_all(fd.get(), b, &off); !w) {
            werr = Error::from_errno(
                w.error().code.value(),
                fmt::format("writing {} after {} bytes: {}", tmp, written + off, w.error().what()));
            werr_set = true;
            return {};
        }
        written += b.size();
        return {};
    });
    ghost::image::ReadOptions ro;
    ro.max_bytes = cfg.max_image_bytes; // as for a migration's image
    auto img = ghost::image::read(src, ro);
    Result<void> rest = img ? src.drain() : Result<void>(img.error());
    auto cleanup = [&](const Error& e) -> Result<std::string> {
        ::unlink(tmp.c_str());
        d.journal_.remove("store-" + id);
        return e;
    };
    if (!rest)
        return cleanup(rest.error());
    if (werr_set)
        return cleanup(werr);
    if (::fsync(fd.get()) != 0)
        return cleanup(
            Error::from_errno(errno, fmt::format("cannot sync {}: {}", tmp, std::strerror(errno))));
    fd.reset();
    const json meta = {{"id", id},
                       {"comm", item.value("comm", "")},
                       {"pid", item.value("pid", 0)},
                       {"origin", ch.peer()},
                       {"owner", owner},
                       {"bytes", written},
                       {"time_ms", now_ms()}};
    if (auto m = write_file_atomic(meta_path(cfg, id), json_text(meta, 1) + "\n", 0600); !m)
        return cleanup(m.error());
    if (::rename(tmp.c_str(), image_path(cfg, id).c_str()) != 0) {
        ::unlink(meta_path(cfg, id).c_str());
        return cleanup(Error::from_errno(
            errno, fmt::format("cannot rename {}: {}", tmp, std::strerror(errno))));
    }
    UniqueFd dir(::open(cfg.server_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir)
        ::fsync(dir.get());
    // Durable before the answer: a recovery finding "receiving" removes
    // the image (never announced), one finding "stored" keeps it.
    jentry["state"] = "stored";
    if (auto j = d.journal_.put(jentry); !j) {
        ::unlink(image_path(cfg, id).c_str());
        ::unlink(meta_path(cfg, id).c_str());
        return cleanup(j.error());
    }
    d.journal_.remove("store-" + id);
    spdlog::info("checkpoint server: stored {} ({}, pid {} on {}, uid {}, {} bytes{})", id,
                 meta["comm"].get<std::string>(), meta["pid"].get<int>(), ch.peer(), owner, written,
                 ch.clear() ? ", received in the clear" : "");
    return id;
}

struct Job {
    pid_t pid = 0;
    ProcInfo proc;
    // What its session says; this unless it got that far.
    json result = {{"ok", false}, {"error", "the checkpoint session failed (migd's log says why)"}};
};

// One session with the server for `jobs` (one-at-a-time and all-at-once:
// one job each; combined: all of them).
// When this host is the server: its own peer_store, served on a thread over
// a socketpair (joined once the session's channel, declared after it, is
// closed).
struct SelfServer {
    std::thread t;
    ~SelfServer() {
        if (t.joinable())
            t.join();
    }
};

Result<std::unique_ptr<Channel>> connect_server(Daemon& d, const std::string& server,
                                                SelfServer& self) {
    if (server != d.config().host)
        return d.connect(server);
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return Error::from_errno(errno, fmt::format("socketpair: {}", std::strerror(errno)));
    auto near = plain_channel(UniqueFd(sv[0]), server);
    self.t = std::thread([&d, far = plain_channel(UniqueFd(sv[1]), server)]() mutable {
        guarded("this host's checkpoint server", [&] { d.serve_peer(std::move(far)); });
    });
    return near;
}

void run_session(Daemon& d, const std::string& server, std::vector<Job*> jobs, ghost::Fate fate,
                 const Emit& emit) {
    SelfServer self;
    auto ch = connect_server(d, server, self);
    if (!ch) {
        for (auto* j : jobs)
            j->result = error_reply(ch.error());
        return;
    }
    json items = json::array();
    for (auto* j : jobs)
        items.push_back({{"pid", j->pid},
                         {"comm", j->proc.comm},
                         {"uid", j->proc.uid},
                         {"estimate", ghost::estimate_image_bytes(j->pid)}});
    json ask = {{"op", "store"}, {"items", items}};
    offer_clear(d.config(), **ch, ask, false);
    auto s = send_json(**ch, ask);
    auto a = s ? recv_json(**ch) : Result<json>(s.error());
    if (!a || !a->value("ok", false)) {
        const std::string why = a ? a->value("error", "refused") : a.error().what();
        for (auto* j : jobs)
            j->result = error_reply(fmt::format("checkpoint server {}: {}", server, why));
        return;
    }
    if (follow_clear(**ch, ask, *a))
        spdlog::info("checkpoint to {}: images go in the clear ([tls] clear_images)", server);
    for (auto* j : jobs) {
        std::string id;
        const auto t0 = std::chrono::steady_clock::now();
        auto confirm = [&]() -> Result<void> {
            (*ch)->set_timeout(
                std::chrono::milliseconds(std::max(d.config().io_timeout_ms, 60000u)));
            auto r = recv_json(**ch);
            if (!r)
                return r.error();
            if (!r->value("ok", false))
                return Error::from_errno(EIO, fmt::format("checkpoint server {}: {}", server,
                                                          r->value("error", "refused")));
            id = r->value("id", "");
            // Stored; the process, held stopped, is killed after this.
            maybe_crash("checkpoint-after-confirm");
            return {};
        };
        // Held stopped from its export until the server confirmed, then
        // killed: a migd that dies in between must find it to resume it
        // (recovery's "sending" source, as for a migration).
        const std::string jid = d.new_op_id();
        Daemon::Busy busy(d, jid);
        if (auto w = d.journal_.put({{"id", jid},
                                     {"role", "source"},
                                     {"kind", "checkpoint"},
                                     {"state", "sending"},
                                     {"peer", server},
                                     {"pid", j->pid},
                                     {"starttime", j->proc.starttime},
                                     {"uid", j->proc.uid},
                                     {"comm", j->proc.comm}});
            !w) {
            j->result = error_reply(fmt::format("checkpoint of process {} not started, it runs "
                                                "on: {}",
                                                j->pid, w.error().what()));
            break; // the server awaits this image: the session cannot go on
        }
        auto ex = export_to(d, **ch, j->proc, fate, confirm, jobs.size() == 1 ? emit : Emit{});
        const auto ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (!ex) {
            d.journal_.remove(jid);
            j->result = error_reply(fmt::format("checkpoint of process {} failed, it runs on: {}",
                                                j->pid, ex.error().what()));
            break; // the session is out of step: the rest are reported as not done
        }
        if (fate == ghost::Fate::Kill) // export_to() does not wait for it to be gone
            if (auto k = kill_process(j->pid, j->proc.starttime); !k)
                spdlog::warn("checkpoint of process {}: {}", j->pid, k.error().what());
        d.journal_.remove(jid);
        j->result = {{"ok", true}, {"pid", j->pid},   {"id", id}, {"bytes", ex->stats.bytes},
                     {"ms", ms},   {"server", server}};
    }
    for (auto* j : jobs)
        if (j->result.is_null())
            j->result = error_reply("not checkpointed: the session with the server failed first");
}

} // namespace

std::uint64_t stored_bytes(const Config& cfg) {
    std::uint64_t n = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(cfg.server_dir, ec))
        if (e.path().extension() == ".ghost" || e.path().extension() == ".manifest")
            n += e.file_size(ec);
    return n;
}

// Room for `want` more bytes: the quota (with what other sessions are
// writing now) and the file system's free space.
Result<void> check_room(const Daemon& d, std::uint64_t want) {
    const Config& cfg = d.config();
    const std::uint64_t used =
        cfg.server_max_bytes ? stored_bytes(cfg) + d.store_writing_.load() : 0;
    if (cfg.server_max_bytes && used + want > cfg.server_max_bytes)
        return Error::from_errno(EDQUOT, fmt::format("checkpoint server {} is full: {} of {} "
                                                     "bytes used, {} more needed",
                                                     cfg.host, used, cfg.server_max_bytes, want));
    struct statvfs vfs;
    if (::statvfs(cfg.server_dir.c_str(), &vfs) == 0) {
        const std::uint64_t avail = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
        if (want > avail)
            return Error::from_errno(ENOSPC, fmt::format("checkpoint server {}: {} has {} bytes "
                                                         "free, the images need about {}",
                                                         cfg.host, cfg.server_dir, avail, want));
    }
    return {};
}

json Ops::local_checkpoint(Daemon& d, const json& req, const Client& who, const Emit& emit) {
    const std::string server = req.value("server", "");
    const std::string schedule = req.value("schedule", "one-at-a-time");
    const bool leave = req.value("leave_running", false);
    if (schedule != "one-at-a-time" && schedule != "combined" && schedule != "all-at-once")
        return error_reply(fmt::format("unknown schedule \"{}\" (one-at-a-time, combined, "
                                       "all-at-once)",
                                       schedule));
    if (server != d.config().host && !d.config().peer(server))
        return error_reply(fmt::format("{} is not a peer of {}", server, d.config().host));
    const json pids = req.value("pids", json::array());
    if (!pids.is_array() || pids.size() > kMaxCheckpointPids)
        return error_reply(
            fmt::format("checkpoint takes at most {} pids in one request", kMaxCheckpointPids));
    std::vector<Job> jobs;
    for (const auto& p : pids) {
        Job j;
        j.pid = p.get<pid_t>();
        for (const auto& before : jobs)
            if (before.pid == j.pid)
                return error_reply(fmt::format("pid {} is named twice", j.pid));
        auto proc = owned_process(j.pid, who);
        if (!proc)
            return error_reply(proc.error());
        if (auto m = check_movable_fds(j.pid); !m)
            return error_reply(m.error());
        j.proc = *proc;
        jobs.push_back(std::move(j));
    }
    if (jobs.empty())
        return error_reply("checkpoint needs at least one pid");
    const auto fate = leave ? ghost::Fate::Run : ghost::Fate::Kill;
    const auto t0 = std::chrono::steady_clock::now();
    if (schedule == "combined") {
        std::vector<Job*> all;
        for (auto& j : jobs)
            all.push_back(&j);
        run_session(d, server, all, fate, emit);
    } else if (schedule == "one-at-a-time") {
        for (auto& j : jobs)
            run_session(d, server, {&j}, fate, jobs.size() == 1 ? emit : Emit{});
    } else {
        std::vector<std::thread> threads;
        for (auto& j : jobs) {
            try {
                threads.emplace_back([&, jp = &j] {
                    guarded("a checkpoint session",
                            [&] { run_session(d, server, {jp}, fate, Emit{}); });
                });
            } catch (const std::system_error& e) {
                // No thread for it (the host's limit): not checkpointed,
                // and the sessions begun end as they would.
                j.result = error_reply(
                    fmt::format("not checkpointed: no thread for its session: {}", e.what()));
            }
        }
        for (auto& t : threads)
            t.join();
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    json images = json::array();
    bool ok = true;
    std::uint64_t bytes = 0;
    for (auto& j : jobs) {
        ok = ok && j.result.value("ok", false);
        bytes += j.result.value("bytes", std::uint64_t{0});
        images.push_back(j.result);
    }
    json reply = {{"ok", ok},
                  {"images", images},
                  {"schedule", schedule},
                  {"bytes", bytes},
                  {"seconds", secs},
                  {"mbit_per_s", secs > 0 ? bytes * 8 / secs / 1e6 : 0.0}};
    if (!ok)
        for (auto& j : jobs)
            if (!j.result.value("ok", false)) {
                reply["error"] = j.result.value("error", "failed");
                break;
            }
    return reply;
}

void Ops::peer_store(Daemon& d, Channel& ch, const json& req) {
    const Config& cfg = d.config();
    const auto items = req.value("items", json::array());
    if (items.empty()) {
        (void)send_json(ch, error_reply("malformed store request"));
        return;
    }
    // The peer's estimates: each within the limit a migration has, their
    // sum saturating (the stream's real size is checked as it comes).
    std::uint64_t want = 0;
    for (const auto& i : items) {
        const auto e = i.value("estimate", std::uint64_t{0});
        if (cfg.max_image_bytes && e > cfg.max_image_bytes) {
            (void)send_json(ch, error_reply(fmt::format(
                                    "checkpoint server {}: an image of about {} bytes is above "
                                    "[limits] max_image_bytes ({})",
                                    cfg.host, e, cfg.max_image_bytes)));
            return;
        }
        want = e > UINT64_MAX - want ? UINT64_MAX : want + e;
    }
    auto ready = server_ready(cfg);
    if (ready)
        ready = check_room(d, want);
    if (!ready) {
        (void)send_json(ch, error_reply(ready.error()));
        return;
    }
    json yes = {{"ok", true}};
    accept_clear(d.config(), ch, req, yes, true);
    if (!send_json(ch, yes))
        return;
    static std::atomic<std::uint64_t> seq{0};
    for (const auto& item : items) {
        const std::string id = fmt::format("{}-{}", now_ms(), ++seq);
        auto r = store_one(d, ch, item, item.value("uid", 0u), id);
        if (!r) {
            spdlog::warn("checkpoint server: image from {} refused: {}", ch.peer(),
                         r.error().what());
            if (!send_json(ch, error_reply(r.error())) || r.error().code.value() == ECONNRESET ||
                r.error().code.value() == ETIMEDOUT)
                return;
            continue;
        }
        if (!send_json(ch, {{"ok", true}, {"id", *r}}))
            return;
    }
}

json Ops::local_images(Daemon& d, const json& req, const Client& who) {
    const std::string server = req.value("server", d.config().host);
    json ask = {{"op", "images"}, {"uid", who.uid}};
    if (req.contains("rm")) {
        if (!req["rm"].is_string())
            return error_reply("malformed request: \"rm\" names an image id (a string)");
        ask["rm"] = req["rm"];
    }
    if (server == d.config().host) {
        // This host's own store: answer in place through a loopback pair.
        auto [a, b] = [] {
            int sv[2] = {-1, -1};
            ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
            return std::pair{UniqueFd(sv[0]), UniqueFd(sv[1])};
        }();
        auto ca = plain_channel(std::move(a)), cb = plain_channel(std::move(b));
        std::thread t([&d, &ask, far = std::move(cb)]() mutable {
            guarded("listing this host's images", [&] { peer_images(d, *far, ask); });
            far.reset(); // the asker reads the end, whatever happened
        });
        auto r = recv_json(*ca);
        t.join();
        return r ? *r : error_reply(r.error());
    }
    auto r = d.ask(server, ask);
    return r ? *r : error_reply(r.error());
}

void Ops::peer_images(Daemon& d, Channel& ch, const json& req) {
    const Config& cfg = d.config();
    if (auto r = server_ready(cfg); !r) {
        (void)send_json(ch, error_reply(r.error()));
        return;
    }
    const uid_t uid = req.value("uid", 0u);
    if (req.contains("rm")) {
        const std::string id = req.value("rm", "");
        if (auto meta = owned_image(cfg, id, uid, "remove"); !meta) {
            (void)send_json(ch, error_reply(meta.error()));
            return;
        }
        ::unlink(image_path(cfg, id).c_str());
        ::unlink(meta_path(cfg, id).c_str());
        d.store_changes_.fetch_add(1); // the sessions' quota reads the store again
        spdlog::info("checkpoint server: removed {} (asked by uid {} on {})", id, uid, ch.peer());
        (void)send_json(ch, {{"ok", true}, {"removed", id}});
        return;
    }
    json list = json::array();
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(cfg.server_dir, ec)) {
        if (e.path().extension() != ".json")
            continue;
        if (auto m = read_meta(cfg, e.path().stem().string()))
            list.push_back(*m);
    }
    std::sort(list.begin(), list.end(), [](const json& a, const json& b) {
        return a.value("time_ms", std::uint64_t{0}) < b.value("time_ms", std::uint64_t{0});
    });
    (void)send_json(ch, {{"ok", true}, {"server", cfg.host}, {"images", list}});
}

void Ops::peer_fetch(Daemon& d, Channel& ch, const json& req) {
    const Config& cfg = d.config();
    const std::string id = req.value("id", "");
    const uid_t uid = req.value("uid", 0u);
    auto meta = owned_image(cfg, id, uid, "restart");
    if (!meta) {
        (void)send_json(ch, error_reply(meta.error()));
        return;
    }
    UniqueFd fd(::open(image_path(cfg, id).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        (void)send_json(
            ch, error_reply(fmt::format("cannot open image {}: {}", id, std::strerror(errno))));
        return;
    }
    json ok = *meta;
    ok["ok"] = true;
    accept_clear(cfg, ch, req, ok, false);
    if (!send_json(ch, ok))
        return;
    if (auto s = send_stream(ch, fd.get()); !s) {
        (void)send_abort(ch, s.error().what());
        return;
    }
    (void)send_end(ch);
}

} // namespace migd
