// SPDX-License-Identifier: GPL-2.0
// inspect's account of an incremental image's parent (inspect_parent.cpp).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ghost/image.hpp"

namespace ghostctl {

// The "parent" lines of the summary; nothing for a whole image.
void print_parent(const std::string& name, const ghost::image::Image& img);
// The "parent" member of inspect --json; null for a whole image.
nlohmann::json parent_json(const std::string& name, const ghost::image::Image& img);

} // namespace ghostctl
