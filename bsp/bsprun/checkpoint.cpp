// SPDX-License-Identifier: GPL-2.0
// JobCheckpointer, the manifest, restore_vps (see checkpoint.hpp).
#include "checkpoint.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "link.hpp"
#include "migd_client.hpp"

namespace ghost::bsp {

using nlohmann::json;

namespace {

std::string refused(const json& r) {
    return r.value("error", "refused without a reason");
}

} // namespace

json Manifest::to_json() const {
    json imgs = json::array();
    for (const auto& i : images)
        imgs.push_back({{"id", i.id}, {"host", i.host}, {"gid", i.gid}, {"bytes", i.bytes}});
    return {{"format", "ghost-bsp-manifest-1"},
            {"job", job},
            {"key", key_hex},
            {"nprocs", nprocs},
            {"program", program},
            {"checkpoint", number},
            {"superstep", hub.superstep},
            {"tagsize", hub.tagsize},
            {"job_dir", job_dir},
            {"home", home},
            {"hub_address", hub_address},
            {"hosts", hosts},
            {"images", imgs}};
}

Result<Manifest> Manifest::from_json(const json& j) {
    try {
        if (j.value("format", "") != "ghost-bsp-manifest-1")
            return Error::from_errno(
                EINVAL, fmt::format("not a bsprun manifest (format '{}')", j.value("format", "")));
        Manifest m;
        m.job = j.at("job").get<std::string>();
        m.key_hex = j.at("key").get<std::string>();
        m.nprocs = j.at("nprocs").get<int>();
        m.program = j.at("program").get<std::vector<std::string>>();
        m.number = j.at("checkpoint").get<std::uint64_t>();
        m.hub.superstep = j.at("superstep").get<std::uint64_t>();
        m.hub.tagsize = j.at("tagsize").get<std::int64_t>();
        m.job_dir = j.at("job_dir").get<std::string>();
        m.home = j.at("home").get<std::string>();
        m.hub_address = j.at("hub_address").get<std::string>();
        m.hosts = j.at("hosts").get<std::vector<std::string>>();
        for (const auto& i : j.at("images"))
            m.images.push_back({i.at("id").get<std::string>(), i.at("host").get<std::string>(),
                                i.value("gid", ""), i.value("bytes", std::uint64_t{0})});
        if (m.nprocs < 1 || m.images.size() != static_cast<std::size_t>(m.nprocs))
            return Error::from_errno(EINVAL, fmt::format("the manifest names {} images for {} "
                                                         "VPs",
                                                         m.images.size(), m.nprocs));
        return m;
    } catch (const std::exception& e) {
        return Error::from_errno(EINVAL, fmt::format("malformed manifest: {}", e.what()));
    }
}

Result<Manifest> fetch_manifest(const std::string& home_socket, const std::string& server,
                                const std::string& job) {
    const json r =
        migd_client::call(home_socket, {{"op", "manifest"}, {"server", server}, {"job", job}});
    if (!r.value("ok", false))
        return Error::from_errno(ENOENT, fmt::format("migd ({}): manifest of job {} on {}: {}",
                                                     home_socket, job, server, refused(r)));
    if (!r.contains("manifest"))
        return Error::from_errno(EINVAL, "migd answered a manifest without its document");
    return Manifest::from_json(r["manifest"]);
}

JobCheckpointer::JobCheckpointer(HostsMover& mover, std::string server, unsigned every,
                                 Manifest base)
    : mover_(mover), server_(std::move(server)), every_(every), last_(std::move(base)) {}

bool JobCheckpointer::due(std::uint64_t superstep) {
    // Barrier b = superstep + 1; the first one places the VPs.
    return every_ > 0 && superstep >= 1 && (superstep + 1) % every_ == 0;
}

Result<std::uint64_t> JobCheckpointer::take(const HubState& st, std::span<const pid_t> pids,
                                            Manifest& m) {
    // The VPs of each host in one request to that host's migd.
    std::map<std::string, std::vector<int>> by_host;
    for (int v = 0; v < m.nprocs; ++v)
        by_host[mover_.place(v).host].push_back(v);
    std::uint64_t bytes = 0;
    for (const auto& [host, vps] : by_host) {
        const std::string sock = mover_.socket_of(host);
        if (sock.empty())
            return Error::from_errno(EHOSTUNREACH,
                                     fmt::format("bsprun knows no control socket of {}'s migd "
                                                 "(--migd-sockets)",
                                                 host));
        json list = json::array();
        for (int v : vps)
            list.push_back(pids[static_cast<std::size_t>(v)]);
        const json r = migd_client::call(
            sock,
            {{"op", "checkpoint"}, {"pids", list}, {"server", server_}, {"leave_running", true}});
        // Record what was stored, even on a failure, so that it is removed.
        const json& imgs = r.contains("images") ? r["images"] : json::array();
        for (std::size_t i = 0; i < imgs.size() && i < vps.size(); ++i)
            if (imgs[i].value("ok", false)) {
                VpImage& im = m.images[static_cast<std::size_t>(vps[i])];
                im = {imgs[i].value("id", ""), host, mover_.place(vps[i]).gid,
                      imgs[i].value("bytes", std::uint64_t{0})};
                bytes += im.bytes;
            }
        if (!r.value("ok", false))
            return Error::from_errno(
                EIO, fmt::format("migd on {} ({}): checkpoint: {}", host, sock, refused(r)));
    }
    m.hub = st;
    const json put = migd_client::call(
        mover_.home_socket(),
        {{"op", "manifest"}, {"server", server_}, {"job", m.job}, {"put", m.to_json()}});
    if (!put.value("ok", false))
        return Error::from_errno(
            EIO, fmt::format("storing the manifest on {}: {}", server_, refused(put)));
    return bytes;
}

void JobCheckpointer::checkpoint(const HubState& st, std::span<const pid_t> pids) {
    const auto t0 = std::chrono::steady_clock::now();
    Manifest m = last_;
    m.number = last_.number + 1;
    m.images.assign(static_cast<std::size_t>(m.nprocs), {});
    const std::uint64_t ended = st.superstep - 1;
    auto r = take(st, pids, m);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    if (!r) {
        std::fprintf(stderr,
                     "bsprun: checkpoint %llu at superstep %llu failed: %s; checkpoint %llu "
                     "stays the last complete one\n",
                     static_cast<unsigned long long>(m.number),
                     static_cast<unsigned long long>(ended), r.error().what().c_str(),
                     static_cast<unsigned long long>(last_.number));
        remove_images(m.images);
        return;
    }
    std::fprintf(stderr,
                 "bsprun: checkpoint %llu at superstep %llu: %d images on %s (%llu bytes, %lld "
                 "ms)\n",
                 static_cast<unsigned long long>(m.number), static_cast<unsigned long long>(ended),
                 m.nprocs, server_.c_str(), static_cast<unsigned long long>(*r),
                 static_cast<long long>(ms));
    if (last_.number > 0 && last_.images.size() == m.images.size())
        remove_images(last_.images); // the new manifest no longer names them
    last_ = std::move(m);
}

void JobCheckpointer::remove_images(const std::vector<VpImage>& images) {
    for (const auto& i : images)
        if (!i.id.empty())
            (void)migd_client::call(mover_.home_socket(),
                                    {{"op", "images"}, {"server", server_}, {"rm", i.id}});
}

Result<void> check_server(const std::string& home_socket, const std::string& server) {
    const json r = migd_client::call(home_socket, {{"op", "images"}, {"server", server}});
    if (!r.value("ok", false))
        return Error::from_errno(EHOSTUNREACH,
                                 fmt::format("the checkpoint server {} (asked through migd at "
                                             "{}): {}",
                                             server, home_socket, refused(r)));
    return {};
}

bool hub_answers(const Manifest& m) {
    const auto colon = m.hub_address.rfind(':');
    sockaddr_in a{};
    a.sin_family = AF_INET;
    if (colon == std::string::npos ||
        ::inet_pton(AF_INET, m.hub_address.substr(0, colon).c_str(), &a.sin_addr) != 1)
        return false;
    a.sin_port = htons(static_cast<std::uint16_t>(std::atoi(m.hub_address.c_str() + colon + 1)));
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const timeval limit{2, 0}; // connect(2) and the handshake honour it
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    if (!fd || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
        return false;
    auto key = wire::key_from_hex(m.key_hex);
    auto ctx = key ? wire::TlsContext::make(wire::TlsContext::Role::Client, *key)
                   : Result<wire::TlsContext>(key.error());
    return ctx && wire::tls_connect(*ctx, std::move(fd)).has_value();
}

Result<std::vector<pid_t>> restore_vps(HostsMover& mover, const Manifest& m,
                                       const std::string& server,
                                       const std::vector<std::string>& hosts) {
    // Old processes of the job (left running by the checkpoint, or still
    // waiting detached) must not meet the new hub: kill those migd knows.
    for (const auto& i : m.images)
        if (!i.gid.empty())
            (void)migd_client::call(mover.home_socket(),
                                    {{"op", "kill"}, {"gid", i.gid}, {"signal", SIGKILL}});
    std::vector<pid_t> pids;
    for (int v = 0; v < m.nprocs; ++v) {
        const VpImage& im = m.images[static_cast<std::size_t>(v)];
        const std::string& on = hosts[static_cast<std::size_t>(v) % hosts.size()];
        const json r =
            migd_client::call(mover.home_socket(),
                              {{"op", "restart"}, {"server", server}, {"id", im.id}, {"on", on}});
        if (!r.value("ok", false)) {
            for (int u = 0; u < v; ++u)
                mover.kill(u, pids[static_cast<std::size_t>(u)]);
            return Error::from_errno(EIO, fmt::format("restarting vp {} from image {} of {} on "
                                                      "{}: {}",
                                                      v, im.id, server, on, refused(r)));
        }
        Place p{r.value("host", on), r.value("pid", -1), r.value("gid", "")};
        std::fprintf(stderr, "bsprun: vp %d restarted on %s pid %d from image %s\n", v,
                     p.host.c_str(), p.pid, im.id.c_str());
        pids.push_back(p.pid);
        mover.set_place(v, std::move(p));
    }
    return pids;
}

std::vector<std::string> hosts_up(HostsMover& mover, const std::vector<std::string>& hosts) {
    return hosts_up(hosts, [&](const std::string& h) { return mover.socket_of(h); });
}

std::vector<std::string> hosts_up(const std::vector<std::string>& hosts,
                                  const std::function<std::string(const std::string&)>& socket_of) {
    std::vector<std::string> up;
    for (const auto& h : hosts) {
        const std::string sock = socket_of(h);
        if (sock.empty() || migd_client::call(sock, {{"op", "ping"}}).value("ok", false))
            up.push_back(h);
    }
    return up;
}

} // namespace ghost::bsp
