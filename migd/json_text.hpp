// SPDX-License-Identifier: GPL-2.0
// JSON in and out of migd where its text comes from, or goes to, someone
// else: requests are parsed with a bound on their nesting (copying or
// printing a JSON value recurses once per level: a line of 100,000 '['
// would overflow the stack), and values are printed with invalid UTF-8
// replaced (a process name may hold any bytes; nlohmann throws on them).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace migd {

// Deeper than any request or record of migd's (a job manifest is 4 deep).
inline constexpr int max_json_depth = 64;

// text as JSON: discarded (is_discarded()) when it is not JSON or nests
// deeper than max_json_depth; never throws.
inline nlohmann::json parse_bounded(std::string_view text) {
    bool too_deep = false;
    auto j = nlohmann::json::parse(
        text,
        [&too_deep](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
            if (depth > max_json_depth)
                too_deep = true;
            return !too_deep; // nothing deeper is kept
        },
        /*allow_exceptions=*/false);
    return too_deep ? nlohmann::json(nlohmann::json::value_t::discarded) : j;
}

// j as text (indent as json::dump()), invalid UTF-8 replaced by U+FFFD.
inline std::string json_text(const nlohmann::json& j, int indent = -1) {
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace migd
