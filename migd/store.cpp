// SPDX-License-Identifier: GPL-2.0
#include "store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ghost/fd.hpp"
#include "json_text.hpp"

namespace migd {

using ghost::Error;
using ghost::Result;
using ghost::UniqueFd;

Error sys_error(const std::string& what) {
    const int err = errno;
    return Error::from_errno(err, fmt::format("{}: {}", what, std::strerror(err)));
}

Result<void> append_durably(int fd, const std::string& path, std::string_view lines) {
    struct stat st;
    if (::fstat(fd, &st) != 0)
        return sys_error(fmt::format("cannot stat {}", path));
    // After a line a crash cut short, these start on a line of their own.
    char tail = '\n';
    if (st.st_size > 0 && ::pread(fd, &tail, 1, st.st_size - 1) != 1)
        return sys_error(fmt::format("cannot read {}", path));
    const std::string text = tail == '\n' ? std::string(lines) : "\n" + std::string(lines);
    auto w = write_all(fd, std::as_bytes(std::span(text.data(), text.size())));
    if (w && ::fdatasync(fd) != 0)
        w = sys_error(fmt::format("cannot sync {}", path));
    if (!w) {
        // A part-written line must not run into the next one.
        (void)::ftruncate(fd, st.st_size);
        return Error::from_errno(w.error().code.value(),
                                 fmt::format("cannot write {}: {}", path, w.error().what()));
    }
    return {};
}

Result<void> make_dir(const std::string& path) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec)
        return Error::from_errno(ec.value(),
                                 fmt::format("cannot create {}: {}", path, ec.message()));
    ::chmod(path.c_str(), 0700);
    return {};
}

std::uint64_t now_ms() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
}

Result<std::optional<std::string>> read_file_if_any(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        if (errno == ENOENT)
            return std::optional<std::string>();
        return sys_error(fmt::format("cannot read {}", path));
    }
    std::string text;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return sys_error(fmt::format("cannot read {}", path));
        if (n == 0)
            return std::optional<std::string>(std::move(text));
        text.append(buf, static_cast<std::size_t>(n));
    }
}

std::optional<std::string> read_file(const std::string& path) {
    auto text = read_file_if_any(path);
    return text ? std::move(*text) : std::nullopt;
}

void sweep_temporaries(const std::string& dir) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.ends_with(".tmp") && e.is_regular_file(ec) &&
            std::filesystem::remove(e.path(), ec))
            spdlog::info("removed {}, left by a write a crash cut short", e.path().string());
    }
}

Result<void> write_file_atomic(const std::string& path, std::string_view data, int mode) {
    const std::string tmp = path + ".tmp";
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
    if (!fd)
        return sys_error(fmt::format("cannot create {}", tmp));
    if (auto w = write_all(fd.get(), std::as_bytes(std::span(data))); !w) {
        ::unlink(tmp.c_str());
        return Error::from_errno(w.error().code.value(),
                                 fmt::format("cannot write {}: {}", tmp, w.error().what()));
    }
    if (::fsync(fd.get()) != 0) {
        auto e = sys_error(fmt::format("cannot sync {}", tmp));
        ::unlink(tmp.c_str());
        return e;
    }
    fd.reset();
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        auto e = sys_error(fmt::format("cannot rename {} to {}", tmp, path));
        ::unlink(tmp.c_str());
        return e;
    }
    const std::string dir = std::filesystem::path(path).parent_path().string();
    UniqueFd d(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (d)
        ::fsync(d.get());
    return {};
}

std::optional<ProcStat> proc_stat(pid_t pid) {
    if (pid <= 0)
        return std::nullopt;
    auto stat = read_file(fmt::format("/proc/{}/stat", pid));
    if (!stat)
        return std::nullopt;
    const auto open = stat->find('(');
    const auto close = stat->rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 2 >= stat->size())
        return std::nullopt;
    ProcStat p;
    p.pid = pid;
    p.comm = stat->substr(open + 1, close - open - 1);
    std::istringstream rest(stat->substr(close + 2));
    std::string field;
    // Fields from 3 (state) on; start time is field 22.
    for (int i = 3; i <= 22 && rest >> field; ++i) {
        if (i == 3)
            p.state = field.empty() ? '?' : field[0];
        if (i == 22)
            p.starttime = std::strtoull(field.c_str(), nullptr, 10);
    }
    return p;
}

std::optional<ProcInfo> proc_info(pid_t pid) {
    auto s = proc_stat(pid);
    if (!s)
        return std::nullopt;
    ProcInfo p{std::move(*s)};
    struct stat st;
    if (::stat(fmt::format("/proc/{}", pid).c_str(), &st) != 0)
        return std::nullopt;
    auto status = read_file(fmt::format("/proc/{}/status", pid));
    p.uid = st.st_uid;
    p.proc_owner = st.st_uid;
    p.suid = st.st_uid;
    // The four ids of a "Uid:" or "Gid:" line (real, effective, saved, fs);
    // whether they are all the same.
    const auto ids_of = [&](const char* key, unsigned long(&v)[4]) {
        const auto at = status->find(key);
        if (at == std::string::npos)
            return false;
        std::istringstream in(status->substr(at + std::strlen(key), 64));
        if (!(in >> v[0] >> v[1] >> v[2] >> v[3]))
            return false;
        return v[1] == v[0] && v[2] == v[0] && v[3] == v[0];
    };
    if (status) {
        unsigned long uid[4] = {st.st_uid, st.st_uid, st.st_uid, st.st_uid}, gid[4] = {};
        const bool uids = ids_of("\nUid:", uid), gids = ids_of("\nGid:", gid);
        p.uid = static_cast<uid_t>(uid[0]);
        p.suid = static_cast<uid_t>(uid[2]);
        p.plain_ids = uids && gids;
        const auto cap = status->find("\nCapPrm:");
        p.cap_permitted = cap == std::string::npos
                              ? ~0ULL
                              : std::strtoull(status->c_str() + cap + 8, nullptr, 16);
    }
    return p;
}

bool proc_alive(pid_t pid, std::uint64_t starttime) {
    auto p = proc_stat(pid);
    return p && p->starttime == starttime && p->state != 'Z' && p->state != 'X';
}

ghost::UniqueFd pidfd_of(pid_t pid, std::uint64_t starttime) {
    ghost::UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!pidfd || !proc_alive(pid, starttime))
        return {};
    return pidfd;
}

Result<void> Journal::open(const std::string& state_dir) {
    dir_ = state_dir + "/journal";
    return make_dir(dir_);
}

namespace {

// An entry's file: one JSON line per state, the last whole one counts (a
// file of an older migd is one pretty-printed object). A last line cut
// short by a crash was never made durable, so never acted on: skipped.
std::optional<json> latest_state(const std::string& text) {
    auto whole = parse_bounded(text);
    if (!whole.is_discarded())
        return whole.is_object() ? std::optional<json>(std::move(whole)) : std::nullopt;
    std::optional<json> last;
    std::size_t at = 0;
    while (at < text.size()) {
        std::size_t nl = text.find('\n', at);
        if (nl == std::string::npos)
            nl = text.size();
        auto j = parse_bounded(text.substr(at, nl - at));
        if (!j.is_discarded() && j.is_object())
            last = std::move(j);
        at = nl + 1;
    }
    return last;
}

} // namespace

// The first state of an operation makes its file (temporary name, fsync,
// rename, fsync of the directory); each later one is a line appended and
// made durable with fdatasync: one flush instead of three, on the commit's
// path (a source's "committing", a destination's "ready").
bool Journal::valid_id(std::string_view id) {
    return !id.empty() && id.size() <= 200 && id.front() != '.' &&
           std::all_of(id.begin(), id.end(), [](char c) {
               return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                      c == '-';
           });
}

Result<void> Journal::put(const json& entry) {
    std::lock_guard lock(mu_);
    const std::string id = entry.at("id").get<std::string>();
    if (!valid_id(id))
        return Error::from_errno(EINVAL, fmt::format("not a journal entry id: \"{}\"", id));
    const std::string path = file_of(id);
    const std::string text = json_text(entry) + "\n";
    if (stuck_.contains(id))
        return Error::from_errno(EEXIST, fmt::format("journal entry {} was finished but its file "
                                                     "could not be removed",
                                                     path));
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC));
    if (!fd) {
        if (errno != ENOENT)
            return sys_error(fmt::format("cannot open {}", path));
        return write_file_atomic(path, text, 0600);
    }
    return append_durably(fd.get(), path, text);
}

void Journal::remove(const std::string& id) {
    if (!valid_id(id))
        return;
    std::lock_guard lock(mu_);
    const std::string path = file_of(id);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        // Forgotten by this migd all the same (removed() is asked again and
        // tries the unlink again); a restarted one would see it.
        stuck_.insert(id);
        spdlog::error("cannot remove finished journal entry {}: {}; migd ignores it from now on, "
                      "but remove it by hand before migd restarts",
                      path, std::strerror(errno));
    }
    UniqueFd d(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!d || ::fsync(d.get()) != 0)
        spdlog::warn("cannot flush the removal of journal entry {}: {}", path,
                     std::strerror(errno));
}

std::string Journal::file_of(const std::string& id) const {
    return fmt::format("{}/{}.json", dir_, id);
}

bool Journal::removed(const std::string& id) const {
    if (!stuck_.contains(id))
        return false;
    const std::string path = file_of(id);
    if (::unlink(path.c_str()) == 0 || errno == ENOENT) {
        stuck_.erase(id);
        spdlog::info("finished journal entry {} removed at last", path);
    }
    return true;
}

std::optional<json> Journal::get(const std::string& id) const {
    auto e = lookup(id);
    return e ? *e : std::nullopt;
}

Result<std::optional<json>> Journal::lookup(const std::string& id) const {
    if (!valid_id(id))
        return std::optional<json>();
    std::lock_guard lock(mu_);
    if (removed(id))
        return std::optional<json>();
    auto text = read_file_if_any(file_of(id));
    if (!text)
        return text.error();
    if (!*text)
        return std::optional<json>();
    return latest_state(**text);
}

std::vector<json> Journal::all() const {
    std::lock_guard lock(mu_);
    std::vector<json> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
        if (e.path().extension() != ".json" || removed(e.path().stem().string()))
            continue;
        auto text = read_file(e.path().string());
        if (!text)
            continue;
        auto j = latest_state(*text);
        if (j && j->contains("id"))
            out.push_back(std::move(*j));
    }
    return out;
}

json to_json(const Location& l) {
    return {{"gid", l.gid},   {"state", l.state},           {"host", l.host},
            {"pid", l.pid},   {"starttime", l.starttime},   {"uid", l.uid},
            {"comm", l.comm}, {"updated_ms", l.updated_ms}, {"exited_ms", l.exited_ms}};
}

Location location_from_json(const json& j) {
    Location l;
    l.gid = j.value("gid", "");
    l.state = j.value("state", "");
    l.host = j.value("host", "");
    l.pid = j.value("pid", 0);
    l.starttime = j.value("starttime", std::uint64_t{0});
    l.uid = j.value("uid", 0u);
    l.comm = j.value("comm", "");
    l.updated_ms = j.value("updated_ms", std::uint64_t{0});
    l.exited_ms = j.value("exited_ms", std::uint64_t{0});
    return l;
}

} // namespace migd
