// SPDX-License-Identifier: LGPL-2.1-or-later
#include <bit>

#include <fmt/format.h>
#include <linux/ghost.h>

#include "ghost/engine.hpp"

namespace ghost {

std::vector<std::string> feature_names(Features f) {
    static constexpr std::pair<Features, const char*> known[] = {
        {GHOST_FEAT_EXPORT, "export"},
        {GHOST_FEAT_IMPORT, "import"},
        {GHOST_FEAT_BACKEND_MEMORY, "backend-memory"},
        {GHOST_FEAT_BACKEND_FILE, "backend-file"},
        {GHOST_FEAT_BACKEND_NET, "backend-network"},
        {GHOST_FEAT_EVENTS, "events"},
        {GHOST_FEAT_IMPORT_STOPPED, "import-stopped"},
        {GHOST_FEAT_EXPORT_SNAPSHOT, "export-snapshot"},
        {GHOST_FEAT_IMPORT_DIRECT, "import-direct"},
        {GHOST_FEAT_IMPORT_OWNER, "import-owner"},
    };
    static_assert(std::size(known) ==
                  static_cast<std::size_t>(std::popcount(static_cast<Features>(GHOST_FEAT_ALL))));

    std::vector<std::string> names;
    for (int bit = 0; bit < 64; ++bit) {
        const Features b = Features{1} << bit;
        if (!(f & b))
            continue;
        std::string name = fmt::format("unknown-bit-{}", bit);
        for (const auto& [k, n] : known)
            if (k == b)
                name = n;
        names.push_back(std::move(name));
    }
    return names;
}

} // namespace ghost
