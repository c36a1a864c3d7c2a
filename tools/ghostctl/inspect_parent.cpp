// SPDX-License-Identifier: GPL-2.0
// inspect's account of an incremental image: its parent link, whether the
// parent is where the image says (checked), and what it inherits.
#include "inspect_parent.hpp"

#include <fmt/format.h>

#include "ghost/chain.hpp"

namespace ghostctl {

namespace {

// The parent as found (path), or why not.
std::pair<bool, std::string> locate(const std::string& name, const ghost::image::Image& img) {
    ghost::chain::Link child{name, {}, img};
    auto p = ghost::chain::find_parent(child);
    if (!p)
        return {false, p.error().what()};
    return {true, p->path};
}

} // namespace

void print_parent(const std::string& name, const ghost::image::Image& img) {
    if (!img.parent)
        return;
    const auto& p = *img.parent;
    fmt::print("parent     {} (depth {}): {}\n", img.parent_path, p.depth,
               ghost::chain::describe(ghost::chain::id_of(p)));
    const auto [found, where] = locate(name, img);
    fmt::print("  {}\n", found ? fmt::format("found and checked: {}", where)
                               : fmt::format("NOT USABLE: {}", where));
    fmt::print("  {} pages in this image, {} inherited from the parent chain\n", img.pages(),
               img.inherited_pages());
}

nlohmann::json parent_json(const std::string& name, const ghost::image::Image& img) {
    if (!img.parent)
        return nullptr;
    const auto& p = *img.parent;
    const auto [found, where] = locate(name, img);
    return {{"path", img.parent_path},
            {"depth", p.depth},
            {"bytes", p.bytes},
            {"crc32c", p.crc32c},
            {"xxh64", p.xxh64},
            {"time_ns", p.time_ns},
            {"pid", p.pid},
            {"start_time", p.start_time},
            {"found", found},
            {found ? "found_at" : "error", where}};
}

} // namespace ghostctl
