// SPDX-License-Identifier: GPL-2.0
// migd's location table on disk: a snapshot (locations.json) and a log of
// the changes since (locations.log). An update appends one line and makes it
// durable with fdatasync, so its cost does not grow with the table (a table
// keeps every gid that passed through the host; writing it whole at each
// move cost 7 ms at 1000 entries and 44 ms at 10,000). Log lines:
//   {"set": LOCATION}   the entry for LOCATION's gid is now this
//   {"erase": GID}      the entry is gone
//   {"next": N}         gids are numbered from N on
// Replaying a log over the snapshot it was written after gives the table;
// replaying it over the next snapshot too (a crash between writing a
// snapshot and emptying the log) gives the same table but for shortcuts
// (hint()), which may be lost anyway.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>

#include <fmt/format.h>

#include "json_text.hpp"
#include "store.hpp"

namespace migd {

namespace {

using ghost::Error;
using ghost::Result;
using ghost::UniqueFd;

// The log is folded into a snapshot when it holds more records than this or
// than the table has entries, whichever is more: a snapshot's cost is then
// spread over at least as many updates as it writes entries.
constexpr std::size_t kLogRecordsBeforeSnapshot = 1024;

std::string line(const json& record) {
    return json_text(record) + "\n"; // dump() without indent writes no newline
}

} // namespace

Result<void> Locations::open(const std::string& state_dir, const std::string& host) {
    if (auto r = make_dir(state_dir); !r)
        return r;
    std::lock_guard lock(mu_);
    path_ = state_dir + "/locations.json";
    log_path_ = state_dir + "/locations.log";
    host_ = host;
    if (auto text = read_file(path_)) {
        auto j = parse_bounded(*text);
        if (j.is_discarded() || !j.is_object())
            return Error::from_errno(EBADMSG, fmt::format("{} is not a location table (JSON "
                                                          "object): move it away to start "
                                                          "afresh",
                                                          path_));
        next_ = j.value("next", std::uint64_t{1});
        for (const auto& e : j.value("entries", json::array()))
            map_[e.value("gid", "")] = location_from_json(e);
    }
    if (auto text = read_file(log_path_)) {
        std::istringstream in(*text);
        std::string l;
        for (unsigned n = 1; std::getline(in, l); n++) {
            const bool last = in.peek() == std::char_traits<char>::eof();
            auto r = parse_bounded(l);
            if (r.is_discarded() || !r.is_object()) {
                // Only the last line can be torn (a crash while it was
                // written): it was never made durable, so never answered.
                if (last)
                    break;
                return Error::from_errno(EBADMSG, fmt::format("{} is damaged at line {}: move "
                                                              "it away to start from {} alone",
                                                              log_path_, n, path_));
            }
            if (r.contains("set")) {
                const Location loc = location_from_json(r["set"]);
                map_[loc.gid] = loc;
            } else if (r.contains("erase")) {
                map_.erase(r.value("erase", ""));
            } else if (r.contains("next")) {
                next_ = std::max(next_, r.value("next", std::uint64_t{1}));
            }
        }
    }
    return compact_locked();
}

Locations::~Locations() {
    std::lock_guard lock(mu_);
    if (log_ && (log_records_ > 0 || !hinted_.empty()))
        (void)compact_locked();
}

// A new snapshot of the whole table (shortcuts included), then an empty log.
Result<void> Locations::compact_locked() {
    json entries = json::array();
    for (const auto& [gid, l] : map_)
        entries.push_back(to_json(l));
    const json j = {{"host", host_}, {"next", next_}, {"entries", entries}};
    if (auto w = write_file_atomic(path_, json_text(j, 1) + "\n", 0600); !w)
        return w;
    hinted_.clear();
    log_records_ = 0;
    if (!log_) {
        log_ = UniqueFd(
            ::open(log_path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600));
        if (!log_)
            return sys_error(fmt::format("cannot open {}", log_path_));
        return {};
    }
    // Not synced on its own: the next append's fdatasync makes the new size
    // durable, and a log replayed over this snapshot changes nothing.
    if (::ftruncate(log_.get(), 0) != 0)
        return sys_error(fmt::format("cannot empty {}", log_path_));
    return {};
}

// Shortcuts learnt since the last write, as log lines: they go with the next
// durable change, which pays for their flush.
std::string Locations::pending_hints_locked() {
    std::string out;
    for (const auto& gid : hinted_)
        if (const auto it = map_.find(gid); it != map_.end())
            out += line({{"set", to_json(it->second)}});
    hinted_.clear();
    return out;
}

Result<void> Locations::append_locked(const std::string& lines) {
    if (!log_)
        return Error::from_errno(EBADF, "the location table is not open");
    if (auto w = append_durably(log_.get(), log_path_, lines); !w)
        return w;
    log_records_ += static_cast<std::size_t>(std::count(lines.begin(), lines.end(), '\n'));
    // The update is durable; a snapshot that cannot be written now is tried
    // again at the next update (the log still holds everything).
    if (log_records_ > std::max(kLogRecordsBeforeSnapshot, map_.size()))
        (void)compact_locked();
    return {};
}

std::string Locations::new_gid() {
    std::lock_guard lock(mu_);
    const std::string gid = fmt::format("{}-{}", host_, next_++);
    (void)append_locked(line({{"next", next_}}));
    return gid;
}

Result<void> Locations::set(const Location& loc) {
    std::lock_guard lock(mu_);
    Location l = loc;
    l.updated_ms = now_ms();
    map_[l.gid] = l;
    hinted_.erase(l.gid);
    return append_locked(pending_hints_locked() + line({{"set", to_json(l)}}));
}

void Locations::hint(const Location& loc, const std::optional<Location>& seen) {
    std::lock_guard lock(mu_);
    const auto it = map_.find(loc.gid);
    if (it != map_.end() &&
        (it->second.state == "local" || !seen || it->second.updated_ms != seen->updated_ms ||
         it->second.host != seen->host))
        return;
    if (it == map_.end() && seen)
        return; // erased meanwhile
    Location l = loc;
    l.updated_ms = now_ms();
    map_[l.gid] = l;
    hinted_.insert(l.gid);
}

std::optional<Location> Locations::get(const std::string& gid) const {
    std::lock_guard lock(mu_);
    const auto it = map_.find(gid);
    if (it == map_.end())
        return std::nullopt;
    return it->second;
}

std::vector<Location> Locations::all() const {
    std::lock_guard lock(mu_);
    std::vector<Location> out;
    for (const auto& [gid, l] : map_)
        out.push_back(l);
    return out;
}

std::vector<Location> Locations::local() const {
    std::lock_guard lock(mu_);
    std::vector<Location> out;
    for (const auto& [gid, l] : map_)
        if (l.state == "local")
            out.push_back(l);
    return out;
}

std::optional<std::string> Locations::local_gid(pid_t pid, std::uint64_t starttime) const {
    std::lock_guard lock(mu_);
    for (const auto& [gid, l] : map_)
        if (l.state == "local" && l.pid == pid && l.starttime == starttime)
            return gid;
    return std::nullopt;
}

std::vector<std::string>
Locations::forget_exited(std::uint64_t keep_ms, const std::function<bool(const Location&)>& gone) {
    std::vector<Location> ended;
    for (auto& l : local())
        if (gone(l))
            ended.push_back(std::move(l));
    std::vector<std::string> erased;
    if (ended.empty())
        return erased;
    const std::uint64_t now = now_ms();
    std::lock_guard lock(mu_);
    std::string lines;
    for (const auto& e : ended) {
        const auto it = map_.find(e.gid);
        // Changed meanwhile (moved away, or a new process under this gid).
        if (it == map_.end() || it->second.state != "local" || it->second.pid != e.pid ||
            it->second.starttime != e.starttime)
            continue;
        Location& l = it->second;
        if (l.exited_ms == 0) {
            l.exited_ms = now;
            lines += line({{"set", to_json(l)}});
        } else if (now - std::min(now, l.exited_ms) >= keep_ms) {
            erased.push_back(l.gid);
            hinted_.erase(l.gid);
            map_.erase(it);
            lines += line({{"erase", e.gid}});
        }
    }
    if (!lines.empty())
        (void)append_locked(lines);
    return erased;
}

std::map<std::string, std::vector<Locations::Asked>> Locations::moved_to_ask(std::uint64_t keep_ms,
                                                                             std::size_t limit) {
    const std::uint64_t now = now_ms();
    const auto old = [&](std::uint64_t t) { return now - std::min(now, t) >= keep_ms; };
    std::map<std::string, std::vector<Asked>> by_host;
    std::size_t n = 0;
    std::lock_guard lock(mu_);
    // Marks of entries that went (erased) or changed (no longer moved).
    std::erase_if(asked_ms_, [&](const auto& a) {
        const auto it = map_.find(a.first);
        return it == map_.end() || it->second.state != "moved";
    });
    for (const auto& [gid, l] : map_) {
        if (n == limit)
            break;
        if (l.state != "moved" || !old(l.updated_ms))
            continue;
        auto [it, fresh] = asked_ms_.try_emplace(gid, now);
        if (!fresh && !old(it->second))
            continue;
        it->second = now;
        by_host[l.host].push_back({gid, l.updated_ms});
        n++;
    }
    return by_host;
}

std::vector<std::string> Locations::forget_moved(const std::string& host,
                                                 const std::vector<Asked>& asked) {
    std::vector<std::string> erased;
    std::lock_guard lock(mu_);
    std::string lines;
    for (const auto& a : asked) {
        const auto it = map_.find(a.gid);
        // Changed meanwhile: moved back here, or on to another host.
        if (it == map_.end() || it->second.state != "moved" || it->second.host != host ||
            it->second.updated_ms != a.updated_ms)
            continue;
        map_.erase(it);
        hinted_.erase(a.gid);
        asked_ms_.erase(a.gid);
        erased.push_back(a.gid);
        lines += line({{"erase", a.gid}});
    }
    if (!lines.empty())
        (void)append_locked(lines);
    return erased;
}

void Locations::erase(const std::string& gid) {
    std::lock_guard lock(mu_);
    map_.erase(gid);
    hinted_.erase(gid);
    asked_ms_.erase(gid);
    (void)append_locked(line({{"erase", gid}}));
}

} // namespace migd
