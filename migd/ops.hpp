// SPDX-License-Identifier: GPL-2.0
// The operations behind Daemon, split by mechanism: transfer.cpp (an export
// into a channel, an import from one), migrate.cpp (migration and
// duplication), ckserver.cpp (the checkpoint server), locate.cpp (the
// location table: ps, where, kill). Internal to migd.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "daemon.hpp"
#include "ghost/engine.hpp"
#include "ghost/image.hpp"
#include "wire.hpp"

namespace migd {

json error_reply(const std::string& message);
json error_reply(const ghost::Error& e);

// A peer's reply with "ok": true, of that type (value("ok", false) throws
// on another).
inline bool said_yes(const json& r) {
    const auto ok = r.find("ok");
    return ok != r.end() && ok->is_boolean() && ok->get<bool>();
}

// A peer request that gets no reply on its connection: a lookup sent on
// with "answer_to" past its first hop, or the "answer" to one.
inline bool is_one_way(const json& req) {
    return req.is_object() && req.value("one_way", false);
}

// Checks that who may act on process pid (its owner, or root) and returns
// what /proc says of it; errors name the process and the rule.
ghost::Result<ProcInfo> owned_process(pid_t pid, const Client& who);

// Refuses a process that holds descriptors which cannot exist on another
// host (pipes, terminals): they would be lost in the move.
ghost::Result<void> check_movable_fds(pid_t pid);

// SIGKILL the process (pid, start time) and wait until it is gone.
ghost::Result<void> kill_process(pid_t pid, std::uint64_t starttime);

struct ExportResult {
    ghost::ExportStats stats;
    bool confirmed = false; // confirm() succeeded (the commit point passed)
};

// Exports process pid into ch: DATA frames, then END, then confirm() reads
// the peer's verdict. fate is that of ghost::checkpoint(): with Kill the
// process is killed only once confirm() succeeded, and resumed otherwise.
// A failed export is sent as ABORT with its reason.
// With precopy, the image is that pre-copy's next (ghost/precopy.hpp).
// With Kill, the process gets SIGKILL at the commit point but export_to()
// does not wait until it is gone: the caller does (kill_process()).
// proc is the process as the caller checked it: a pid that names another
// process by the time the export begins is refused.
ghost::Result<ExportResult> export_to(Daemon& d, Channel& ch, const ProcStat& proc,
                                      ghost::Fate fate,
                                      const std::function<ghost::Result<void>()>& confirm,
                                      const Emit& emit, ghost::Precopy* precopy = nullptr);

struct Imported {
    pid_t pid = 0;
    std::uint64_t starttime = 0;
    std::uint64_t bytes = 0;
    ghost::image::Image image;
};

// Reads an image from ch (DATA..END) into a restore stub, validating it on
// the way (the whole stream, END checksum included), and returns the
// restored process, stopped (SIGSTOP) when stopped is set. Any failure
// kills what was restored and says why. The image must run as owner and as
// nothing more (RestartOptions::owner): the stub refuses any other before
// it opens a file the image names.
// spawned is told the restore stub's pid as soon as it exists.
// With sequence, a pre-copy's images arrive, each announced by
// {"op":"image","last":B} and each but the last answered {"ok":true} once
// it checked out; the stub restores the whole sequence (image is the last).
ghost::Result<Imported> import_from(Daemon& d, Channel& ch, const ghost::Owner& owner, bool stopped,
                                    const std::function<void(pid_t)>& spawned = {},
                                    bool sequence = false);

// An import_from() spawned callback that journals the restore stub's pid
// and start time in entry at once: a migd that dies before the copy is
// done with kills it when it starts again (a "receiving" destination).
std::function<void(pid_t)> journal_stub(Daemon& d, json& entry);

// How long the destination may take, after an image's END, to answer
// whether it imported it (the last pages, the check): the source waits
// that long for the answer, and the destination gives its restore stub as
// long before it takes it for stuck.
inline std::chrono::milliseconds import_answer_within(unsigned io_timeout_ms) {
    return std::chrono::milliseconds(std::max(io_timeout_ms, 60000u));
}

// Image streams in the clear ([tls] clear_images on both hosts; wire.hpp,
// Channel::set_clear()). The asking side adds "clear": true to a request
// that carries or fetches an image when its config allows and the channel
// can; when it will receive the stream it calls ch.receive_clear() first.
// The answering side accepts in its reply (accept_clear(): "clear": true,
// after receive_clear() when it receives) and then streams or reads clear;
// the asking side follows the reply (follow_clear()). Both return whether
// the image streams of this request go clear.
void offer_clear(const Config& cfg, Channel& ch, json& req, bool receiving);
bool accept_clear(const Config& cfg, Channel& ch, const json& req, json& reply, bool receiving);
bool follow_clear(Channel& ch, const json& req, const json& reply);

// Peer side: the user an incoming image is announced to run as (that it
// runs as that user and nothing more is the restore stub's check,
// import_from(), and ghost::image::check_owner() again before it may run).
// The user an incoming image must run as, as this host knows it (its gid
// and groups from the user database); refused for a uid unknown here, and
// for root unless [limits] allow_root.
ghost::Result<ghost::Owner> incoming_owner(const Config& cfg, uid_t uid);

// The checkpoint server's store (ckserver.cpp): the bytes its images and
// job manifests take, and room for want more bytes within [checkpoint_server]
// max_bytes (with what sessions are writing now, Daemon::store_writing_)
// and the file system's free space.
std::uint64_t stored_bytes(const Config& cfg);
ghost::Result<void> check_room(const Daemon& d, std::uint64_t want);

struct Ops {
    // migrate.cpp
    static json local_move(Daemon& d, const json& req, const Client& who, const Emit& emit);
    static void peer_import(Daemon& d, Channel& ch, const json& req);
    static void peer_resolve(Daemon& d, Channel& ch, const json& req);
    static void peer_commit(Daemon& d, Channel& ch, const json& req);
    static bool resolve_dest(Daemon& d, const json& entry);
    static bool resolve_source(Daemon& d, const json& entry);
    static void recover_entry(Daemon& d, const json& entry);
    // ckserver.cpp
    static json local_checkpoint(Daemon& d, const json& req, const Client& who, const Emit& emit);
    static json local_images(Daemon& d, const json& req, const Client& who);
    static json local_restart(Daemon& d, const json& req, const Client& who, const Emit& emit);
    static void peer_store(Daemon& d, Channel& ch, const json& req);
    static void peer_images(Daemon& d, Channel& ch, const json& req);
    static void peer_fetch(Daemon& d, Channel& ch, const json& req);
    static void peer_restart(Daemon& d, Channel& ch, const json& req);
    // manifest.cpp
    static json manifest_here(Daemon& d, const json& req);
    static json local_manifest(Daemon& d, const json& req, const Client& who);
    static void peer_manifest(Daemon& d, Channel& ch, const json& req);
    // locate.cpp
    static json local_ps(Daemon& d, const json& req, const Client& who);
    // This host and its configured peers: the cluster as this migd knows it.
    static json local_hosts(Daemon& d);
    static json local_where(Daemon& d, const json& req, const Client& who);
    static json local_kill(Daemon& d, const json& req, const Client& who);
    // migrate or dup {"gid","to"}: forwarded to the host where gid runs,
    // which moves it as if its owner had asked there by pid.
    static json local_move_gid(Daemon& d, const json& req, const Client& who);
    static void peer_list(Daemon& d, Channel& ch, const json& req);
    static void peer_where(Daemon& d, Channel& ch, const json& req);
    static void peer_lookup(Daemon& d, Channel& ch, const json& req);
    static void peer_answer(Daemon& d, Channel& ch, const json& req);
    // sweep.cpp: which of the gids asked about this host has no entry for.
    static void peer_known(Daemon& d, Channel& ch, const json& req);
    // where or kill asked by a local client: answered straight from the
    // host where the chain of forwarding entries ends ("answer_to").
    static json lookup(Daemon& d, const std::string& op, const std::string& gid, json extra);
    static json route(Daemon& d, const std::string& op, const std::string& gid, const json& extra,
                      int hops);
};

} // namespace migd
