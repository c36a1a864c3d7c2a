// SPDX-License-Identifier: LGPL-2.1-or-later
// Pre-copy in the user engine (ghost/precopy.hpp): each image's capture
// point scans the pages written since the previous one.
#include "user/precopy.hpp"

#include <fmt/format.h>

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

Result<std::optional<Parent>> precopy_capture(PrecopyState& s, Tracee& t, pid_t pid,
                                              std::uint64_t start_time) {
    if (!s.tracker) {
        auto tr = WpTracker::attach(t);
        if (!tr)
            return Error{tr.error().code,
                         fmt::format("cannot pre-copy process {}: {}", pid, tr.error().what())};
        s.tracker.emplace(std::move(*tr));
        s.pid = pid;
        s.start_time = start_time;
    } else if (s.pid != pid || s.start_time != start_time) {
        return Error::from_errno(EINVAL, fmt::format("this pre-copy is of process {}, not of "
                                                     "process {}",
                                                     s.pid, pid));
    }
    // The first scan arms the tracking (what it reports is sent whole
    // anyway); each later one tells what changed since the last image.
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
