// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "ghost/fd.hpp"
#include "ghost/result.hpp"

#include <fcntl.h>

namespace {

ghost::Result<int> parse_positive(int v) {
    if (v <= 0)
        return ghost::Error::from_errno(EINVAL, "not positive");
    return v;
}

TEST(Result, CarriesValue) {
    auto r = parse_positive(7);
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 7);
}

TEST(Result, CarriesErrorCodeAndMessage) {
    auto r = parse_positive(-1);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, std::errc::invalid_argument);
    EXPECT_EQ(r.error().what(), "not positive");
}

TEST(Result, ErrorWithoutMessageFallsBackToCodeText) {
    const auto e = ghost::Error::from_errno(ENOENT, "");
    EXPECT_EQ(e.what(), std::generic_category().message(ENOENT));
}

TEST(UniqueFd, ClosesOnDestructionAndMove) {
    int raw;
    {
        ghost::UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        ASSERT_TRUE(a);
        raw = a.get();
        ghost::UniqueFd b(std::move(a));
        EXPECT_FALSE(a);
        EXPECT_EQ(b.get(), raw);
        EXPECT_NE(::fcntl(raw, F_GETFD), -1);
    }
    EXPECT_EQ(::fcntl(raw, F_GETFD), -1);
    EXPECT_EQ(errno, EBADF);
}

} // namespace
