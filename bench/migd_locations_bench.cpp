// SPDX-License-Identifier: GPL-2.0
// The cost of one location update in migd's durable location table (the
// update a host makes after a migration: its entry for the gid now says
// where the process went), against the disk's own floor measured in the
// same run and the same directory: one small append made durable with
// fdatasync(2). Also a new gid (the persisted counter). For tables of
// several sizes, since a table holds every gid that passed through a host.
// Then the journal: an operation's first state, a later state (the
// commit's "committing" and "ready" are later states) and its removal,
// beside rewriting the entry whole (what a later state cost before).
// Documentation/performance.md, "Location updates" and "Journal states".
//   build/bin/ghost_bench_migd_locations [--entries 10,1000,100000]
//                                        [--updates N] [--dir DIR]
// DIR must be on the disk migd's state directory would be on (the default
// /var/tmp is; /tmp may be tmpfs elsewhere, which has no flush to pay).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "store.hpp"

namespace {

using namespace std::chrono;
namespace fs = std::filesystem;

[[noreturn]] void die(const std::string& why) {
    fmt::print(stderr, "ghost_bench_migd_locations: {}\n", why);
    std::exit(1);
}

struct Stats {
    double median = 0, p90 = 0, mean = 0, max = 0;
};

Stats time_each(int n, const std::function<void(int)>& op) {
    std::vector<double> ms;
    ms.reserve(n);
    for (int i = 0; i < n; i++) {
        const auto t0 = steady_clock::now();
        op(i);
        ms.push_back(duration<double, std::milli>(steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    double sum = 0;
    for (const double m : ms)
        sum += m;
    return {ms[ms.size() / 2], ms[ms.size() * 9 / 10], sum / n, ms.back()};
}

migd::Location entry(std::size_t i, const std::string& host) {
    migd::Location l;
    l.gid = fmt::format("h1-{}", i + 1);
    l.state = "moved";
    l.host = host;
    l.pid = static_cast<pid_t>(1000 + i % 30000);
    l.starttime = 100000 + i;
    l.uid = 1000;
    l.comm = "ghost-counter";
    return l;
}

// A state directory whose table already holds n entries, written as one
// file the way migd keeps it when it starts (so that filling it costs the
// same whatever the update path is).
void prefill(const std::string& state, std::size_t n) {
    fs::create_directories(state);
    migd::json entries = migd::json::array();
    for (std::size_t i = 0; i < n; i++)
        entries.push_back(migd::to_json(entry(i, "h2")));
    const migd::json j = {{"host", "h1"}, {"next", n + 1}, {"entries", entries}};
    if (auto w = migd::write_file_atomic(state + "/locations.json", j.dump(1) + "\n", 0600); !w)
        die(w.error().what());
}

// The floor: a 120-byte append made durable, as often, in the same place.
Stats disk_floor(const std::string& dir, int n) {
    const std::string path = dir + "/floor";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        die(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
    const std::string line(119, 'x');
    const Stats s = time_each(n, [&](int) {
        if (::write(fd, (line + "\n").data(), 120) != 120 || ::fdatasync(fd) != 0)
            die(fmt::format("write {}: {}", path, std::strerror(errno)));
    });
    ::close(fd);
    ::unlink(path.c_str());
    return s;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"The cost of one update of migd's durable location table (the update after a "
                 "migration) and of a new gid, for tables of several sizes, then of the "
                 "journal's states, beside one durable 120-byte append (write + fdatasync) in "
                 "the same directory."};
    std::vector<std::size_t> sizes{10, 1000, 100000};
    int updates = 200;
    std::string dir = "/var/tmp";
    app.add_option("--entries", sizes, "table sizes (entries already in the table)")
        ->delimiter(',');
    app.add_option("--updates", updates, "updates timed per size")->check(CLI::Range(10, 100000));
    app.add_option("--dir", dir, "where the state directories are made (a real disk)")
        ->check(CLI::ExistingDirectory);
    CLI11_PARSE(app, argc, argv);

    char tmpl[4096];
    std::snprintf(tmpl, sizeof(tmpl), "%s/ghost-locations-bench.XXXXXX", dir.c_str());
    if (!::mkdtemp(tmpl))
        die(fmt::format("cannot make a directory in {}: {}", dir, std::strerror(errno)));
    const std::string work = tmpl;

    fmt::print("{} updates per size in {}; ms, median / p90 (mean, max: a mean includes what "
               "the table does now and then, such as writing itself whole)\n\n",
               updates, dir);
    fmt::print("| entries | update (moved) | update: mean, max | new gid | open | floor: append "
               "+ fdatasync | update / floor (medians) |\n|---|---|---|---|---|---|---|\n");
    std::mt19937 rng(1);
    for (const std::size_t n : sizes) {
        const std::string state = fmt::format("{}/state-{}", work, n);
        prefill(state, n);
        const auto t0 = steady_clock::now();
        Stats upd, gid;
        {
            migd::Locations table;
            if (auto r = table.open(state, "h1"); !r)
                die(r.error().what());
            const double open_ms = duration<double, std::milli>(steady_clock::now() - t0).count();
            std::uniform_int_distribution<std::size_t> pick(0, n ? n - 1 : 0);
            upd = time_each(updates, [&](int i) {
                if (auto r = table.set(entry(pick(rng), i % 2 ? "h3" : "h4")); !r)
                    die(r.error().what());
            });
            gid = time_each(updates, [&](int) { (void)table.new_gid(); });
            const Stats floor = disk_floor(state, updates);
            fmt::print(
                "| {} | {:.3f} / {:.3f} | {:.3f}, {:.1f} | {:.3f} / {:.3f} | {:.1f} | {:.3f} "
                "/ {:.3f} | {:.2f} |\n",
                n, upd.median, upd.p90, upd.mean, upd.max, gid.median, gid.p90, open_ms,
                floor.median, floor.p90, upd.median / floor.median);
        }
    }

    // The journal: one operation's life, `updates` times.
    const std::string jstate = work + "/journal-state";
    migd::Journal journal;
    if (auto r = journal.open(jstate); !r)
        die(r.error().what());
    const auto entry = [](int i, const char* state) {
        return migd::json{{"id", fmt::format("h1.{}.{}", 1764300000000 + i, i)},
                          {"role", "source"},
                          {"kind", "migrate"},
                          {"state", state},
                          {"peer", "h2"},
                          {"gid", "h1-17"},
                          {"pid", 4242},
                          {"starttime", 123456},
                          {"uid", 1000},
                          {"comm", "ghost-counter"}};
    };
    const auto put = [&](const migd::json& e) {
        if (auto r = journal.put(e); !r)
            die(r.error().what());
    };
    const Stats first = time_each(updates, [&](int i) { put(entry(i, "sending")); });
    const Stats later = time_each(updates, [&](int i) { put(entry(i, "committing")); });
    const Stats gone = time_each(updates, [&](int i) { journal.remove(entry(i, "").at("id")); });
    const Stats whole = time_each(updates, [&](int i) {
        if (auto w = migd::write_file_atomic(fmt::format("{}/whole.json", jstate),
                                             entry(i, "committing").dump(2) + "\n", 0600);
            !w)
            die(w.error().what());
    });
    const Stats floor = disk_floor(jstate, updates);
    fmt::print("\nJournal, {} operations; ms, median / p90\n\n", updates);
    fmt::print("| first state (file made) | later state (appended) | removed | later state "
               "written whole (before) | floor: append + fdatasync |\n|---|---|---|---|---|\n");
    fmt::print("| {:.3f} / {:.3f} | {:.3f} / {:.3f} | {:.3f} / {:.3f} | {:.3f} / {:.3f} | {:.3f} / "
               "{:.3f} |\n",
               first.median, first.p90, later.median, later.p90, gone.median, gone.p90,
               whole.median, whole.p90, floor.median, floor.p90);

    std::error_code ec;
    fs::remove_all(work, ec);
    return 0;
}
