// SPDX-License-Identifier: GPL-2.0
// Bulk synchronous message passing: bsp_send buffers into the next SYNC
// frame; the queue holds the messages DELIVER brought, in the hub's order
// (by source pid, then send order).
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "bsp.h"
#include "state.hpp"

using namespace ghost::bsp::vp;

extern "C" {

void bsp_set_tagsize(int* tag_nbytes) {
    State& s = state();
    need_running("bsp_set_tagsize");
    if (!tag_nbytes || *tag_nbytes < 0)
        die("bsp_set_tagsize",
            fmt::format("tag size {} is negative", tag_nbytes ? *tag_nbytes : -1));
    s.new_tagsize = *tag_nbytes;
    *tag_nbytes = static_cast<int>(s.tagsize);
}

void bsp_send(int pid, const void* tag, const void* payload, int payload_nbytes) {
    State& s = state();
    need_running("bsp_send");
    if (pid < 0 || pid >= s.nprocs)
        die("bsp_send", fmt::format("pid {} is out of range (0..{})", pid, s.nprocs - 1));
    if (payload_nbytes < 0)
        die("bsp_send", fmt::format("size {} is negative", payload_nbytes));
    s.sends.u32(static_cast<std::uint32_t>(pid));
    s.sends.blob({static_cast<const std::byte*>(tag), static_cast<std::size_t>(s.tagsize)});
    s.sends.blob(
        {static_cast<const std::byte*>(payload), static_cast<std::size_t>(payload_nbytes)});
    ++s.nsends;
    s.bytes_sent += static_cast<std::uint64_t>(payload_nbytes);
}

void bsp_qsize(int* nmessages, int* accum_nbytes) {
    const State& s = state();
    need_running("bsp_qsize");
    std::size_t bytes = 0;
    for (std::size_t i = s.head; i < s.queue.size(); ++i)
        bytes += s.queue[i].len;
    *nmessages = static_cast<int>(s.queue.size() - s.head);
    if (accum_nbytes)
        *accum_nbytes = static_cast<int>(bytes);
}

void bsp_get_tag(int* status, void* tag) {
    const State& s = state();
    need_running("bsp_get_tag");
    if (s.head >= s.queue.size()) {
        *status = -1;
        return;
    }
    const Msg& m = s.queue[s.head];
    *status = static_cast<int>(m.len);
    if (m.tag_len > 0)
        std::memcpy(tag, m.tag, m.tag_len);
}

void bsp_move(void* payload, int reception_nbytes) {
    State& s = state();
    need_running("bsp_move");
    if (s.head >= s.queue.size())
        die("bsp_move", "the message queue is empty (check bsp_qsize or bsp_get_tag first)");
    if (reception_nbytes < 0)
        die("bsp_move", fmt::format("size {} is negative", reception_nbytes));
    const Msg& m = s.queue[s.head++];
    const std::size_t n = std::min(m.len, static_cast<std::size_t>(reception_nbytes));
    if (n > 0)
        std::memcpy(payload, m.payload, n);
}

int bsp_hpmove(void** tag_ptr_buf, void** payload_ptr_buf) {
    State& s = state();
    need_running("bsp_hpmove");
    if (s.head >= s.queue.size())
        return -1;
    const Msg& m = s.queue[s.head++];
    *tag_ptr_buf = const_cast<std::byte*>(m.tag);
    *payload_ptr_buf = const_cast<std::byte*>(m.payload);
    return static_cast<int>(m.len);
}

} // extern "C"
