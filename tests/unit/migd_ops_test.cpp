// SPDX-License-Identifier: GPL-2.0
// migd's cluster operations natively, in one process: several Daemons, each
// with its own state directory, joined by socketpairs (plain channels
// instead of TLS; tests/cluster runs the real daemons with mutual TLS in
// network namespaces). The processes moved are real: ghost-counter workers
// exported and restored by the user engine.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "ops.hpp"
#include "store.hpp"

namespace {

using namespace std::chrono_literals;
using migd::json;
namespace fs = std::filesystem;

constexpr uid_t nobody = 65534;

// Hosts h1..hN in one process; connect(to) makes a socketpair and serves
// the far end on a thread of the destination daemon.
class Net {
  public:
    // tweak: changes each host's config before its migd starts.
    explicit Net(int n, const std::function<void(migd::Config&)>& tweak = {}) {
        root_ = fs::temp_directory_path() / ("migd-ops-" + std::to_string(::getpid()));
        fs::create_directories(root_);
        for (int i = 1; i <= n; ++i) {
            migd::Config c;
            c.host = fmt::format("h{}", i);
            c.state_dir = (root_ / c.host / "state").string();
            c.server_dir = (root_ / c.host / "images").string();
            c.engine = "user";
            c.io_timeout_ms = 5000;
            c.source = "test";
            for (int j = 1; j <= n; ++j)
                if (j != i)
                    c.peers.push_back({fmt::format("h{}", j), "127.0.0.1", 1});
            if (tweak)
                tweak(c);
            auto d = std::make_unique<migd::Daemon>(c, nullptr);
            d->set_connector(
                [this, from = c.host](const std::string& to) { return link(from, to); });
            hosts_[c.host] = std::move(d);
        }
        for (auto& [name, d] : hosts_)
            EXPECT_TRUE(d->start().has_value()) << name;
    }
    ~Net() {
        for (auto& [name, d] : hosts_)
            d->stop();
        std::lock_guard lock(mu_);
        for (auto& t : threads_)
            t.join();
        std::error_code ec;
        fs::remove_all(root_, ec);
    }
    migd::Daemon& operator[](const std::string& h) { return *hosts_.at(h); }
    void cut(const std::string& h) { down_.push_back(h); }
    // Connections from one host to another fail; the other way still works.
    void cut_link(const std::string& from, const std::string& to) {
        std::lock_guard lock(mu_);
        cut_links_.emplace_back(from, to);
    }
    // Connections made so far (each would be a TCP and TLS handshake).
    int connections() {
        std::lock_guard lock(mu_);
        return int(far_.size());
    }
    // Every connection's serving end hangs up, as when the peer restarts.
    void hang_up() {
        std::lock_guard lock(mu_);
        for (auto& fd : far_)
            ::shutdown(fd.get(), SHUT_RDWR);
    }
    fs::path root() const { return root_; }
    // Connections tried to host (also those that found it cut).
    int attempts(const std::string& host) {
        std::lock_guard lock(mu_);
        return attempts_[host];
    }

  private:
    ghost::Result<std::unique_ptr<migd::Channel>> link(const std::string& from,
                                                       const std::string& to) {
        if (from == to) // as the real connector: a host is not its own peer
            return ghost::Error::from_errno(EINVAL, to + " is not a peer of " + from);
        {
            std::lock_guard lock(mu_);
            ++attempts_[to];
        }
        for (const auto& d : down_)
            if (d == to || d == from)
                return ghost::Error::from_errno(EHOSTUNREACH, to + " is unreachable");
        {
            std::lock_guard lock(mu_);
            for (const auto& [f, t] : cut_links_)
                if (f == from && t == to)
                    return ghost::Error::from_errno(EHOSTUNREACH,
                                                    to + " is unreachable from " + from);
        }
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            return ghost::Error::from_errno(errno, "socketpair");
        auto near = migd::plain_channel(ghost::UniqueFd(sv[0]), to);
        near->set_timeout(5s);
        auto far = migd::plain_channel(ghost::UniqueFd(sv[1]), from);
        far->set_timeout(5s);
        std::lock_guard lock(mu_);
        far_.emplace_back(::fcntl(sv[1], F_DUPFD_CLOEXEC, 0));
        threads_.emplace_back([d = hosts_.at(to).get(), ch = std::move(far)]() mutable {
            d->serve_peer(std::move(ch));
        });
        return near;
    }
    fs::path root_;
    std::map<std::string, std::unique_ptr<migd::Daemon>> hosts_;
    std::mutex mu_;
    std::vector<std::thread> threads_;
    std::vector<ghost::UniqueFd> far_;
    std::vector<std::string> down_;
    std::vector<std::pair<std::string, std::string>> cut_links_;
    std::map<std::string, int> attempts_;
};

// A ghost-counter writing "N pid=P" lines to a file every 10 ms.
struct Counter {
    pid_t pid = -1;
    std::string out;
    // pad: bytes of environment (in 100 KB variables) the worker carries on
    // its stack, to make its image that much larger.
    Counter(const fs::path& dir, bool pipe_stdout = false, std::size_t pad = 0) {
        out = (dir /
               ("counter-" + std::to_string(::getpid()) + "-" + std::to_string(seq_++) + ".txt"))
                  .string();
        // The worker runs as nobody: a user's own process (root-owned ones
        // move only where [limits] allow_root says so).
        {
            const int f = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            EXPECT_EQ(::fchown(f, nobody, nobody), 0);
            ::close(f);
        }
        int p[2] = {-1, -1};
        if (pipe_stdout) {
            EXPECT_EQ(::pipe(p), 0);
        }
        std::vector<std::string> env;
        for (std::size_t i = 0; i * 100'000 < pad; ++i)
            env.push_back(fmt::format("PAD{}=", i) + std::string(100'000, 'x'));
        std::vector<char*> envp;
        for (auto& e : env)
            envp.push_back(e.data());
        envp.push_back(nullptr);
        pid = ::fork();
        if (pid == 0) {
            ::setsid();
            if (::setgroups(0, nullptr) != 0 || ::setgid(nobody) != 0 || ::setuid(nobody) != 0)
                ::_exit(126);
            const int o =
                pipe_stdout ? p[1] : ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            const int n = ::open("/dev/null", O_RDWR);
            ::dup2(n, 0);
            ::dup2(o, 1);
            ::dup2(o, 2);
            ::close_range(3, ~0u, 0);
            ::execle(COUNTER_PATH, "ghost-counter", "10", nullptr, envp.data());
            ::_exit(127);
        }
        if (pipe_stdout) {
            ::close(p[1]);
            pipe_rd = p[0];
        }
        std::this_thread::sleep_for(100ms);
    }
    ~Counter() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
        if (pipe_rd >= 0)
            ::close(pipe_rd);
    }
    // The last line: its count and pid.
    std::pair<long, pid_t> last() const {
        std::ifstream f(out);
        std::string line, prev;
        while (std::getline(f, line))
            if (!line.empty())
                prev = line;
        long n = -1;
        int p = 0;
        std::sscanf(prev.c_str(), "%ld pid=%d", &n, &p);
        return {n, p};
    }
    // Whether the counts in the file are 0,1,2,... without a gap or repeat.
    bool continuous() const {
        std::ifstream f(out);
        std::string line;
        long want = 0;
        while (std::getline(f, line)) {
            long n = -1;
            int p = 0;
            if (std::sscanf(line.c_str(), "%ld pid=%d", &n, &p) != 2 || n != want)
                return false;
            ++want;
        }
        return want > 0;
    }
    int pipe_rd = -1;
    static inline int seq_ = 0;
};

bool alive(pid_t pid) {
    auto p = migd::proc_info(pid);
    return p && p->state != 'Z';
}

// Waits until cond holds, up to 5 s.
template <class F> bool eventually(F cond) {
    for (int i = 0; i < 100; ++i) {
        if (cond())
            return true;
        std::this_thread::sleep_for(50ms);
    }
    return cond();
}

const migd::Client root{0, 1};
const migd::Client user{nobody, 1};

// Moves the counter from h1 to h2 as its owner; once it moved, the original
// (our child) is reaped. Returns migd's reply.
json move_to_h2(Net& net, Counter& c) {
    json r = net["h1"].local({{"op", "migrate"}, {"pid", c.pid}, {"to", "h2"}}, user, {});
    if (r.value("ok", false)) {
        ::waitpid(c.pid, nullptr, 0);
        c.pid = -1;
    }
    return r;
}

TEST(MigdOps, MigrateMovesTheProcessAndItContinues) {
    Net net(2);
    Counter c(net.root());
    const auto before = c.last();
    ASSERT_GE(before.first, 0);
    const json r = net["h1"].local({{"op", "migrate"}, {"pid", c.pid}, {"to", "h2"}}, user, {});
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    const pid_t np = r["pid"];
    EXPECT_EQ(r["host"], "h2");
    // The original is gone (reaped: it is our child), the copy counts on.
    int status = 0;
    ASSERT_EQ(::waitpid(c.pid, &status, 0), c.pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    c.pid = -1;
    ASSERT_TRUE(eventually([&] { return c.last().second == np; })) << c.last().second;
    std::this_thread::sleep_for(200ms);
    EXPECT_TRUE(c.continuous());
    EXPECT_GT(c.last().first, before.first);
    // Location table: h1 forwards to h2, h2 has it locally; where from h1.
    const json w = net["h1"].local({{"op", "where"}, {"gid", r["gid"]}}, root, {});
    EXPECT_EQ(w.value("host", ""), "h2") << w.dump();
    EXPECT_EQ(w.value("pid", 0), np);
    EXPECT_EQ(w.value("state", ""), "running");
    const json k =
        net["h1"].local({{"op", "kill"}, {"gid", r["gid"]}, {"signal", SIGKILL}}, user, {});
    EXPECT_TRUE(k.value("ok", false)) << k.dump();
    EXPECT_TRUE(eventually([&] { return !alive(np); }));
}

// The soak's 54,561st migration found its process dying: the destination's
// resolver had read the journal entry of the migration before it, just before
// the commit came; once the commit was done it asked the source, which had
// dropped its record ("aborted"), and killed the running copy. Here that
// late resolver runs on purpose, with the entry as it was while ready.
TEST(MigdOps, ALateResolverLeavesACommittedCopyRunning) {
    Net net(2);
    Counter c(net.root());
    const json r = move_to_h2(net, c);
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    const pid_t np = r["pid"];
    ASSERT_TRUE(eventually([&] { return c.last().second == np; }));
    const auto info = migd::proc_info(np);
    ASSERT_TRUE(info.has_value());
    const json stale = {{"id", "h1.1.1"},
                        {"role", "dest"},
                        {"kind", "migrate"},
                        {"state", "ready"},
                        {"peer", "h1"},
                        {"gid", r["gid"]},
                        {"pid", np},
                        {"uid", nobody},
                        {"comm", "ghost-counter"},
                        {"starttime", info->starttime}};
    migd::Ops::resolve_dest(net["h2"], stale);
    std::this_thread::sleep_for(200ms);
    EXPECT_TRUE(alive(np)) << "the late resolver killed the committed copy";
    const auto before = c.last().first;
    std::this_thread::sleep_for(300ms);
    EXPECT_GT(c.last().first, before) << "the copy does not count on";
    ::kill(np, SIGKILL);
}

TEST(MigdOps, DuplicateLeavesTheOriginalRunning) {
    Net net(2);
    Counter c(net.root());
    const json r = net["h1"].local({{"op", "dup"}, {"pid", c.pid}, {"to", "h2"}}, user, {});
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    const pid_t np = r["pid"];
    EXPECT_TRUE(alive(c.pid));
    EXPECT_TRUE(eventually([&] { return alive(np) && migd::proc_info(np)->state != 'T'; }));
    const json ps = net["h1"].local({{"op", "ps"}}, root, {});
    bool listed = false;
    for (const auto& p : ps["processes"])
        listed = listed || (p["pid"] == np && p["host"] == "h2" && p["state"] == "running");
    EXPECT_TRUE(listed) << ps.dump();
    ::kill(np, SIGKILL);
}

TEST(MigdOps, CheckpointServerStoresListsRestartsAndRemoves) {
    Net net(3);
    Counter a(net.root()), b(net.root());
    const json r = net["h1"].local({{"op", "checkpoint"},
                                    {"pids", {a.pid, b.pid}},
                                    {"server", "h3"},
                                    {"schedule", "combined"}},
                                   user, {});
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    ASSERT_EQ(r["images"].size(), 2u);
    for (Counter* c : {&a, &b}) {
        ::waitpid(c->pid, nullptr, 0); // killed after its image was stored
        c->pid = -1;
    }
    const json list = net["h2"].local({{"op", "images"}, {"server", "h3"}}, root, {});
    ASSERT_TRUE(list.value("ok", false)) << list.dump();
    EXPECT_EQ(list["images"].size(), 2u);
    const std::string id = r["images"][0]["id"];
    const auto before = a.last();
    const json rs =
        net["h1"].local({{"op", "restart"}, {"server", "h3"}, {"id", id}, {"on", "h2"}}, user, {});
    ASSERT_TRUE(rs.value("ok", false)) << rs.dump();
    EXPECT_EQ(rs["host"], "h2");
    const pid_t np = rs["pid"];
    EXPECT_TRUE(eventually([&] { return a.last().first > before.first + 3; }));
    EXPECT_TRUE(a.continuous());
    ::kill(np, SIGKILL);
    // Only the owner or root may remove; root removes.
    const json no = net["h1"].local({{"op", "images"}, {"server", "h3"}, {"rm", id}},
                                    migd::Client{4321, 1}, {});
    EXPECT_FALSE(no.value("ok", true));
    EXPECT_NE(no.value("error", "").find("only its owner or root"), std::string::npos) << no.dump();
    const json rm = net["h1"].local({{"op", "images"}, {"server", "h3"}, {"rm", id}}, root, {});
    EXPECT_TRUE(rm.value("ok", false)) << rm.dump();
    const json after = net["h1"].local({{"op", "images"}, {"server", "h3"}}, root, {});
    EXPECT_EQ(after["images"].size(), 1u);
}

// A checkpoint server that died while storing: what its journal says was
// never announced ("receiving": the partial image, its metadata, or the
// image already renamed) goes at its next start; what was stored whole
// ("stored", whose answer may have gone out) stays and is listed. The
// temporary files of other writes a crash cut short go too.
TEST(MigdOps, AServerRestartedAfterACrashKeepsOnlyWholeStoredImages) {
    const fs::path base = fs::temp_directory_path() / ("migd-ops-" + std::to_string(::getpid()));
    const fs::path images = base / "h3" / "images", journal = base / "h3" / "state" / "journal";
    fs::create_directories(images);
    fs::create_directories(journal);
    const auto file = [](const fs::path& p, const std::string& text) {
        std::ofstream(p) << text;
        ::chmod(p.c_str(), 0600);
    };
    const auto meta = [](const std::string& id) {
        return json{{"id", id},   {"comm", "c"}, {"pid", 1},    {"origin", "h1"},
                    {"owner", 0}, {"bytes", 4},  {"time_ms", 1}}
            .dump();
    };
    // Crashed after its metadata and the rename, before its answer.
    file(images / "1-1.ghost", "data");
    file(images / "1-1.json", meta("1-1"));
    // Crashed after its metadata, before the rename.
    file(images / ".1-2.tmp", "data");
    file(images / "1-2.json", meta("1-2"));
    // Stored whole.
    file(images / "1-3.ghost", "data");
    file(images / "1-3.json", meta("1-3"));
    // Temporary files of writes a crash cut short (metadata, a manifest,
    // a journal entry's first state, the location table).
    file(images / "1-4.json.tmp", "{");
    file(images / "job.manifest.tmp", "{");
    file(journal / "h3.1.1.json.tmp", "{");
    file(base / "h3" / "state" / "locations.json.tmp", "{");
    for (const auto& [id, state] : {std::pair{"1-1", "receiving"}, std::pair{"1-2", "receiving"},
                                    std::pair{"1-3", "stored"}}) {
        const json e = {{"id", std::string("store-") + id},
                        {"role", "server"},
                        {"kind", "checkpoint"},
                        {"state", state},
                        {"tmp", (images / (std::string(".") + id + ".tmp")).string()},
                        {"meta", (images / (std::string(id) + ".json")).string()},
                        {"image", (images / (std::string(id) + ".ghost")).string()}};
        file(journal / (std::string("store-") + id + ".json"), e.dump() + "\n");
    }
    Net net(3);
    EXPECT_TRUE(fs::is_empty(journal));
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(images))
        left.push_back(e.path().filename());
    std::sort(left.begin(), left.end());
    EXPECT_EQ(left, (std::vector<std::string>{"1-3.ghost", "1-3.json"}));
    EXPECT_FALSE(fs::exists(base / "h3" / "state" / "locations.json.tmp"));
    const json list = net["h1"].local({{"op", "images"}, {"server", "h3"}}, root, {});
    ASSERT_TRUE(list.value("ok", false)) << list.dump();
    ASSERT_EQ(list["images"].size(), 1u) << list.dump();
    EXPECT_EQ(list["images"][0]["id"], "1-3");
}

// [limits] max_image_bytes holds for the checkpoint server's store as for a
// migration: a larger image is refused, the process runs on, nothing is kept.
TEST(MigdOps, TheServerRefusesAnImageAboveMaxImageBytes) {
    Net net(3, [](migd::Config& c) {
        if (c.host == "h3")
            c.max_image_bytes = 64 * 1024;
    });
    Counter a(net.root());
    const json r =
        net["h1"].local({{"op", "checkpoint"}, {"pids", {a.pid}}, {"server", "h3"}}, user, {});
    EXPECT_FALSE(r.value("ok", true)) << r.dump();
    EXPECT_NE(r.dump().find("max_image_bytes"), std::string::npos) << r.dump();
    EXPECT_TRUE(alive(a.pid));
    const auto n = a.last().first;
    EXPECT_TRUE(eventually([&] { return a.last().first > n; })); // still counting
    const fs::path images = net.root() / "h3" / "images";
    EXPECT_TRUE(!fs::exists(images) || fs::is_empty(images));
    EXPECT_TRUE(eventually([&] { return fs::is_empty(net.root() / "h3" / "state" / "journal"); }));
}

// One request names each process once and at most 256 of them: an
// all-at-once schedule runs a thread and a session for each, and a user's
// request naming their own pid 100,000 times made migd create threads
// until it could not (and std::terminate). Refused before anything runs.
TEST(MigdOps, ACheckpointOfTheSamePidManyTimesIsRefused) {
    Net net(2);
    Counter a(net.root());
    json twice = {{"op", "checkpoint"},
                  {"pids", {a.pid, a.pid}},
                  {"server", "h2"},
                  {"schedule", "all-at-once"},
                  {"leave_running", true}};
    json r = net["h1"].local(twice, user, {});
    EXPECT_FALSE(r.value("ok", true)) << r.dump();
    EXPECT_NE(r.value("error", "").find("named twice"), std::string::npos) << r.dump();
    json many = twice;
    many["pids"] = json::array();
    for (int i = 0; i < 100000; i++)
        many["pids"].push_back(a.pid);
    r = net["h1"].local(many, user, {});
    EXPECT_FALSE(r.value("ok", true)) << r.dump();
    EXPECT_NE(r.value("error", "").find("at most 256 pids"), std::string::npos) << r.dump();
    EXPECT_TRUE(alive(a.pid));
    EXPECT_TRUE(net["h1"].local({{"op", "images"}, {"server", "h2"}}, user, {}).value("ok", false));
    EXPECT_TRUE(fs::is_empty(net.root() / "h2" / "images") ||
                !fs::exists(net.root() / "h2" / "images"));
}

// The store's quota holds across concurrent sessions: four images stored
// at once into room for one and a half are not all taken (each session
// counted only the store as it found it, and its own bytes).
TEST(MigdOps, ConcurrentStoresKeepTheServersQuota) {
    constexpr std::size_t kPad = 1'500'000; // each image that much larger
    std::uint64_t one = 0;
    {
        Net net(3);
        Counter a(net.root(), false, kPad);
        const json r = net["h1"].local(
            {{"op", "checkpoint"}, {"pids", {a.pid}}, {"server", "h3"}, {"leave_running", true}},
            user, {});
        ASSERT_TRUE(r.value("ok", false)) << r.dump();
        one = r.value("bytes", std::uint64_t{0});
        ASSERT_GT(one, kPad);
    }
    Net net(3, [one](migd::Config& c) {
        if (c.host == "h3")
            c.server_max_bytes = one * 3 / 2;
    });
    std::vector<std::unique_ptr<Counter>> cs;
    json pids = json::array();
    for (int i = 0; i < 4; i++) {
        cs.push_back(std::make_unique<Counter>(net.root(), false, kPad));
        pids.push_back(cs.back()->pid);
    }
    const json r = net["h1"].local({{"op", "checkpoint"},
                                    {"pids", pids},
                                    {"server", "h3"},
                                    {"schedule", "all-at-once"},
                                    {"leave_running", true}},
                                   user, {});
    int stored = 0;
    for (const auto& i : r.value("images", json::array()))
        stored += i.value("ok", false);
    EXPECT_LE(stored, 1) << r.dump();
    std::uint64_t on_disk = 0;
    for (const auto& e : fs::directory_iterator(net.root() / "h3" / "images"))
        if (e.path().extension() == ".ghost")
            on_disk += e.file_size();
    EXPECT_LE(on_disk, one * 3 / 2) << r.dump();
    EXPECT_TRUE(eventually([&] { return fs::is_empty(net.root() / "h3" / "state" / "journal"); }));
    for (const auto& c : cs)
        EXPECT_TRUE(alive(c->pid));
}

// A field of the wrong type for the host's own store, which answers on a
// thread of its own: a malformed request, not an exception out of that
// thread (std::terminate: the daemon and every migration gone).
TEST(MigdOps, AnImagesRequestWithAFieldOfTheWrongTypeIsMalformed) {
    Net net(1);
    const json r = net["h1"].local({{"op", "images"}, {"rm", 1}}, user, {});
    EXPECT_FALSE(r.value("ok", true)) << r.dump();
    EXPECT_NE(r.value("error", "").find("malformed"), std::string::npos) << r.dump();
    EXPECT_TRUE(net["h1"].local({{"op", "images"}}, user, {}).value("ok", false));
}

// Counter a checkpointed (killed) onto h3's server by user; its image id,
// the server's record of it made to say owner instead of nobody.
std::string stored_as_if_of(Net& net, Counter& a, uid_t owner) {
    const json r =
        net["h1"].local({{"op", "checkpoint"}, {"pids", {a.pid}}, {"server", "h3"}}, user, {});
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
    ::waitpid(a.pid, nullptr, 0);
    a.pid = -1;
    if (!r.value("ok", false))
        return {};
    const std::string id = r["images"][0]["id"];
    const fs::path meta = net.root() / "h3" / "images" / (id + ".json");
    json m;
    {
        std::ifstream in(meta);
        in >> m;
    }
    EXPECT_EQ(m.value("owner", 0u), nobody);
    m["owner"] = owner;
    std::ofstream(meta) << m.dump();
    return id;
}

// A stored image runs as its recorded owner or not at all: here the
// server's record says uid 1 (an existing user) while the image is nobody's.
TEST(MigdOps, AStoredImageThatIsNotItsOwnersIsRefused) {
    Net net(3);
    Counter a(net.root());
    const std::string id = stored_as_if_of(net, a, 1);
    ASSERT_FALSE(id.empty());
    const json rs =
        net["h1"].local({{"op", "restart"}, {"server", "h3"}, {"id", id}, {"on", "h2"}}, root, {});
    EXPECT_FALSE(rs.value("ok", true)) << rs.dump();
    EXPECT_NE(rs.value("error", "").find("the image runs as uids 65534"), std::string::npos)
        << rs.dump();
    EXPECT_NE(rs.value("error", "").find("not all uid 1"), std::string::npos) << rs.dump();
    EXPECT_EQ(net["h2"].local({{"op", "ps"}}, root, {})["processes"].size(), 0u);
}

// A restart on the server's own host refused before it reads the image
// (its owner is no user there) ends: the thread feeding the image through
// the local pair gets EPIPE instead of waiting for ever for a reader.
TEST(MigdOps, ARestartRefusedOnTheServersOwnHostEnds) {
    Net net(3);
    Counter a(net.root(), false, 2'000'000);
    const std::string id = stored_as_if_of(net, a, 424242); // no such user
    ASSERT_FALSE(id.empty());
    ASSERT_GT(fs::file_size(net.root() / "h3" / "images" / (id + ".ghost")), 1u << 20)
        << "an image larger than the local pair's buffers";
    auto done = std::async(std::launch::async, [&] {
        return net["h3"].local({{"op", "restart"}, {"server", "h3"}, {"id", id}}, root, {});
    });
    ASSERT_EQ(done.wait_for(std::chrono::seconds(60)), std::future_status::ready)
        << "the restart never ended";
    const json rs = done.get();
    EXPECT_FALSE(rs.value("ok", true)) << rs.dump();
    EXPECT_NE(rs.value("error", "").find("uid 424242 does not exist"), std::string::npos)
        << rs.dump();
}

// The server's own processes (bsprun checkpoints the VPs of every host,
// the server's too): stored through the host's own store, left running.
TEST(MigdOps, CheckpointOntoTheServerHostItself) {
    Net net(2);
    Counter a(net.root());
    const json r = net["h2"].local(
        {{"op", "checkpoint"}, {"pids", {a.pid}}, {"server", "h2"}, {"leave_running", true}}, user,
        {});
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    const std::string id = r["images"][0]["id"];
    EXPECT_TRUE(fs::exists(net.root() / "h2" / "images" / (id + ".ghost")));
    const auto before = a.last();
    EXPECT_TRUE(eventually([&] { return a.last().first > before.first + 2; })); // still running
    const json list = net["h1"].local({{"op", "images"}, {"server", "h2"}}, root, {});
    EXPECT_EQ(list["images"].size(), 1u) << list.dump();
}

// bsprun --checkpoint-every's job manifests on the checkpoint server.
TEST(MigdOps, BspManifestIsStoredOwnerCheckedAndReadFromAnyHost) {
    Net net(3);
    const json doc = {{"superstep", 7}, {"key", "00ff"}};
    const json put = net["h1"].local(
        {{"op", "manifest"}, {"server", "h3"}, {"job", "j1"}, {"put", doc}}, user, {});
    ASSERT_TRUE(put.value("ok", false)) << put.dump();
    const fs::path file = net.root() / "h3" / "images" / "j1.manifest";
    ASSERT_TRUE(fs::exists(file));
    EXPECT_EQ(fs::status(file).permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write);
    // From another host, by its owner: the document as stored.
    const json got =
        net["h2"].local({{"op", "manifest"}, {"server", "h3"}, {"job", "j1"}}, user, {});
    ASSERT_TRUE(got.value("ok", false)) << got.dump();
    EXPECT_EQ(got["manifest"], doc);
    EXPECT_EQ(got["owner"], nobody);
    // Another user may neither read nor replace it; root may read it.
    const migd::Client other{4321, 1};
    const json no =
        net["h1"].local({{"op", "manifest"}, {"server", "h3"}, {"job", "j1"}}, other, {});
    EXPECT_FALSE(no.value("ok", true));
    EXPECT_NE(no.value("error", "").find("belongs to uid"), std::string::npos) << no.dump();
    const json no_put = net["h1"].local(
        {{"op", "manifest"}, {"server", "h3"}, {"job", "j1"}, {"put", json::object()}}, other, {});
    EXPECT_FALSE(no_put.value("ok", true));
    EXPECT_EQ(net["h3"].local({{"op", "manifest"}, {"job", "j1"}}, root, {})["manifest"], doc);
    // A replacement is whole; an unknown job and a bad name are refused.
    const json doc2 = {{"superstep", 9}};
    ASSERT_TRUE(
        net["h2"]
            .local({{"op", "manifest"}, {"server", "h3"}, {"job", "j1"}, {"put", doc2}}, user, {})
            .value("ok", false));
    EXPECT_EQ(net["h1"].local({{"op", "manifest"}, {"server", "h3"}, {"job", "j1"}}, user,
                              {})["manifest"],
              doc2);
    const json none =
        net["h1"].local({{"op", "manifest"}, {"server", "h3"}, {"job", "j2"}}, user, {});
    EXPECT_NE(none.value("error", "").find("no manifest of job j2 on h3"), std::string::npos)
        << none.dump();
    const json bad =
        net["h1"].local({{"op", "manifest"}, {"server", "h3"}, {"job", "../x"}}, user, {});
    EXPECT_FALSE(bad.value("ok", true));
}

// Manifests count against the checkpoint server's quota as images do: one
// that would go past it is refused and not stored; a smaller one is.
TEST(MigdOps, BspManifestsCountAgainstTheServersQuota) {
    Net net(3, [](migd::Config& c) {
        if (c.host == "h3")
            c.server_max_bytes = 64 * 1024;
    });
    const json big = {{"pad", std::string(100 * 1024, 'x')}};
    const json no = net["h1"].local(
        {{"op", "manifest"}, {"server", "h3"}, {"job", "big"}, {"put", big}}, user, {});
    EXPECT_FALSE(no.value("ok", true)) << no.dump().substr(0, 200);
    EXPECT_NE(no.value("error", "").find("is full"), std::string::npos) << no.value("error", "");
    EXPECT_FALSE(fs::exists(net.root() / "h3" / "images" / "big.manifest"));
    // Many small ones fill it too: each counts what is stored already.
    const json part = {{"pad", std::string(20 * 1024, 'x')}};
    int stored = 0;
    for (int i = 0; i < 5; i++)
        stored += net["h1"]
                      .local({{"op", "manifest"},
                              {"server", "h3"},
                              {"job", fmt::format("j{}", i)},
                              {"put", part}},
                             user, {})
                      .value("ok", false);
    EXPECT_EQ(stored, 3);
    // A replacement of the same size fits: only what it adds is counted.
    EXPECT_TRUE(
        net["h1"]
            .local({{"op", "manifest"}, {"server", "h3"}, {"job", "j0"}, {"put", part}}, user, {})
            .value("ok", false));
}

// A job of 20,000 VPs has a manifest of about 1.6 MB: it crosses the peer
// protocol (a JSON frame) both ways whole.
TEST(MigdOps, BspManifestOfManyVpsCrossesHosts) {
    Net net(3);
    json images = json::array();
    for (int v = 0; v < 20000; ++v)
        images.push_back({{"id", fmt::format("bsprun-1-abcdef-{:05}", v)},
                          {"host", fmt::format("h{}", v % 3 + 1)},
                          {"gid", fmt::format("h1-{}", v)},
                          {"bytes", 3700000 + v}});
    const json doc = {{"format", "ghost-bsp-manifest-1"}, {"nprocs", 20000}, {"images", images}};
    ASSERT_GT(doc.dump().size(), std::size_t{1} << 20);
    const json put = net["h1"].local(
        {{"op", "manifest"}, {"server", "h3"}, {"job", "big"}, {"put", doc}}, user, {});
    ASSERT_TRUE(put.value("ok", false)) << put.value("error", "");
    const json got =
        net["h2"].local({{"op", "manifest"}, {"server", "h3"}, {"job", "big"}}, user, {});
    ASSERT_TRUE(got.value("ok", false)) << got.value("error", "");
    EXPECT_EQ(got["manifest"], doc);
}

// Moves the counter h1 -> h2, then on to each host of then in turn, from
// wherever it runs; the last reply (or the first that failed). The gid
// stays the first move's.
json move_along(Net& net, Counter& c, std::initializer_list<const char*> then) {
    json r = move_to_h2(net, c);
    for (const char* to : then) {
        if (!r.value("ok", false))
            return r;
        const std::string gid = r["gid"], from = r["host"];
        r = net[from].local({{"op", "migrate"}, {"pid", r["pid"]}, {"to", to}}, user, {});
        EXPECT_EQ(r.value("gid", gid), gid) << "the same gid across moves";
    }
    return r;
}

TEST(MigdOps, ForwardingFollowsAChainAndTheAnswerShortensIt) {
    Net net(3);
    Counter c(net.root());
    const json r = move_along(net, c, {"h3"});
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    const std::string gid = r["gid"];
    const pid_t np = r["pid"];
    // h1 still points at h2, which forwards to h3.
    const json w = net["h1"].local({{"op", "where"}, {"gid", gid}}, root, {});
    EXPECT_EQ(w.value("host", ""), "h3") << w.dump();
    EXPECT_EQ(w.value("hops", 0), 2);
    const json w2 = net["h1"].local({{"op", "where"}, {"gid", gid}}, root, {});
    EXPECT_EQ(w2.value("hops", 0), 1) << w2.dump(); // h1 now points at h3 directly
    ::kill(np, SIGKILL);
}

// A lookup that crosses several hosts is answered by the host where the
// chain ends, straight to the asker: the hosts between learn nothing from
// it (the answer did not pass them), the asker points there at once, and the
// kept connections that carried the one-way messages serve the next
// requests as before.
TEST(MigdOps, AChainIsAnsweredStraightFromWhereItEnds) {
    Net net(4);
    Counter c(net.root());
    const json r = move_along(net, c, {"h3", "h4"});
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    const std::string gid = r["gid"];
    const pid_t np = r["pid"];
    const json w = net["h1"].local({{"op", "where"}, {"gid", gid}}, root, {});
    EXPECT_EQ(w.value("host", ""), "h4") << w.dump();
    EXPECT_EQ(w.value("pid", 0), np) << w.dump();
    EXPECT_EQ(w.value("hops", 0), 3) << w.dump();
    // h2 forwarded that lookup but did not see its answer: still two hops.
    const json w2 = net["h2"].local({{"op", "where"}, {"gid", gid}}, root, {});
    EXPECT_EQ(w2.value("hops", 0), 2) << w2.dump();
    for (int i = 0; i < 3; ++i) {
        const json again = net["h1"].local({{"op", "where"}, {"gid", gid}}, root, {});
        EXPECT_EQ(again.value("hops", 0), 1) << again.dump();
        const json ps = net["h1"].local({{"op", "ps"}}, root, {});
        int seen = 0;
        for (const auto& p : ps.value("processes", json::array()))
            seen += p.value("gid", "") == gid && p.value("host", "") == "h4";
        EXPECT_EQ(seen, 1) << ps.dump();
        EXPECT_TRUE(ps.value("unreachable", json::array()).empty()) << ps.dump();
    }
    const json k = net["h3"].local({{"op", "kill"}, {"gid", gid}, {"signal", SIGKILL}}, user, {});
    EXPECT_TRUE(k.value("ok", false)) << k.dump();
    EXPECT_TRUE(eventually([&] { return !alive(np); }));
}

// The host where a kill ends cannot reach the asker: its answer is lost,
// so the asker asks again hop by hop after a second, with the same request
// id, and the host that signalled answers from what it did without a second
// signal. Observed with SIGSTOP: the test continues the process between
// the two arrivals, and it must stay running.
// c moved h1 -> h2 -> h3, and h3 cut off from h1: the answer of a kill
// asked on h1 cannot come straight back. Its gid and pid ("" if a move
// failed).
std::pair<std::string, pid_t> at_h3_cut_from_h1(Net& net, Counter& c) {
    const json r = move_along(net, c, {"h3"});
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
    if (!r.value("ok", false))
        return {};
    net.cut_link("h3", "h1");
    return {r["gid"], r["pid"]};
}

TEST(MigdOps, AKillWhoseAnswerIsLostIsNotDeliveredTwice) {
    Net net(3);
    Counter c(net.root());
    const auto [gid, np] = at_h3_cut_from_h1(net, c);
    ASSERT_FALSE(gid.empty());
    const auto state = [&] {
        auto p = migd::proc_info(np);
        return p ? p->state : '?';
    };
    json k;
    std::thread asker([&] {
        k = net["h1"].local({{"op", "kill"}, {"gid", gid}, {"signal", SIGSTOP}}, user, {});
    });
    const bool stopped = eventually([&] { return state() == 'T'; });
    ::kill(np, SIGCONT);
    asker.join();
    EXPECT_TRUE(stopped) << "the first arrival stops it";
    EXPECT_TRUE(k.value("ok", false)) << k.dump();
    EXPECT_EQ(k.value("host", ""), "h3") << k.dump();
    std::this_thread::sleep_for(100ms);
    EXPECT_NE(state(), 'T') << "signalled a second time";
    ::kill(np, SIGKILL);
}

// The same lost answer for a signal that ends the process: when the asker
// retries hop by hop, the process has exited, and the host where it ran
// gives the answer it kept (the kill succeeded), not "has exited".
TEST(MigdOps, AKillWhoseAnswerIsLostSucceedsAfterTheProcessItEndedIsGone) {
    Net net(3);
    Counter c(net.root());
    const auto [gid, np] = at_h3_cut_from_h1(net, c);
    ASSERT_FALSE(gid.empty());
    const json k = net["h1"].local({{"op", "kill"}, {"gid", gid}, {"signal", SIGKILL}}, user, {});
    EXPECT_TRUE(k.value("ok", false)) << k.dump();
    EXPECT_EQ(k.value("host", ""), "h3") << k.dump();
    EXPECT_EQ(k.value("signal", 0), SIGKILL) << k.dump();
    EXPECT_TRUE(eventually([&] { return !alive(np); }));
}

// The host that made a gid is down while the process lives on elsewhere:
// the other peers' tables find it (a job's old processes must still be
// found and killed after its home host died).
TEST(MigdOps, AProcessIsFoundOnAnotherPeerWhenItsOriginIsDown) {
    Net net(3);
    Counter c(net.root());
    json r = move_to_h2(net, c);
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    const std::string gid = r["gid"];
    const pid_t np = r["pid"];
    ASSERT_EQ(gid.rfind("h1-", 0), 0u) << gid; // made by h1, which h3 would ask
    net.cut("h1");
    const json w = net["h3"].local({{"op", "where"}, {"gid", gid}}, root, {});
    EXPECT_EQ(w.value("host", ""), "h2") << w.dump();
    EXPECT_EQ(w.value("pid", 0), np) << w.dump();
    const json k = net["h3"].local({{"op", "kill"}, {"gid", gid}, {"signal", SIGKILL}}, user, {});
    EXPECT_TRUE(k.value("ok", false)) << k.dump();
    EXPECT_TRUE(eventually([&] { return !alive(np); }));
    // A gid that no peer has: the error says so.
    const int tried = net.attempts("h1");
    const json none = net["h3"].local({{"op", "where"}, {"gid", "h1-999"}}, root, {});
    EXPECT_FALSE(none.value("ok", true));
    EXPECT_NE(none.value("error", "").find("no other peer has it"), std::string::npos)
        << none.dump();
    // h1 did not answer a moment ago: this lookup asked the others at once.
    EXPECT_EQ(net.attempts("h1"), tried);
}

// Two processes moved for the tests of forgetting: a (to h2, then along
// then) to be ended, b (to h2) to keep running. Empty gids if a move failed.
struct EndAndKeep {
    std::string gone_gid;
    pid_t gone = -1;
    std::string kept_gid;
    pid_t kept = -1;
};

EndAndKeep one_to_end_one_to_keep(Net& net, Counter& a, std::initializer_list<const char*> then,
                                  Counter& b) {
    EndAndKeep k;
    const json r = move_along(net, a, then);
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
    const json s = move_to_h2(net, b);
    EXPECT_TRUE(s.value("ok", false)) << s.dump();
    if (!r.value("ok", false) || !s.value("ok", false))
        return k;
    k = {r["gid"], r["pid"], s["gid"], s["pid"]};
    return k;
}

// A process that ended on the host it was moved to is "exited" there, then
// forgotten forget_exited_s after: lookups through the hosts that still
// point there say no host knows it (not a forwarding loop back to its
// origin), and the host no longer lists it. A running one is kept.
TEST(MigdOps, AnEndedProcessIsForgottenAfterForgetExitedAndLookupsSaySo) {
    Net net(3, [](migd::Config& c) { c.forget_exited_s = 1; });
    Counter a(net.root()), b(net.root());
    const auto [gone_gid, gone, kept_gid, kept] = one_to_end_one_to_keep(net, a, {}, b);
    ASSERT_FALSE(gone_gid.empty());
    ASSERT_EQ(::kill(gone, SIGKILL), 0);
    EXPECT_TRUE(eventually([&] { return !alive(gone); }));

    const json w = net["h1"].local({{"op", "where"}, {"gid", gone_gid}}, root, {});
    EXPECT_EQ(w.value("state", ""), "exited") << w.dump();
    const auto listed = [&](const std::string& gid) {
        const json ps = net["h2"].local({{"op", "ps"}}, root, {});
        for (const auto& p : ps.value("processes", json::array()))
            if (p.value("gid", "") == gid)
                return true;
        return false;
    };
    EXPECT_TRUE(listed(gone_gid));
    EXPECT_TRUE(eventually([&] { return !listed(gone_gid); })) << "forgotten on h2";
    // h1 still forwards to h2 (which says so), or has forgotten too (its
    // sweep asked h2 meanwhile: the next test) and says so itself.
    const auto unknown = [&](const json& w) {
        return !w.value("ok", true) &&
               (w.value("error", "").find("no process " + gone_gid + " known on h2 or its peers") !=
                    std::string::npos ||
                w.value("error", "").find("no process " + gone_gid + " known on h1") !=
                    std::string::npos);
    };
    const json after = net["h1"].local({{"op", "where"}, {"gid", gone_gid}}, root, {});
    EXPECT_TRUE(unknown(after)) << after.dump();
    // From the third host too, which asks the gid's origin first.
    const json third = net["h3"].local({{"op", "where"}, {"gid", gone_gid}}, root, {});
    EXPECT_TRUE(unknown(third)) << third.dump();

    std::this_thread::sleep_for(1500ms); // more sweeps: the running one stays
    const json k = net["h1"].local({{"op", "where"}, {"gid", kept_gid}}, root, {});
    EXPECT_EQ(k.value("state", ""), "running") << k.dump();
    EXPECT_EQ(k.value("pid", 0), kept);
    EXPECT_TRUE(listed(kept_gid));
    ::kill(kept, SIGKILL);
}

// The hosts a process passed through forget their forwarding entries once
// the host each points at has forgotten it: the chain h1 -> h2 -> h3 of an
// ended process is taken down from its end. A running process's entries
// stay, however old.
TEST(MigdOps, ForwardingEntriesAreForgottenOnceTheirNextHostForgetsTheProcess) {
    Net net(3, [](migd::Config& c) { c.forget_exited_s = 1; });
    Counter a(net.root()), b(net.root());
    const auto [gone_gid, gone, kept_gid, kept] = one_to_end_one_to_keep(net, a, {"h3"}, b);
    ASSERT_FALSE(gone_gid.empty());
    const auto entry = [&](const char* host, const std::string& gid) {
        return net[host].locations_.get(gid);
    };
    ASSERT_TRUE(entry("h1", gone_gid) && entry("h1", gone_gid)->state == "moved");
    ASSERT_TRUE(entry("h2", gone_gid) && entry("h2", gone_gid)->host == "h3");
    ASSERT_EQ(::kill(gone, SIGKILL), 0);
    const auto within = [](std::chrono::seconds limit, const auto& cond) {
        const auto end = std::chrono::steady_clock::now() + limit;
        while (!cond() && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(100ms);
        return cond();
    };
    EXPECT_TRUE(within(20s, [&] { return !entry("h3", gone_gid); })) << "forgotten where it ended";
    EXPECT_TRUE(within(20s, [&] { return !entry("h2", gone_gid); })) << "h2 forwarded to h3";
    EXPECT_TRUE(within(20s, [&] { return !entry("h1", gone_gid); })) << "h1 forwarded to h2";
    const json w = net["h1"].local({{"op", "where"}, {"gid", gone_gid}}, root, {});
    EXPECT_FALSE(w.value("ok", true)) << w.dump();

    const auto k = entry("h1", kept_gid);
    ASSERT_TRUE(k) << "a running process's forwarding entry is kept";
    EXPECT_EQ(k->host, "h2");
    const json kw = net["h1"].local({{"op", "where"}, {"gid", kept_gid}}, root, {});
    EXPECT_EQ(kw.value("pid", 0), kept) << kw.dump();
    ::kill(kept, SIGKILL);
}

// Short requests keep their connection: a lookup costs a round trip, not a
// handshake. A kept connection the peer hung up is replaced without error.
TEST(MigdOps, LookupsReuseAKeptConnectionAndReconnectAfterAHangUp) {
    Net net(2);
    Counter c(net.root());
    json r = move_to_h2(net, c);
    ASSERT_TRUE(r.value("ok", false)) << r.dump();
    const std::string gid = r["gid"];
    const pid_t np = r["pid"];
    json w = net["h1"].local({{"op", "where"}, {"gid", gid}}, root, {});
    ASSERT_EQ(w.value("host", ""), "h2") << w.dump();
    const int before = net.connections();
    for (int i = 0; i < 5; ++i) {
        w = net["h1"].local({{"op", "where"}, {"gid", gid}}, root, {});
        EXPECT_EQ(w.value("pid", 0), np) << w.dump();
    }
    EXPECT_EQ(net.connections(), before) << "every lookup after the first reuses its connection";
    net.hang_up();
    w = net["h1"].local({{"op", "where"}, {"gid", gid}}, root, {});
    EXPECT_EQ(w.value("pid", 0), np) << w.dump();
    EXPECT_EQ(net.connections(), before + 1);
    ::kill(np, SIGKILL);
}

// A peer's request for a user says which user: one without a uid (or with
// one that is not an unsigned number) is refused, never taken as root's.
TEST(MigdOps, APeerRequestWithoutItsUsersUidIsRefused) {
    Net net(2);
    for (json req : {json{{"op", "images"}, {"rm", "1-1"}}, json{{"op", "fetch"}, {"id", "1-1"}},
                     json{{"op", "images"}, {"uid", -1}},
                     json{{"op", "store"}, {"items", {{{"pid", 1}, {"comm", "x"}}}}},
                     json{{"op", "kill"}, {"gid", "h1.1"}, {"signal", 0}}}) {
        auto r = net["h1"].ask("h2", req);
        ASSERT_TRUE(r) << r.error().what();
        EXPECT_NE(r->value("error", "").find("no uid"), std::string::npos)
            << req.dump() << " -> " << r->dump();
    }
    auto r = net["h1"].ask("h2", {{"op", "images"}, {"uid", nobody}});
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_TRUE(r->value("ok", false)) << r->dump();
}

// A peer names only its own migrations, and only a migration's own peer
// learns or decides its outcome: another host of the cluster can neither
// reach a journal entry through an id nor commit, abort or resolve one.
TEST(MigdOps, APeerReachesOnlyItsOwnMigrations) {
    Net net(3);
    const json imp = {{"op", "import"}, {"kind", "migrate"}, {"uid", nobody}};
    json bad = imp;
    bad["id"] = "../locations";
    auto r = net["h3"].ask("h2", bad);
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_NE(r->value("error", "").find("malformed import request"), std::string::npos)
        << r->dump();
    json other = imp;
    other["id"] = "h1.1.1"; // h1's, sent by h3
    r = net["h3"].ask("h2", other);
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_NE(r->value("error", "").find("is not h3's to start"), std::string::npos) << r->dump();
    EXPECT_FALSE(net["h2"].journal_.get("h1.1.1")) << "nothing journaled";

    // h1 moving a process to h2, past its commit point (its original gone).
    ASSERT_TRUE(net["h1"].journal_.put({{"id", "h1.5.5"},
                                        {"role", "source"},
                                        {"state", "committing"},
                                        {"peer", "h2"},
                                        {"pid", 0}}));
    r = net["h3"].ask("h1", {{"op", "resolve"}, {"id", "h1.5.5"}});
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_FALSE(r->value("ok", true)) << "h3 learnt another pair's outcome: " << r->dump();
    r = net["h2"].ask("h1", {{"op", "resolve"}, {"id", "h1.5.5"}});
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_EQ(r->value("state", ""), "committed") << r->dump();
    // h2 holding h1's copy, ready: h3's commit or abort is refused. (h1
    // still sending: h2's resolver, should it ask, hears "pending".)
    ASSERT_TRUE(net["h1"].journal_.put(
        {{"id", "h1.6.6"}, {"role", "source"}, {"state", "sending"}, {"peer", "h2"}}));
    ASSERT_TRUE(net["h2"].journal_.put(
        {{"id", "h1.6.6"}, {"role", "dest"}, {"state", "ready"}, {"peer", "h1"}, {"pid", 0}}));
    r = net["h3"].ask("h2", {{"op", "abort"}, {"id", "h1.6.6"}});
    ASSERT_TRUE(r) << r.error().what();
    EXPECT_FALSE(r->value("ok", true)) << r->dump();
    EXPECT_TRUE(net["h2"].journal_.get("h1.6.6")) << "h3 decided h1's migration";
    net["h1"].journal_.remove("h1.5.5");
    net["h1"].journal_.remove("h1.6.6");
    net["h2"].journal_.remove("h1.6.6");
}

// Past the commit point the destination's resolver hears "committed", which
// lets its copy run, only once the original is dead: not while the export
// (which kills it) still holds the migration, and not before the source has
// killed it itself. A duplicate's original is left alone.
TEST(MigdOps, TheDestinationHearsCommittedOnlyOnceTheOriginalIsDead) {
    Net net(2);
    const pid_t orig = ::fork();
    ASSERT_GE(orig, 0);
    if (orig == 0) {
        for (;;)
            ::pause();
    }
    ASSERT_EQ(::kill(orig, SIGSTOP), 0); // held, as an exported original is
    const auto info = migd::proc_info(orig);
    ASSERT_TRUE(info.has_value());
    const auto resolve = [&](const char* id) {
        auto r = net["h2"].ask("h1", {{"op", "resolve"}, {"id", id}});
        return r ? r->value("state", "") : r.error().what();
    };
    json e = {{"id", "h1.7.7"},
              {"role", "source"},
              {"kind", "dup"},
              {"state", "committing"},
              {"peer", "h2"},
              {"pid", orig},
              {"starttime", info->starttime}};
    ASSERT_TRUE(net["h1"].journal_.put(e));
    EXPECT_EQ(resolve("h1.7.7"), "committed");
    EXPECT_TRUE(alive(orig)) << "a duplicate's original was killed";
    net["h1"].journal_.remove("h1.7.7");

    e["id"] = "h1.8.8";
    e["kind"] = "migrate";
    ASSERT_TRUE(net["h1"].journal_.put(e));
    {
        migd::Daemon::Busy exporting(net["h1"], "h1.8.8");
        EXPECT_EQ(resolve("h1.8.8"), "pending") << "committed while the export still ran";
        EXPECT_TRUE(alive(orig));
    }
    EXPECT_EQ(resolve("h1.8.8"), "committed");
    int st = 0;
    EXPECT_EQ(::waitpid(orig, &st, WNOHANG), orig) << "committed before the original died";
    EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << st;
    net["h1"].journal_.remove("h1.8.8");
    ::kill(orig, SIGKILL);
    (void)::waitpid(orig, nullptr, 0);
}

// A process of the user's that runs with more than the user's own ids (a
// set-user-id program: its saved uid root) is one the user could not
// trace: migd, which could, refuses to act on it for them; root may.
TEST(MigdOps, AUserCannotMoveTheirProcessThatRunsWithMoreThanTheirIds) {
    Net net(2);
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    if (child == 0) {
        if (::setgroups(0, nullptr) || ::setresgid(nobody, nobody, nobody) ||
            ::setresuid(nobody, nobody, 0))
            ::_exit(1);
        (void)!::write(ready[1], "r", 1);
        ::pause();
        ::_exit(0);
    }
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    ::close(ready[1]);
    const json r = net["h1"].local({{"op", "migrate"}, {"pid", child}, {"to", "h2"}}, user, {});
    EXPECT_FALSE(r.value("ok", true)) << r.dump();
    EXPECT_NE(r.value("error", "").find("set-user-id"), std::string::npos) << r.dump();
    EXPECT_EQ(::kill(child, 0), 0) << "the process runs on";
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
}

TEST(MigdOps, RefusalsLeaveTheOriginalRunning) {
    Net net(2);
    Counter c(net.root());
    // Another user's process.
    json r = net["h1"].local({{"op", "migrate"}, {"pid", c.pid}, {"to", "h2"}},
                             migd::Client{4321, 1}, {});
    EXPECT_FALSE(r.value("ok", true));
    EXPECT_NE(r.value("error", "").find("their own processes"), std::string::npos) << r.dump();
    // An unknown host, and this host itself.
    r = net["h1"].local({{"op", "migrate"}, {"pid", c.pid}, {"to", "h9"}}, root, {});
    EXPECT_NE(r.value("error", "").find("not a peer"), std::string::npos) << r.dump();
    // An unreachable destination.
    net.cut("h2");
    r = net["h1"].local({{"op", "migrate"}, {"pid", c.pid}, {"to", "h2"}}, root, {});
    EXPECT_FALSE(r.value("ok", true)) << r.dump();
    EXPECT_TRUE(alive(c.pid));
    const auto n = c.last().first;
    EXPECT_TRUE(eventually([&] { return c.last().first > n; })); // still counting
    EXPECT_TRUE(fs::is_empty(net.root() / "h1" / "state" / "journal"));
}

// Processes whose command line is exactly argv (none of ours match).
std::vector<pid_t> running(const std::vector<std::string>& argv) {
    std::string want;
    for (const auto& a : argv)
        want += a + '\0';
    std::vector<pid_t> found;
    for (const auto& e : fs::directory_iterator("/proc")) {
        const std::string name = e.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos)
            continue;
        std::ifstream f(e.path() / "cmdline");
        const std::string cmd((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
        if (cmd == want && alive(std::stoi(name)))
            found.push_back(std::stoi(name));
    }
    return found;
}

// A restore stub that stops taking the image without exiting must not hold
// h2's migd: it is killed once it took nothing for the channel's timeout,
// the migration fails, and the original runs on. (One that took it all and
// never answers is killed after import_answer_within(), at least 60 s, as
// long as the source waits for the answer.)
TEST(MigdOps, AStuckRestoreStubIsKilledAndTheOriginalRunsOn) {
    Net net(2);
    const fs::path stub = net.root() / "stuck-stub";
    {
        std::ofstream f(stub);
        f << "#!/bin/sh\nexec sleep 299.25\n";
    }
    fs::permissions(stub, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    // 1.5 MB of environment: more than the stub's pipe (1 MiB) and the
    // socket hold, so migd's writes into the pipe must wait.
    Counter c(net.root(), false, 1'500'000);
    ::setenv("GHOST_RESTORE_STUB", stub.c_str(), 1);
    const auto t0 = std::chrono::steady_clock::now();
    const json r = net["h1"].local({{"op", "migrate"}, {"pid", c.pid}, {"to", "h2"}}, user, {});
    const auto took = std::chrono::steady_clock::now() - t0;
    ::unsetenv("GHOST_RESTORE_STUB");
    EXPECT_FALSE(r.value("ok", true)) << r.dump();
    EXPECT_LT(took, 30s);
    EXPECT_TRUE(alive(c.pid));
    const auto n = c.last().first;
    EXPECT_TRUE(eventually([&] { return c.last().first > n; })); // still counting
    EXPECT_TRUE(eventually([&] { return running({"sleep", "299.25"}).empty(); }));
    for (pid_t p : running({"sleep", "299.25"})) // (only if the test failed)
        ::kill(p, SIGKILL);
    EXPECT_TRUE(eventually([&] {
        return fs::is_empty(net.root() / "h1" / "state" / "journal") &&
               fs::is_empty(net.root() / "h2" / "state" / "journal");
    }));
}

TEST(MigdOps, APipeOnStdoutIsRefusedBeforeAnythingHappens) {
    Net net(2);
    Counter c(net.root(), /*pipe_stdout=*/true);
    const json r = net["h1"].local({{"op", "migrate"}, {"pid", c.pid}, {"to", "h2"}}, root, {});
    EXPECT_FALSE(r.value("ok", true));
    EXPECT_NE(r.value("error", "").find("pipe"), std::string::npos) << r.dump();
    EXPECT_TRUE(alive(c.pid));
}

} // namespace
