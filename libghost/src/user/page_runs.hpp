// SPDX-License-Identifier: LGPL-2.1-or-later
// Which pages of a mapping an export carries (Documentation/user-engine.md,
// "Memory"): those that exist, present or swapped; of a file mapping only
// the private copies. Told by PAGEMAP_SCAN where the kernel has it (regions,
// a few milliseconds for a GiB), else by reading /proc/PID/pagemap, eight
// bytes a page.
#pragma once

#include <cstdint>
#include <vector>

#include "ghost/image.hpp"
#include "ghost/result.hpp"
#include "user/dirty.hpp"

namespace ghost::user {

// Entries of a pagemap read: one buffer for all of an export's mappings.
using PagemapBuffer = std::vector<std::uint64_t>;

// Fills v.runs and v.rec.nr_pages for the mapping v.rec describes, from the
// pagemap descriptor of its process. A guard page is refused (as
// ghost_policy_guard() words it). Pages an incremental export's parent
// holds unwritten make runs of their own, flagged parent.
Result<void> find_runs(int pagemap, image::Vma& v, PagemapBuffer& buf, const Parent* parent);

// The same from /proc/PID/pagemap alone: what find_runs() falls back on
// (and what tests hold PAGEMAP_SCAN's answers to).
Result<void> read_runs(int pagemap, image::Vma& v, PagemapBuffer& buf, const Parent* parent);

} // namespace ghost::user
