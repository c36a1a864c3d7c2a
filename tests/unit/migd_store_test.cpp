// SPDX-License-Identifier: GPL-2.0
// migd's durable state (migd/store.cpp, migd/locations.cpp). The location
// table: what set(), new_gid() and erase() returned from survives a crash
// (the log replayed over the snapshot), a shortcut goes with the next
// durable change, a torn last line is ignored and a damaged one refused, the
// log is folded into the snapshot before it outgrows the table, ended
// processes are forgotten. The journal: each state a line, the last whole
// one counting, a torn one skipped, an older migd's entry read.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "store.hpp"

namespace {

namespace fs = std::filesystem;
using migd::Location;
using migd::Locations;

// A state directory of its own for each test, removed after it.
class StateDir : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/ghost-store-test.XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    // Lines in the file at path (0 when there is none).
    static std::size_t lines_in(const std::string& path) {
        std::ifstream f(path);
        std::size_t n = 0;
        for (std::string l; std::getline(f, l);)
            n++;
        return n;
    }
    std::string dir_;
};

class MigdLocations : public StateDir {
  protected:
    // Runs body on a table of this state directory in a child that then
    // ends without closing it (no destructor: what a crash leaves).
    void crash_after(const std::function<void(Locations&)>& body) {
        const pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            static std::optional<Locations> t; // _exit: never destroyed
            t.emplace();
            if (!t->open(dir_, "h1"))
                ::_exit(3);
            body(*t);
            ::_exit(0);
        }
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }

    std::size_t log_lines() const { return lines_in(dir_ + "/locations.log"); }

    void write_log(const std::string& text) const {
        std::ofstream(dir_ + "/locations.log", std::ios::trunc) << text;
    }
};

Location at(const std::string& gid, const std::string& state, const std::string& host, pid_t pid) {
    Location l;
    l.gid = gid;
    l.state = state;
    l.host = host;
    l.pid = pid;
    l.starttime = 4242;
    l.uid = 1000;
    l.comm = "ghost-counter";
    return l;
}

TEST_F(MigdLocations, WhatWasWrittenSurvivesACrashAndTheLogIsFoldedAtOpen) {
    crash_after([](Locations& t) {
        ASSERT_EQ(t.new_gid(), "h1-1");
        ASSERT_EQ(t.new_gid(), "h1-2");
        ASSERT_TRUE(t.set(at("h1-1", "local", "h1", 100)));
        ASSERT_TRUE(t.set(at("h1-2", "local", "h1", 101)));
        ASSERT_TRUE(t.set(at("h1-1", "moved", "h2", 200))); // the later one counts
        ASSERT_TRUE(t.set(at("h3-7", "moved", "h3", 300)));
        t.erase("h3-7");
        t.hint(at("h1-1", "moved", "h3", 301), t.get("h1-1")); // never followed by a change
    });
    ASSERT_TRUE(fs::exists(dir_ + "/locations.log"));
    EXPECT_EQ(log_lines(), 7u) << "the crash left its changes in the log";

    Locations t;
    ASSERT_TRUE(t.open(dir_, "h1"));
    EXPECT_EQ(log_lines(), 0u) << "open folds the log into the snapshot";
    auto one = t.get("h1-1");
    ASSERT_TRUE(one);
    EXPECT_EQ(one->state, "moved");
    EXPECT_EQ(one->host, "h2");
    EXPECT_EQ(one->pid, 200) << "a shortcut alone is not written: lost in the crash";
    EXPECT_EQ(one->starttime, 4242u);
    EXPECT_EQ(one->uid, 1000u);
    EXPECT_EQ(one->comm, "ghost-counter");
    EXPECT_GT(one->updated_ms, 0u);
    auto two = t.get("h1-2");
    ASSERT_TRUE(two);
    EXPECT_EQ(two->state, "local");
    EXPECT_FALSE(t.get("h3-7")) << "erased";
    EXPECT_EQ(t.all().size(), 2u);
    ASSERT_EQ(t.local().size(), 1u) << "this host's own processes only";
    EXPECT_EQ(t.local()[0].gid, "h1-2");
    EXPECT_EQ(t.local_gid(101, 4242).value_or(""), "h1-2");
    EXPECT_FALSE(t.local_gid(101, 4243)) << "another process that reused the pid";
    EXPECT_FALSE(t.local_gid(200, 4242)) << "h1-1 is not here any more";
    EXPECT_EQ(t.new_gid(), "h1-3") << "gids are never given twice";
}

TEST_F(MigdLocations, AShortcutGoesWithTheNextChangeAndEverythingWithAClose) {
    crash_after([](Locations& t) {
        t.hint(at("h2-5", "moved", "h4", 55), std::nullopt);
        ASSERT_TRUE(t.set(at("h1-9", "local", "h1", 99)));
    });
    {
        Locations t;
        ASSERT_TRUE(t.open(dir_, "h1"));
        auto h = t.get("h2-5");
        ASSERT_TRUE(h) << "the shortcut was written with the change after it";
        EXPECT_EQ(h->host, "h4");
        t.hint(at("h2-6", "moved", "h2", 66), std::nullopt); // written at close
    }
    Locations t;
    ASSERT_TRUE(t.open(dir_, "h1"));
    EXPECT_TRUE(t.get("h2-6"));
    EXPECT_TRUE(t.get("h1-9"));
}

TEST_F(MigdLocations, ATornLastLineIsIgnoredAndADamagedOneRefused) {
    const std::string good =
        R"({"set":{"gid":"h1-1","state":"local","host":"h1","pid":7,"starttime":1,"uid":0,)"
        R"("comm":"c","updated_ms":1}})"
        "\n";
    write_log(good + R"({"set":{"gid":"h1-2","sta)");
    {
        Locations t;
        ASSERT_TRUE(t.open(dir_, "h1"));
        EXPECT_TRUE(t.get("h1-1"));
        EXPECT_FALSE(t.get("h1-2"));
        EXPECT_EQ(log_lines(), 0u);
    }
    write_log(good + "{not json\n" + good);
    Locations t;
    auto r = t.open(dir_, "h1");
    ASSERT_FALSE(r);
    EXPECT_NE(std::string(r.error().what()).find("locations.log is damaged at line 2"),
              std::string::npos)
        << r.error().what();
}

TEST_F(MigdLocations, AnEndedProcessIsMarkedThenForgottenAndOthersAreKept) {
    Locations t;
    ASSERT_TRUE(t.open(dir_, "h1"));
    ASSERT_TRUE(t.set(at("h1-1", "local", "h1", 100))); // ended
    ASSERT_TRUE(t.set(at("h1-2", "local", "h1", 101))); // runs
    ASSERT_TRUE(t.set(at("h1-3", "moved", "h2", 102))); // not this host's to judge
    const auto gone = [](const Location& l) { return l.pid != 101; };
    EXPECT_TRUE(t.forget_exited(3600 * 1000, gone).empty());
    ASSERT_TRUE(t.get("h1-1"));
    EXPECT_GT(t.get("h1-1")->exited_ms, 0u) << "marked when first seen gone";
    EXPECT_EQ(t.get("h1-2")->exited_ms, 0u);
    EXPECT_TRUE(t.forget_exited(3600 * 1000, gone).empty()) << "kept for an hour";
    // Moved away meanwhile: a new entry for the gid, not marked.
    ASSERT_TRUE(t.set(at("h1-1", "moved", "h3", 100)));
    EXPECT_TRUE(t.forget_exited(0, gone).empty());
    ASSERT_TRUE(t.set(at("h1-4", "local", "h1", 104)));
    EXPECT_TRUE(t.forget_exited(0, gone).empty()) << "marked first, even with no delay";
    EXPECT_EQ(t.forget_exited(0, gone), std::vector<std::string>{"h1-4"});
    EXPECT_FALSE(t.get("h1-4"));
    EXPECT_TRUE(t.get("h1-1") && t.get("h1-2") && t.get("h1-3"));
    // What a restarted migd reads: the log, replayed.
    crash_after([](Locations& c) {
        if (c.get("h1-4") || !c.get("h1-1") || c.get("h1-1")->host != "h3")
            ::_exit(4);
    });
}

// Forwarding entries are asked about by the host they point at, each at
// most once per keep_ms; one is forgotten only if it still points there
// unchanged, and the erase is in the log.
TEST_F(MigdLocations, AForwardingEntryIsAskedAboutOnceAndForgottenOnlyIfUnchanged) {
    Locations t;
    ASSERT_TRUE(t.open(dir_, "h1"));
    ASSERT_TRUE(t.set(at("h1-1", "moved", "h2", 100)));
    ASSERT_TRUE(t.set(at("h1-2", "moved", "h2", 101)));
    ASSERT_TRUE(t.set(at("h1-3", "moved", "h3", 102)));
    ASSERT_TRUE(t.set(at("h1-4", "local", "h1", 103))); // runs here: never asked
    EXPECT_TRUE(t.moved_to_ask(3600 * 1000, 100).empty()) << "changed within the hour";
    auto asked = t.moved_to_ask(0, 100);
    ASSERT_EQ(asked.size(), 2u);
    ASSERT_EQ(asked["h2"].size(), 2u);
    ASSERT_EQ(asked["h3"].size(), 1u);
    EXPECT_EQ(t.moved_to_ask(0, 100).size(), 2u) << "keep_ms 0: asked again at once";
    EXPECT_EQ(t.moved_to_ask(0, 1).begin()->second.size(), 1u) << "at most limit";
    // h1-2 moved on meanwhile (a shortcut learnt): h2's "unknown" is stale.
    t.hint(at("h1-2", "moved", "h3", 101), t.get("h1-2"));
    EXPECT_EQ(t.forget_moved("h2", asked["h2"]), std::vector<std::string>{"h1-1"});
    EXPECT_TRUE(t.forget_moved("h2", asked["h3"]).empty()) << "points at h3, not h2";
    EXPECT_FALSE(t.get("h1-1"));
    EXPECT_TRUE(t.get("h1-2") && t.get("h1-3") && t.get("h1-4"));
    crash_after([](Locations& c) {
        if (c.get("h1-1") || !c.get("h1-3"))
            ::_exit(4);
    });
}

// A lookup's answer is a shortcut only over the entry the lookup started
// from: not over a local entry, nor one that changed or went meanwhile.
TEST_F(MigdLocations, AShortcutNeverReplacesANewerOrLocalEntry) {
    Locations t;
    ASSERT_TRUE(t.open(dir_, "h1"));
    ASSERT_TRUE(t.set(at("h1-1", "moved", "h2", 10)));
    const auto seen = t.get("h1-1");
    ASSERT_TRUE(t.set(at("h1-1", "local", "h1", 11))); // it came back meanwhile
    t.hint(at("h1-1", "moved", "h3", 12), seen);
    EXPECT_EQ(t.get("h1-1")->state, "local");
    ASSERT_TRUE(t.set(at("h1-1", "moved", "h4", 13)));
    t.hint(at("h1-1", "moved", "h3", 12), seen); // older than the entry now
    EXPECT_EQ(t.get("h1-1")->host, "h4");
    t.hint(at("h1-1", "moved", "h3", 12), t.get("h1-1"));
    EXPECT_EQ(t.get("h1-1")->host, "h3") << "over the entry it started from";
    const auto before = t.get("h1-1");
    t.erase("h1-1");
    t.hint(at("h1-1", "moved", "h5", 14), before);
    EXPECT_FALSE(t.get("h1-1")) << "erased meanwhile";
    t.hint(at("h1-9", "moved", "h5", 15), std::nullopt);
    EXPECT_TRUE(t.get("h1-9")) << "no entry before, none now";
}

TEST_F(MigdLocations, TheLogIsFoldedIntoASnapshotBeforeItOutgrowsTheTable) {
    std::size_t most = 0;
    {
        Locations t;
        ASSERT_TRUE(t.open(dir_, "h1"));
        for (int i = 0; i < 3000; i++) {
            ASSERT_TRUE(t.set(at("h1-" + std::to_string(i % 10), "local", "h1", 1000 + i)));
            most = std::max(most, log_lines());
        }
        EXPECT_GT(most, 1000u) << "the log was used";
        EXPECT_LE(most, 1025u) << "and folded before it held more than 1024 records";
    }
    Locations t;
    ASSERT_TRUE(t.open(dir_, "h1"));
    EXPECT_EQ(t.all().size(), 10u);
    for (int k = 0; k < 10; k++)
        EXPECT_EQ(t.get("h1-" + std::to_string(k))->pid, 1000 + 2990 + k);
}

class MigdJournal : public StateDir {
  protected:
    void SetUp() override {
        StateDir::SetUp();
        if (HasFatalFailure())
            return;
        ASSERT_TRUE(j_.open(dir_));
    }
    std::string file(const std::string& id) const { return dir_ + "/journal/" + id + ".json"; }
    std::size_t lines(const std::string& id) const { return lines_in(file(id)); }
    migd::Journal j_;
};

// An id names a file in the state directory: nothing else is taken. An
// entry that cannot be read is an error, not "no record".
TEST_F(MigdJournal, IdsThatAreNotPlainNamesAreRefusedAndAnUnreadableEntryIsAnError) {
    for (const char* bad : {"", "../locations", "a/b", ".hidden", "h1 1", "h1.1\n"}) {
        EXPECT_FALSE(j_.put({{"id", bad}, {"state", "receiving"}})) << bad;
        EXPECT_FALSE(j_.get(bad)) << bad;
        auto l = j_.lookup(bad);
        ASSERT_TRUE(l) << bad;
        EXPECT_FALSE(*l) << bad;
    }
    EXPECT_TRUE(migd::Journal::valid_id("h1.1795920940608.12"));
    EXPECT_TRUE(migd::Journal::valid_id("store-1795920940608-3"));
    EXPECT_FALSE(migd::Journal::valid_id(std::string(201, 'a')));
    auto none = j_.lookup("h1.9.9");
    ASSERT_TRUE(none);
    EXPECT_FALSE(*none);
    fs::create_directories(file("h1.9.8")); // there, but not readable as a file
    auto broken = j_.lookup("h1.9.8");
    EXPECT_FALSE(broken) << "an entry that cannot be read passed for none";
}

TEST_F(MigdJournal, EachStateIsALineAndTheLastWholeOneCounts) {
    migd::json e = {{"id", "h1.1.1"}, {"role", "source"}, {"state", "sending"}, {"pid", 42}};
    ASSERT_TRUE(j_.put(e));
    e["state"] = "committing";
    ASSERT_TRUE(j_.put(e));
    e["dest_pid"] = 77;
    ASSERT_TRUE(j_.put(e));
    EXPECT_EQ(lines("h1.1.1"), 3u);
    auto got = j_.get("h1.1.1");
    ASSERT_TRUE(got);
    EXPECT_EQ(*got, e);
    ASSERT_TRUE(j_.put({{"id", "h1.1.2"}, {"state", "receiving"}}));
    const auto all = j_.all();
    ASSERT_EQ(all.size(), 2u);
    for (const auto& a : all)
        EXPECT_TRUE(a == e || a.value("state", "") == "receiving") << a.dump();
    j_.remove("h1.1.1");
    EXPECT_FALSE(j_.get("h1.1.1"));
    EXPECT_FALSE(fs::exists(file("h1.1.1")));
    EXPECT_EQ(j_.all().size(), 1u);
}

TEST_F(MigdJournal, ATornLastLineLeavesTheStateBeforeItAndTheNextStateStartsALine) {
    ASSERT_TRUE(j_.put({{"id", "x"}, {"state", "receiving"}}));
    std::ofstream(file("x"), std::ios::app) << R"({"id":"x","state":"rea)";
    EXPECT_EQ(j_.get("x").value_or(migd::json{}).value("state", ""), "receiving");
    ASSERT_TRUE(j_.put({{"id", "x"}, {"state", "ready"}, {"pid", 9}}));
    auto got = j_.get("x");
    ASSERT_TRUE(got);
    EXPECT_EQ(got->value("state", ""), "ready");
    EXPECT_EQ(got->value("pid", 0), 9);
    ASSERT_EQ(j_.all().size(), 1u);
    EXPECT_EQ(j_.all()[0].value("state", ""), "ready");
}

// A finished entry whose file will not go (here a directory in its place,
// which unlink() refuses even to root) is forgotten by this migd all the
// same: a resolver must not act on it again. Once the file is gone the id
// is free again.
TEST_F(MigdJournal, AFinishedEntryWhoseFileWillNotGoIsForgottenAllTheSame) {
    fs::create_directories(file("h1.2.2"));
    EXPECT_FALSE(j_.lookup("h1.2.2")) << "the stand-in should be unreadable before the removal";
    j_.remove("h1.2.2");
    auto l = j_.lookup("h1.2.2");
    ASSERT_TRUE(l) << "a removed entry is an error";
    EXPECT_FALSE(*l) << "a removed entry is still there";
    EXPECT_FALSE(j_.put({{"id", "h1.2.2"}, {"state", "ready"}})) << "a removed entry came back";
    EXPECT_TRUE(j_.all().empty());
    fs::remove(file("h1.2.2"));
    l = j_.lookup("h1.2.2");
    ASSERT_TRUE(l);
    EXPECT_FALSE(*l);
    EXPECT_TRUE(j_.put({{"id", "h1.2.2"}, {"state", "ready"}}));
    EXPECT_EQ(j_.get("h1.2.2").value_or(migd::json{}).value("state", ""), "ready");
}

TEST_F(MigdJournal, AnOlderMigdsWholeFileEntryIsReadAndGoesOn) {
    const migd::json old = {{"id", "y"},
                            {"role", "dest"},
                            {"state", "receiving"},
                            {"peer", "h2"},
                            {"nested", {{"a", 1}}}};
    std::ofstream(file("y")) << old.dump(2) << "\n";
    EXPECT_EQ(j_.get("y").value_or(migd::json{}), old);
    ASSERT_TRUE(j_.put({{"id", "y"}, {"role", "dest"}, {"state", "ready"}}));
    EXPECT_EQ(j_.get("y").value_or(migd::json{}).value("state", ""), "ready");
}

} // namespace
