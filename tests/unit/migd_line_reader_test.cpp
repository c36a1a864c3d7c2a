// SPDX-License-Identifier: GPL-2.0
// The control protocol's line reader (tools/migd_client/line_reader.hpp),
// used by migd for requests and by migd_client for replies.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "ghost/fd.hpp"
#include "line_reader.hpp"

namespace {

using ghost::UniqueFd;
using ghost::migd_client::LineReader;

struct Pair {
    UniqueFd a, b;
    Pair() {
        int sv[2];
        EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        a = UniqueFd(sv[0]);
        b = UniqueFd(sv[1]);
    }
};

// Writes text in pieces of step bytes from a thread, then closes. It stops
// early once the reader has closed its end (what the reader saw is what
// the tests check).
std::thread writer(UniqueFd& fd, std::string text, std::size_t step) {
    return std::thread([&fd, text = std::move(text), step] {
        for (std::size_t at = 0; at < text.size(); at += step)
            if (::send(fd.get(), text.data() + at, std::min(step, text.size() - at),
                       MSG_NOSIGNAL) <= 0)
                break;
        fd.reset();
    });
}

TEST(MigdLineReader, LinesSplitAcrossWritesComeWholeAndInOrder) {
    Pair p;
    const std::string big(3 << 20, 'x'); // spans many 64 KiB reads
    auto w = writer(p.b, "{\"a\":1}\n\n" + big + "\n{\"b\":2}\ntail", 1000);
    LineReader lines(p.a.get());
    EXPECT_EQ(lines.next(), "{\"a\":1}");
    EXPECT_EQ(lines.next(), "");
    EXPECT_EQ(lines.next(), big);
    EXPECT_EQ(lines.next(), "{\"b\":2}");
    EXPECT_EQ(lines.next(), std::nullopt); // "tail" has no newline: not a line
    EXPECT_FALSE(lines.too_long());
    w.join();
}

TEST(MigdLineReader, ALineLongerThanTheBoundEndsTheStream) {
    Pair p;
    auto w = writer(p.b, "ok\n" + std::string(200000, 'y') + "\nafter\n", 4096);
    LineReader lines(p.a.get(), 100000);
    EXPECT_EQ(lines.next(), "ok");
    EXPECT_EQ(lines.next(), std::nullopt);
    EXPECT_TRUE(lines.too_long());
    p.a.reset(); // the writer may still be blocked: closing ends it
    w.join();
}

} // namespace
