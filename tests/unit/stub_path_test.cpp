// SPDX-License-Identifier: GPL-2.0
// Which restore stub a root caller accepts (ghost::restore_stub_path()):
// only one root owns and nobody else may write, in a directory likewise.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "ghost/process.hpp"

namespace {

namespace fs = std::filesystem;

TEST(StubPath, RootRunsOnlyAStubNobodyElseCouldHaveReplaced) {
    if (::geteuid() != 0)
        GTEST_SKIP() << "the rule is for root";
    const fs::path dir = fs::temp_directory_path() / ("ghost-stub-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    ::chmod(dir.c_str(), 0755);
    const fs::path stub = dir / "ghost-restore-stub";
    fs::copy_file("/bin/true", stub, fs::copy_options::overwrite_existing);
    ::chmod(stub.c_str(), 0755);

    auto ok = ghost::restore_stub_path(stub.string());
    ASSERT_TRUE(ok) << ok.error().what();
    EXPECT_EQ(*ok, stub.string());

    ::chmod(stub.c_str(), 0775); // group-writable
    auto group = ghost::restore_stub_path(stub.string());
    ASSERT_FALSE(group);
    EXPECT_NE(std::string(group.error().what()).find("writable by nobody else"), std::string::npos)
        << group.error().what();

    ::chmod(stub.c_str(), 0755);
    ASSERT_EQ(::chown(stub.c_str(), 65534, 65534), 0); // another user's
    EXPECT_FALSE(ghost::restore_stub_path(stub.string()));

    ASSERT_EQ(::chown(stub.c_str(), 0, 0), 0);
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0); // in another user's directory
    EXPECT_FALSE(ghost::restore_stub_path(stub.string()));
    fs::remove_all(dir);
}

} // namespace
