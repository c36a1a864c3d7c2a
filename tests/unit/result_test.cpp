// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>
#include <type_traits>

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

TEST(Result, ValueOrGivesTheValueOrTheFallback) {
    EXPECT_EQ(parse_positive(7).value_or(42), 7);
    EXPECT_EQ(parse_positive(-1).value_or(42), 42);
    const ghost::Result<std::string> s = std::string("kept");
    EXPECT_EQ(s.value_or("fallback"), "kept");
    const ghost::Result<std::string> e = ghost::Error::from_errno(EIO, "gone");
    EXPECT_EQ(e.value_or("fallback"), "fallback");
    // On an rvalue the value is moved out.
    ghost::Result<std::unique_ptr<int>> p = std::make_unique<int>(5);
    auto moved = std::move(p).value_or(nullptr);
    ASSERT_TRUE(moved);
    EXPECT_EQ(*moved, 5);
}

TEST(Result, AndThenChainsOnValueAndPassesErrorsThrough) {
    int calls = 0;
    auto twice = [&](int v) -> ghost::Result<std::string> {
        ++calls;
        return std::to_string(v * 2);
    };
    auto ok = parse_positive(4).and_then(twice);
    ASSERT_TRUE(ok);
    EXPECT_EQ(*ok, "8");
    auto bad = parse_positive(0).and_then(twice);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().what(), "not positive");
    EXPECT_EQ(calls, 1);
    // f's own error comes out.
    auto refused = parse_positive(3).and_then(
        [](int) -> ghost::Result<int> { return ghost::Error::from_errno(EPERM, "refused"); });
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, std::errc::operation_not_permitted);
    // From Result<void>.
    ghost::Result<void> done;
    auto next = done.and_then([] { return parse_positive(9); });
    ASSERT_TRUE(next);
    EXPECT_EQ(*next, 9);
    ghost::Result<void> failed = ghost::Error::from_errno(EIO, "io");
    EXPECT_EQ(failed.and_then([] { return parse_positive(9); }).error().what(), "io");
}

TEST(Result, TransformMapsTheValue) {
    auto len = ghost::Result<std::string>(std::string("ghost")).transform([](const std::string& s) {
        return s.size();
    });
    static_assert(std::is_same_v<decltype(len), ghost::Result<std::size_t>>);
    ASSERT_TRUE(len);
    EXPECT_EQ(*len, 5u);
    int seen = 0;
    auto none = parse_positive(-3).transform([&](int v) { return seen = v; });
    ASSERT_FALSE(none);
    EXPECT_EQ(seen, 0);
    EXPECT_EQ(none.error().what(), "not positive");
    // A void function gives Result<void>.
    auto v = parse_positive(6).transform([&](int x) { seen = x; });
    static_assert(std::is_same_v<decltype(v), ghost::Result<void>>);
    EXPECT_TRUE(v);
    EXPECT_EQ(seen, 6);
    EXPECT_EQ(ghost::Result<void>().transform([] { return 1; }).value_or(0), 1);
}

TEST(Result, OrElseRecoversFromAnError) {
    auto fixed = parse_positive(-1).or_else([](const ghost::Error& e) -> ghost::Result<int> {
        return e.code == std::errc::invalid_argument ? 1 : 0;
    });
    ASSERT_TRUE(fixed);
    EXPECT_EQ(*fixed, 1);
    int calls = 0;
    auto kept = parse_positive(2).or_else([&](const ghost::Error&) -> ghost::Result<int> {
        ++calls;
        return 0;
    });
    EXPECT_EQ(*kept, 2);
    EXPECT_EQ(calls, 0);
    ghost::Result<void> failed = ghost::Error::from_errno(EIO, "io");
    EXPECT_TRUE(failed.or_else([](const ghost::Error&) { return ghost::Result<void>(); }));
}

// value() on an error is a contract violation: no exception, but a message
// naming the error and abort().
TEST(ResultDeathTest, ValueOfAnErrorAbortsWithItsMessage) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH((void)parse_positive(-1).value(), "value\\(\\) of a Result that holds an error: "
                                                   "not positive");
    EXPECT_DEATH((void)*parse_positive(-1), "not positive");
    EXPECT_DEATH(ghost::Result<void>(ghost::Error::from_errno(EIO, "disk gone")).value(),
                 "disk gone");
    EXPECT_DEATH((void)parse_positive(1).error(), "error\\(\\) of a Result that holds a value");
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
