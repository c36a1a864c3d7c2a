// SPDX-License-Identifier: GPL-2.0
// migd_client::call: connect, one JSON line out, progress lines and the
// final reply in.
#include "migd_client.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "ghost/fd.hpp"
#include "line_reader.hpp"

namespace ghost::migd_client {

using nlohmann::json;

namespace {

json error(std::string why) {
    return {{"ok", false}, {"error", std::move(why)}};
}

} // namespace

std::string_view default_socket() {
    if (const char* env = std::getenv("GHOST_MIGD_SOCKET"); env && *env)
        return env;
    return "/run/ghost/migd.sock";
}

json call(std::string_view socket, const json& req, const Progress& progress) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket.size() >= sizeof(addr.sun_path))
        return error(fmt::format("socket path too long: {}", socket));
    std::memcpy(addr.sun_path, socket.data(), socket.size());
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
        return error(fmt::format("cannot reach migd at {}: {} (is migd running? "
                                 "--migd-socket or $GHOST_MIGD_SOCKET name another)",
                                 socket, std::strerror(errno)));
    const std::string line = req.dump() + "\n";
    if (::send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(line.size()))
        return error(fmt::format("cannot talk to migd at {}: {}", socket, std::strerror(errno)));
    LineReader lines(fd.get());
    while (const auto line = lines.next()) {
        auto j = json::parse(*line, nullptr, false);
        if (j.is_discarded() || !j.is_object())
            return error(fmt::format("migd at {} sent a malformed reply", socket));
        if (j.contains("progress") && !j.contains("ok")) {
            if (progress)
                progress(j["progress"].value("done", std::uint64_t{0}),
                         j["progress"].value("total", std::uint64_t{0}));
            continue;
        }
        return j;
    }
    return error(fmt::format("migd at {} closed the connection without a reply", socket));
}

} // namespace ghost::migd_client
