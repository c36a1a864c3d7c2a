// SPDX-License-Identifier: GPL-2.0
// The C++ layer (ghost/bsp.hpp): RAII registration, span puts/gets, sends,
// and the message range. Prints "cxx ok P" on pid 0.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ghost/bsp.hpp"

namespace bsp = ghost::bsp;

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            bsp_abort("cxx: pid %d: check failed: %s (line %d)", bsp_pid(), #c, __LINE__);         \
    } while (0)

int main(int argc, char** argv) {
    bsp_begin(argc > 1 ? std::atoi(argv[1]) : bsp_nprocs());
    const int p = bsp::nprocs(), s = bsp::pid(), next = (s + 1) % p;
    std::array<int, 4> box{};
    std::array<int, 4> got{};
    {
        bsp::Registration reg(std::span{box});
        bsp::sync();
        const std::array<int, 2> two{s, s * 2};
        bsp::put(next, std::span<const int>(two), box.data(), 2);
        bsp::sync();
        CHECK(box[2] == (s - 1 + p) % p && box[3] == 2 * ((s - 1 + p) % p));
        bsp::get(next, box.data(), 2, std::span<int>(got).first(2));
        bsp::sync();
        CHECK(got[0] == s && got[1] == 2 * s);
    } // popped here: takes effect at the next sync
    int ts = sizeof(int);
    bsp_set_tagsize(&ts);
    bsp::sync();
    const int tag = 100 + s;
    const char text[] = "hello";
    bsp::send(next, std::as_bytes(std::span(&tag, 1)), std::as_bytes(std::span(text)));
    bsp::sync();
    int n = 0;
    for (const bsp::Message& m : bsp::Messages(sizeof(int))) {
        int t;
        std::memcpy(&t, m.tag.data(), sizeof t);
        CHECK(t == 100 + (s - 1 + p) % p);
        CHECK(m.payload.size() == sizeof text);
        CHECK(std::memcmp(m.payload.data(), "hello", 6) == 0);
        ++n;
    }
    CHECK(n == 1);
    if (s == 0)
        std::printf("cxx ok %d\n", p);
    bsp_end();
    return 0;
}
