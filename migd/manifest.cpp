// SPDX-License-Identifier: GPL-2.0
// The checkpoint server's job manifests (bsprun --checkpoint-every): one
// small JSON document per job, stored beside the images with the same care
// (temporary name, fsync, rename, mode 0600) and the same owner rule: only
// the uid that stored it (or root) may read or replace it, since it holds
// the job's key. Documentation/migd-protocol.md, "Job manifests".
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <mutex>
#include <regex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "json_text.hpp"
#include "ops.hpp"

namespace migd {

namespace {

bool valid_job(const std::string& job) {
    static const std::regex re("[A-Za-z0-9][A-Za-z0-9._-]{0,127}");
    return std::regex_match(job, re);
}

} // namespace

json Ops::manifest_here(Daemon& d, const json& req) {
    const Config& cfg = d.config();
    if (cfg.server_dir.empty())
        return error_reply(fmt::format("{} is not a checkpoint server ([checkpoint_server] dir "
                                       "is empty)",
                                       cfg.host));
    const std::string job = req.value("job", "");
    const uid_t uid = req.value("uid", 0u);
    if (!valid_job(job))
        return error_reply(fmt::format("manifest: job name '{}' is not 1 to 128 letters, digits, "
                                       "'.', '_' or '-'",
                                       job));
    const std::string path = fmt::format("{}/{}.manifest", cfg.server_dir, job);
    // The owner check and the write as one: two first puts of a job at
    // once must not both find it free (the last would take another's job).
    static std::mutex mu;
    std::lock_guard lock(mu);
    std::optional<json> old;
    if (auto text = read_file(path)) {
        old = parse_bounded(*text);
        if (old->is_discarded())
            return error_reply(fmt::format("the manifest of job {} on {} is unreadable ({})", job,
                                           cfg.host, path));
        const uid_t owner = old->value("owner", 0u);
        if (uid != 0 && owner != uid)
            return error_reply(fmt::format("the manifest of job {} on {} belongs to uid {}: only "
                                           "its owner or root may {} it",
                                           job, cfg.host, owner,
                                           req.contains("put") ? "replace" : "read"));
    }
    if (!req.contains("put")) {
        if (!old)
            return error_reply(fmt::format("no manifest of job {} on {}", job, cfg.host));
        json r = *old;
        r["ok"] = true;
        return r;
    }
    if (!req["put"].is_object())
        return error_reply("manifest: \"put\" must be a JSON object");
    std::error_code ec;
    std::filesystem::create_directories(cfg.server_dir, ec);
    ::chmod(cfg.server_dir.c_str(), 0700);
    const json doc = {
        {"job", job}, {"owner", uid}, {"time_ms", now_ms()}, {"manifest", req["put"]}};
    const std::string text = json_text(doc) + "\n";
    // Within the store's quota, as images are: what the replacement adds,
    // reserved as the sessions reserve theirs (ckserver.cpp).
    std::error_code absent;
    const std::uintmax_t size = std::filesystem::file_size(path, absent);
    const std::uint64_t was = absent ? 0 : size;
    const std::uint64_t more = text.size() > was ? text.size() - was : 0;
    d.store_writing_.fetch_add(more);
    auto room = check_room(d, 0);
    auto w = room ? write_file_atomic(path, text, 0600) : ghost::Result<void>(room.error());
    d.store_writing_.fetch_sub(more);
    d.store_changes_.fetch_add(1); // the sessions' quota reads the store again
    if (!w)
        return error_reply(fmt::format("storing the manifest of job {} on {}: {}", job, cfg.host,
                                       w.error().what()));
    spdlog::info("checkpoint server: stored the manifest of job {} (uid {})", job, uid);
    return {{"ok", true}, {"job", job}, {"server", cfg.host}};
}

json Ops::local_manifest(Daemon& d, const json& req, const Client& who) {
    const std::string server = req.value("server", d.config().host);
    json ask = {{"op", "manifest"}, {"job", req.value("job", "")}, {"uid", who.uid}};
    if (req.contains("put"))
        ask["put"] = req["put"];
    if (server == d.config().host)
        return manifest_here(d, ask);
    auto r = d.ask(server, ask);
    return r ? *r : error_reply(r.error());
}

void Ops::peer_manifest(Daemon& d, Channel& ch, const json& req) {
    (void)send_json(ch, manifest_here(d, req));
}

} // namespace migd
