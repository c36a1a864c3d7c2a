// SPDX-License-Identifier: LGPL-2.1-or-later
// Pre-copy in the user engine (ghost/precopy.hpp): each image's capture
// point scans the pages written since the previous one.
#include "user/precopy.hpp"

#include <fmt/format.h>

#include "user/attrs.hpp"
#include "user/tracee.hpp"

namespace ghost {

Precopy::Precopy() : s_(std::make_unique<user::PrecopyState>()) {}
Precopy::~Precopy() = default;
Precopy::Precopy(Precopy&&) noexcept = default;
Precopy& Precopy::operator=(Precopy&&) noexcept = default;

Result<void> Precopy::supported() {
    return user::WpTracker::supported();
}

std::uint32_t Precopy::rounds() const {
    return s_->rounds;
}

std::uint64_t Precopy::last_page_bytes() const {
    return s_->page_bytes;
}

namespace user {

Result<void> precopy_arm(PrecopyState& s, pid_t pid, std::uint64_t start_time) {
    if (s.tracker) {
        if (s.pid != pid || s.start_time != start_time)
            return Error::from_errno(EINVAL, fmt::format("this pre-copy is of process {}, not of "
                                                         "process {}",
                                                         s.pid, pid));
        return {};
    }
    // Held only for the userfaultfd made in it; a seccomp filter would kill
    // it for that call.
    std::optional<WpTracker> tracker;
    auto made = with_held(pid, [&](Tracee& t) -> Result<void> {
        if (auto c = check_attrs(pid); !c)
            return c.error();
        auto tr = WpTracker::attach(t);
        if (!tr)
            return tr.error();
        tracker.emplace(std::move(*tr));
        return {};
    });
    if (!made)
        return Error{made.error().code,
                     fmt::format("cannot pre-copy process {}: {}", pid, made.error().what())};
    // The first scan protects every page (a write to each PTE, 15 ms a GiB
    // here) as the process runs on: what it writes from here on is reported
    // at the first capture, whose image carries every page anyway.
    if (auto armed = tracker->scan(pid); !armed)
        return Error{armed.error().code,
                     fmt::format("cannot pre-copy process {}: {}", pid, armed.error().what())};
    s.tracker = std::move(tracker);
    s.pid = pid;
    s.start_time = start_time;
    if (s.after_arm)
        s.after_arm();
    return {};
}

Result<std::optional<Parent>> precopy_capture(PrecopyState& s, pid_t pid,
                                              std::uint64_t start_time) {
    if (!s.tracker || s.pid != pid || s.start_time != start_time)
        return Error::from_errno(EINVAL,
                                 fmt::format("this pre-copy is not armed for process {}", pid));
    // What the process wrote since the arming (which the first image sends
    // whole anyway) or since the previous image, protected again.
    auto written = s.tracker->scan(pid);
    if (!written)
        return written.error();
    for (const auto& [from, to] : s.unsent.list())
        written->add(from, to);
    s.unsent = *written;
    if (s.rounds == 0)
        return std::optional<Parent>();
    ghost_parent rec{};
    rec.bytes = s.last.bytes;
    rec.crc32c = s.last.crc32c;
    rec.xxh64 = s.last.xxh64;
    rec.depth = s.last_depth + 1;
    rec.time_ns = s.last.time_ns;
    rec.start_time = start_time;
    rec.pid = pid;
    return std::optional<Parent>(
        Parent::of_round(rec, s.pages, s.tracker->tracked(), std::move(*written)));
}

void precopy_done(PrecopyState& s, const image::Image& img, const chain::ImageId& id, Ranges lost) {
    Ranges pages;
    std::uint64_t fresh = 0;
    for (const auto& v : img.vmas)
        for (const auto& r : v.runs) {
            pages.add(r.addr, r.addr + r.nr_pages * kPrecopyPage);
            if (!r.parent)
                fresh += r.nr_pages * kPrecopyPage;
        }
    s.pages = std::move(pages);
    // Pages the image could not read (unmapped as it ran) are written again.
    s.unsent = std::move(lost);
    s.page_bytes = fresh;
    s.last = id;
    s.last_depth = img.parent ? img.parent->depth : 0;
    s.rounds++;
}

} // namespace user
} // namespace ghost
