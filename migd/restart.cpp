// SPDX-License-Identifier: GPL-2.0
// Restarting an image of the checkpoint server on a host: the host fetches
// it from the server (or opens it, when it is the server) and imports it
// stopped; the copy runs once the whole image checked out.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "guarded.hpp"
#include "ops.hpp"

namespace migd {

using ghost::Error;
using ghost::Result;
using ghost::UniqueFd;

namespace {

// The image stream of `id`: a channel to the server, or, when this host is
// the server, a local pair fed by peer_fetch on a thread.
struct Fetch {
    std::unique_ptr<Channel> ch;
    std::thread feeder;
    std::unique_ptr<Channel> far;
    ~Fetch() {
        // Our end first: a feeder still writing (a restart refused before
        // it read the stream) gets EPIPE instead of waiting for ever.
        ch.reset();
        if (feeder.joinable())
            feeder.join();
    }
};

Result<json> restart_here(Daemon& d, const std::string& server, const std::string& id, uid_t uid) {
    const Config& cfg = d.config();
    Fetch f;
    json ask = {{"op", "fetch"}, {"id", id}, {"uid", uid}};
    if (server == cfg.host) {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            return Error::from_errno(errno, fmt::format("socketpair: {}", std::strerror(errno)));
        f.ch = plain_channel(UniqueFd(sv[0]));
        f.far = plain_channel(UniqueFd(sv[1]));
        f.feeder = std::thread([&d, &f, ask] {
            guarded("this host's image fetch", [&] { Ops::peer_fetch(d, *f.far, ask); });
            f.far.reset();
        });
    } else {
        auto ch = d.connect(server);
        if (!ch)
            return ch.error();
        f.ch = std::move(*ch);
        offer_clear(cfg, *f.ch, ask, true);
        if (auto s = send_json(*f.ch, ask); !s)
            return s.error();
    }
    auto meta = recv_json(*f.ch);
    if (!meta)
        return meta.error();
    if (!meta->value("ok", false))
        return Error::from_errno(EPERM, meta->value("error", "refused"));
    if (follow_clear(*f.ch, ask, *meta))
        spdlog::info("restart: image {} of {} comes in the clear ([tls] clear_images)", id, server);
    const uid_t owner = meta->value("owner", 0u);
    auto who = incoming_owner(cfg, owner);
    if (!who)
        return who.error();
    // Journaled with the stub's pid as soon as it exists, until the copy
    // runs with its gid: a migd that dies in between kills it when it
    // starts again (recovery's "receiving" destination), rather than leave
    // it stopped and unnamed for ever.
    json entry = {{"id", d.new_op_id()},  {"role", "dest"}, {"kind", "restart"},
                  {"state", "receiving"}, {"peer", server}, {"image_id", id}};
    const std::string jid = entry["id"];
    Daemon::Busy busy(d, jid);
    if (auto j = d.journal_.put(entry); !j)
        return j.error();
    struct Drop {
        Daemon& d;
        const std::string& id;
        ~Drop() { d.journal_.remove(id); }
    } drop{d, jid};
    auto im = import_from(d, *f.ch, *who, true, journal_stub(d, entry));
    if (!im)
        return im.error();
    maybe_crash("restart-after-import");
    // It runs as its recorded owner or not at all, whatever the stored
    // bytes or a clear stream say (the owner was checked above).
    d.adopt(im->pid);
    if (auto c = ghost::image::check_owner(im->image, *who); !c) {
        (void)kill_process(im->pid, im->starttime);
        return Error::from_errno(c.error().code.value(), fmt::format("image {} (owner uid {}): {}",
                                                                     id, owner, c.error().what()));
    }
    ::kill(im->pid, SIGCONT);
    Location l;
    l.gid = d.locations_.new_gid();
    l.state = "local";
    l.host = cfg.host;
    l.pid = im->pid;
    l.starttime = im->starttime;
    l.uid = owner;
    l.comm = meta->value("comm", "");
    (void)d.locations_.set(l);
    spdlog::info("restart: image {} of {} runs as pid {} ({})", id, server, im->pid, l.gid);
    return json{
        {"ok", true}, {"gid", l.gid}, {"host", cfg.host}, {"pid", im->pid}, {"bytes", im->bytes}};
}

} // namespace

json Ops::local_restart(Daemon& d, const json& req, const Client& who, const Emit&) {
    const Config& cfg = d.config();
    const std::string server = req.value("server", "");
    const std::string id = req.value("id", "");
    const std::string on = req.value("on", cfg.host);
    if (server != cfg.host && !cfg.peer(server))
        return error_reply(fmt::format("{} is not a peer of {}", server, cfg.host));
    if (on == cfg.host) {
        auto r = restart_here(d, server, id, who.uid);
        return r ? *r
                 : error_reply(fmt::format("restart of {} from {} failed: {}", id, server,
                                           r.error().what()));
    }
    if (!cfg.peer(on))
        return error_reply(fmt::format("{} is not a peer of {}", on, cfg.host));
    auto r = d.ask(on, {{"op", "restart"}, {"server", server}, {"id", id}, {"uid", who.uid}},
                   std::chrono::milliseconds(std::max(cfg.io_timeout_ms, 120000u)));
    return r ? *r : error_reply(r.error());
}

void Ops::peer_restart(Daemon& d, Channel& ch, const json& req) {
    auto r = restart_here(d, req.value("server", ""), req.value("id", ""), req.value("uid", 0u));
    (void)send_json(ch, r ? *r
                          : error_reply(fmt::format("restart on {} failed: {}", d.config().host,
                                                    r.error().what())));
}

} // namespace migd
