// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "control.hpp"
#include "ghost/fd.hpp"

namespace {

const migd::Context ctx{"/nonexistent/ghost"};

TEST(MigdControl, PingAnswersWithVersion) {
    const auto r = migd::handle_request(R"({"op":"ping"})", ctx);
    EXPECT_EQ(r.at("ok"), true);
    EXPECT_EQ(r.at("daemon"), "migd");
    EXPECT_FALSE(r.at("version").get<std::string>().empty());
}

TEST(MigdControl, EngineFallsBackToTheUserEngineWithoutModule) {
    const auto r = migd::handle_request(R"({"op":"engine"})", ctx);
    EXPECT_EQ(r.at("ok"), true) << r.dump();
    EXPECT_EQ(r.at("engine"), "user") << r.dump();
}

TEST(MigdControl, MalformedAndUnknownRequestsAreErrors) {
    for (const char* bad : {"", "{", "[1,2]", R"({"op":3})", R"({"noop":"ping"})"}) {
        const auto r = migd::handle_request(bad, ctx);
        EXPECT_EQ(r.at("ok"), false) << bad;
        EXPECT_NE(r.at("error").get<std::string>().find("malformed"), std::string::npos) << bad;
    }
    const auto r = migd::handle_request(R"({"op":"fly"})", ctx);
    EXPECT_EQ(r.at("ok"), false);
    EXPECT_NE(r.at("error").get<std::string>().find("unknown op"), std::string::npos);
}

// The daemon itself: binds its socket owner-only, answers on it, and removes
// it on SIGTERM.
TEST(MigdDaemon, ServesSocketAndStopsCleanly) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("migd-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "migd.sock").string();

    const pid_t pid = ::fork();
    if (pid == 0) {
        const std::string state = (dir / "state").string();
        ::execl(MIGD_PATH, MIGD_PATH, "--socket", path.c_str(), "--device", "/nonexistent/ghost",
                "--state-dir", state.c_str(), nullptr);
        ::_exit(127);
    }
    ASSERT_GT(pid, 0);

    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ghost::UniqueFd c;
    for (int i = 0; i < 500 && !c; ++i) {
        ghost::UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0)
            c = std::move(s);
        else
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(c) << "migd did not start listening on " << path;

    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    // Anyone may connect: each operation checks the caller's uid (SO_PEERCRED).
    EXPECT_EQ(st.st_mode & 0777, 0666u);

    const std::string req = "{\"op\":\"ping\"}\n{\"op\":\"nope\"}\n";
    ASSERT_EQ(::send(c.get(), req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
    std::string reply;
    char buf[512];
    while (std::count(reply.begin(), reply.end(), '\n') < 2) {
        const ssize_t n = ::recv(c.get(), buf, sizeof(buf), 0);
        ASSERT_GT(n, 0);
        reply.append(buf, static_cast<std::size_t>(n));
    }
    const auto nl = reply.find('\n');
    EXPECT_EQ(nlohmann::json::parse(reply.substr(0, nl)).at("daemon"), "migd");
    EXPECT_EQ(nlohmann::json::parse(reply.substr(nl + 1)).at("ok"), false);

    ASSERT_EQ(::kill(pid, SIGTERM), 0);
    int ws = 0;
    ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
    EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    EXPECT_FALSE(std::filesystem::exists(path));
    std::filesystem::remove_all(dir);
}

} // namespace
