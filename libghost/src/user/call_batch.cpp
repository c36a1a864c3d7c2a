// SPDX-License-Identifier: LGPL-2.1-or-later
// System calls run inside a tracee a table at a time (call_batch.hpp).
#include "user/call_batch.hpp"

#include <cerrno>
#include <utility>

#include <fmt/format.h>

#include "sys.hpp"

namespace ghost::user {

namespace {

constexpr std::uint8_t kLoop[] = {
    0x49, 0x8b, 0x04, 0x24, 0x49, 0x8b, 0x7c, 0x24, 0x08, 0x49, 0x8b, 0x74, 0x24, 0x10, 0x49,
    0x8b, 0x54, 0x24, 0x18, 0x4d, 0x8b, 0x54, 0x24, 0x20, 0x4d, 0x8b, 0x44, 0x24, 0x28, 0x4d,
    0x8b, 0x4c, 0x24, 0x30, 0x0f, 0x05, 0x49, 0x89, 0x44, 0x24, 0x38, 0x48, 0x3d, 0x01, 0xf0,
    0xff, 0xff, 0x73, 0x09, 0x49, 0x83, 0xc4, 0x40, 0x4d, 0x39, 0xec, 0x75, 0xc6, 0xcc};

// kLoop without its test of each result (cmp rax, -4095; jae done): every
// entry runs, and jne's offset is 8 bytes shorter.
constexpr std::uint8_t kEach[] = {0x49, 0x8b, 0x04, 0x24, 0x49, 0x8b, 0x7c, 0x24, 0x08, 0x49, 0x8b,
                                  0x74, 0x24, 0x10, 0x49, 0x8b, 0x54, 0x24, 0x18, 0x4d, 0x8b, 0x54,
                                  0x24, 0x20, 0x4d, 0x8b, 0x44, 0x24, 0x28, 0x4d, 0x8b, 0x4c, 0x24,
                                  0x30, 0x0f, 0x05, 0x49, 0x89, 0x44, 0x24, 0x38, 0x49, 0x83, 0xc4,
                                  0x40, 0x4d, 0x39, 0xec, 0x75, 0xce, 0xcc};

} // namespace

std::span<const std::byte> call_loop_code() {
    return std::as_bytes(std::span(kLoop));
}

std::span<const std::byte> call_each_code() {
    return std::as_bytes(std::span(kEach));
}

namespace {

// Writes the table, runs the loop at code over it, reads it back (every
// entry's result) and returns where the loop stopped (its r12).
Result<std::uint64_t> run_table(Tracee& t, const Regs& base, std::uint64_t code,
                                std::uint64_t table, std::span<CallEntry> calls) {
    const auto bytes = std::as_writable_bytes(calls);
    if (auto w = t.write(table, bytes); !w)
        return w.error();
    Regs r = base;
    r.rip = code;
    r.r12 = table;
    r.r13 = table + bytes.size();
    auto done = t.run_to_trap(r);
    if (!done)
        return done.error();
    if (auto rd = t.read(table, bytes); !rd)
        return rd.error();
    return done->r12;
}

} // namespace

Result<void> run_each(Tracee& t, const Regs& base, std::uint64_t code, std::uint64_t table,
                      std::span<CallEntry> calls) {
    if (calls.empty())
        return {};
    if (auto w = t.write(code, call_each_code()); !w)
        return w;
    auto at = run_table(t, base, code, table, calls);
    if (!at)
        return at.error();
    if (*at != table + calls.size_bytes())
        return Error::from_errno(EIO, fmt::format("the system call loop in pid {} stopped at "
                                                  "{:#x}, not at the end of its table",
                                                  t.pid(), *at));
    return {};
}

CallBatch::CallBatch(Tracee& t, const Regs& base, std::uint64_t code, std::uint64_t table,
                     std::size_t capacity)
    : t_(t), base_(base), code_(code), table_(table), capacity_(capacity) {
    entries_.reserve(capacity);
    pending_.reserve(capacity);
}

Result<void> CallBatch::add(std::string what, long nr, std::uint64_t a1, std::uint64_t a2,
                            std::uint64_t a3, std::uint64_t a4, std::uint64_t a5, std::uint64_t a6,
                            std::optional<std::uint64_t> expect) {
    if (entries_.size() == capacity_)
        if (auto r = flush(); !r)
            return r;
    entries_.push_back({static_cast<std::uint64_t>(nr), {a1, a2, a3, a4, a5, a6}, 0});
    pending_.push_back({std::move(what), expect});
    return {};
}

Result<void> CallBatch::flush() {
    if (entries_.empty())
        return {};
    // The queue is taken whatever happens: what failed is not run again.
    std::vector<CallEntry> entries;
    std::vector<Pending> pending;
    entries.reserve(capacity_);
    pending.reserve(capacity_);
    std::swap(entries, entries_);
    std::swap(pending, pending_);
    auto done = run_table(t_, base_, code_, table_, entries);
    if (!done)
        return done.error();
    // r12 is on the entry that failed, or at the end when none did.
    const std::uint64_t at = *done;
    const std::uint64_t end = table_ + entries.size() * sizeof(CallEntry);
    if (at < table_ || at > end || (at - table_) % sizeof(CallEntry))
        return Error::from_errno(EIO, fmt::format("the system call loop in pid {} stopped at "
                                                  "{:#x}, outside its table",
                                                  t_.pid(), at));
    const std::size_t ran = (at - table_) / sizeof(CallEntry);
    for (std::size_t i = 0; i < entries.size() && i <= ran; i++) {
        const auto res = static_cast<long>(entries[i].result);
        if (i == ran) { // the loop stopped on it: it failed
            if (!is_err(res))
                return Error::from_errno(EIO, fmt::format("{}: the system call loop stopped "
                                                          "without an error",
                                                          pending[i].what));
            return Error::from_errno(
                static_cast<int>(-res),
                fmt::format("{}: {}", pending[i].what, errno_text(static_cast<int>(-res))));
        }
        if (pending[i].expect && entries[i].result != *pending[i].expect)
            return Error::from_errno(EFAULT, fmt::format("{}: the result was {:#x}, not {:#x}",
                                                         pending[i].what, entries[i].result,
                                                         *pending[i].expect));
    }
    return {};
}

} // namespace ghost::user
