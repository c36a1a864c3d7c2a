// SPDX-License-Identifier: GPL-2.0
// CRIU's stats-dump file, which `criu dump` leaves in its image directory:
// how long the dump held the process frozen (dump_stats_entry.frozen_time),
// what issue 15's benchmark sets beside ghost's frozen time. The guest of
// tests/vm has no crit (Python), so the few bytes are decoded here.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace bench {

struct CriuDumpStats {
    double freezing_ms = 0; // stopping the tasks
    double frozen_ms = 0;   // held still: from frozen to resumed (or killed)
    double memdump_ms = 0;  // collecting the pages (inside frozen_ms)
};

// Decodes a stats-dump file: IMG_SERVICE_MAGIC, STATS_MAGIC, then one entry
// (a 32-bit size and a protobuf StatsEntry whose field 1 is the
// dump_stats_entry). False, with why set, for anything else.
bool parse_criu_stats_dump(std::span<const std::byte> file, CriuDumpStats& out, std::string& why);

} // namespace bench
