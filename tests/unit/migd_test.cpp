// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "control.hpp"
#include "ghost/fd.hpp"
#include "json_text.hpp"

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

// A request nested deeper than any of migd's is malformed: printing or
// copying it would recurse once per level (100,000 levels: a stack
// overflow, the daemon gone); and a reply holding bytes that are not UTF-8
// (a process name may) goes out with them replaced instead of throwing.
TEST(MigdControl, DeepRequestsAreMalformedAndRepliesAnyBytesArePrinted) {
    const std::string deep =
        R"({"op":"ping","x":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
    const auto r = migd::handle_request(deep, ctx);
    EXPECT_EQ(r.at("ok"), false);
    EXPECT_NE(r.at("error").get<std::string>().find("malformed"), std::string::npos);
    std::string within = R"({"op":"ping","x":)" + std::string(60, '[') + std::string(60, ']') + "}";
    EXPECT_EQ(migd::handle_request(within, ctx).at("ok"), true);
    const nlohmann::json odd = {{"ok", false}, {"error", std::string("process 1 (\xff\xfe)")}};
    std::string text;
    ASSERT_NO_THROW(text = migd::json_text(odd));
    EXPECT_NE(text.find("\xEF\xBF\xBD"), std::string::npos) << text; // U+FFFD
}

ghost::UniqueFd connect_to(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ghost::UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
        return {};
    return s;
}

// A migd of its own in a fresh directory: its socket, its pid.
struct Migd {
    std::filesystem::path dir;
    std::string socket;
    pid_t pid = -1;

    explicit Migd(const std::string& name, const std::string& config = "") {
        dir = std::filesystem::temp_directory_path() /
              ("migd-test-" + name + "-" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir);
        socket = (dir / "migd.sock").string();
        const std::string state = (dir / "state").string();
        const std::string toml = (dir / "migd.toml").string();
        std::vector<const char*> argv = {MIGD_PATH,    "--socket",           socket.c_str(),
                                         "--device",   "/nonexistent/ghost", "--state-dir",
                                         state.c_str()};
        if (!config.empty()) {
            std::ofstream(toml) << config;
            argv.insert(argv.begin() + 1, {"--config", toml.c_str()});
        }
        argv.push_back(nullptr);
        pid = ::fork();
        if (pid == 0) {
            ::execv(MIGD_PATH, const_cast<char* const*>(argv.data()));
            ::_exit(127);
        }
    }
    ~Migd() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
        std::filesystem::remove_all(dir);
    }
    // A connection once it listens (5 s at most).
    ghost::UniqueFd client() const {
        for (int i = 0; i < 500; ++i) {
            if (auto c = connect_to(socket))
                return c;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return {};
    }
};

// One request line and its answer ({"eof":true} when migd closed first).
nlohmann::json ask(int fd, const std::string& line) {
    const std::string req = line + "\n";
    (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    std::string reply;
    char c = 0;
    while (::recv(fd, &c, 1, 0) == 1 && c != '\n')
        reply.push_back(c);
    if (reply.empty())
        return {{"eof", true}};
    return nlohmann::json::parse(reply);
}

// The daemon itself: binds its socket owner-only, answers on it, and removes
// it on SIGTERM.
TEST(MigdDaemon, ServesSocketAndStopsCleanly) {
    Migd m("serve");
    ASSERT_GT(m.pid, 0);
    const pid_t pid = m.pid;
    const std::string path = m.socket;
    ghost::UniqueFd c = m.client();
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
    m.pid = -1;
    EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    EXPECT_FALSE(std::filesystem::exists(path));
}

// Every local client has a thread in migd: a user gets at most
// max_clients_per_user connections at once, everyone together max_clients,
// and a refused client is told which limit it met.
TEST(MigdDaemon, LimitsLocalClientsInAllAndPerUser) {
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root (a second user's connections)";
    Migd m("limits", "[limits]\nmax_clients = 3\nmax_clients_per_user = 1\n");
    ASSERT_GT(m.pid, 0);
    ghost::UniqueFd first = m.client();
    ASSERT_TRUE(first);
    EXPECT_EQ(ask(first.get(), R"({"op":"ping"})").value("ok", false), true);

    // nobody: one connection answered, the second refused.
    int report[2];
    ASSERT_EQ(::pipe(report), 0);
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(report[0]);
        if (::setgid(65534) != 0 || ::setuid(65534) != 0)
            ::_exit(2);
        ghost::UniqueFd one = connect_to(m.socket), two = connect_to(m.socket);
        const auto a = ask(one.get(), R"({"op":"ping"})");
        const auto b = ask(two.get(), R"({"op":"ping"})");
        const std::string out = a.dump() + "\n" + b.dump() + "\n";
        (void)!::write(report[1], out.data(), out.size());
        ::pause(); // hold both until the parent kills it
        ::_exit(0);
    }
    ::close(report[1]);
    std::string got;
    char buf[512];
    while (std::count(got.begin(), got.end(), '\n') < 2) {
        const ssize_t n = ::read(report[0], buf, sizeof buf);
        ASSERT_GT(n, 0) << got;
        got.append(buf, static_cast<std::size_t>(n));
    }
    const auto nl = got.find('\n');
    EXPECT_EQ(nlohmann::json::parse(got.substr(0, nl)).value("ok", false), true) << got;
    const auto refused = nlohmann::json::parse(got.substr(nl + 1, got.size() - nl - 2));
    EXPECT_EQ(refused.value("ok", true), false) << got;
    EXPECT_NE(refused.value("error", "").find("uid 65534 has 1 connections"), std::string::npos)
        << got;
    EXPECT_NE(refused.value("error", "").find("max_clients_per_user"), std::string::npos) << got;

    // Root has no limit of its own, but all together stop at 3: root's
    // first, nobody's one, and this one.
    ghost::UniqueFd second = m.client();
    EXPECT_EQ(ask(second.get(), R"({"op":"ping"})").value("ok", false), true);
    ghost::UniqueFd third = m.client();
    const auto full = ask(third.get(), R"({"op":"ping"})");
    EXPECT_EQ(full.value("ok", true), false) << full.dump();
    EXPECT_NE(full.value("error", "").find("max_clients"), std::string::npos) << full.dump();

    // A client that leaves makes room (its thread ends, then migd reaps it).
    second.reset();
    bool answered = false;
    for (int i = 0; i < 100 && !answered; ++i) {
        ghost::UniqueFd again = m.client();
        answered = ask(again.get(), R"({"op":"ping"})").value("ok", false);
        if (!answered)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(answered) << "no room after a client left";
    ::close(report[0]);
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
}

} // namespace
