// SPDX-License-Identifier: LGPL-2.1-or-later
// Incremental images: an image with GHOST_IMAGE_FEAT_PARENT holds only the
// pages written since its parent was taken and names the parent by content
// (struct ghost_parent). A chain is such an image, its parent, the parent's
// parent ..., down to a whole image. This reads and checks chains, finds a
// page's data in the newest image that has it, and flattens a chain into
// one whole image (what restart does before either engine imports it).
// Documentation/image-format.md, "Incremental images", has the guarantee.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ghost/engine.hpp"
#include "ghost/image.hpp"
#include "ghost/result.hpp"

namespace ghost::chain {

// What names an image to its children: its size, END checksum (crc32c, or
// xxh64 with the other 0), capture time and pid (the fields of struct
// ghost_parent).
struct ImageId {
    std::uint64_t bytes = 0;
    std::uint32_t crc32c = 0;
    std::uint64_t time_ns = 0;
    pid_t pid = 0;
    std::uint64_t xxh64 = 0;
    bool operator==(const ImageId&) const = default;
};

ImageId id_of(const image::Image& img);
ImageId id_of(const ghost_parent& p);
// "pid N's image of <UTC time> (B bytes, crc32c 0x...)" (or xxh64 0x...).
std::string describe(const ImageId& id);

// One image, read and checked (END checksum included), its bytes mapped:
// raw images in place, compressed ones decompressed into memory.
struct Link {
    std::string path;
    ImageView view;
    image::Image img;
};

// Loads the image at path (raw or zstd). Errors name the path.
Result<Link> load(const std::string& path);
// The same from fd (borrowed; read from its current offset); path names it.
Result<Link> load_fd(int fd, const std::string& path);
// The same from bytes already in memory (copied).
Result<Link> load_bytes(std::span<const std::byte> bytes, const std::string& path);

// Images read one after another from fd (borrowed) to its end, each kept
// in a memory file and checked (END checksum included): a pre-copy's
// sequence (ghost/precopy.hpp), oldest first. Errors name "name, image N".
// At most GHOST_PARENT_DEPTH_MAX + 1 images.
// on_image, if given, is called with each image as soon as it checked out.
//
// place, if given, is image::ReadOptions::place for every image: page data
// it places is not kept in the image's memory file (which has a hole of
// the same length there, so the Link's view still has every other byte at
// its offset).
using Place = std::function<std::span<std::byte>(const image::Image&, const image::Vma&,
                                                 const image::PageRun&)>;
Result<std::vector<Link>>
read_sequence(int fd, const std::string& name,
              const std::function<Result<void>(const Link&)>& on_image = {},
              const Place& place = {});
// The same from any source (a decompressed stream).
Result<std::vector<Link>>
read_sequence(image::Source& in, const std::string& name,
              const std::function<Result<void>(const Link&)>& on_image = {},
              const Place& place = {});

// Whether child's PARENT record names parent (same id, depth one more,
// same process start time where both record one); the error says how not.
Result<void> check_link(const Link& child, const Link& parent);

// Finds and loads child's parent: the path its PARENT record holds, else a
// file of the same name in child's directory; each candidate must pass
// check_link(). ENOENT or EBADMSG naming what was tried otherwise.
Result<Link> find_parent(const Link& child);

// Where pages of the newest image are: in links[link] at stream offset
// offset (link == kNoLink: in a parent that was not followed).
struct Extent {
    std::uint64_t addr = 0;
    std::uint64_t nr_pages = 0;
    std::size_t link = 0;
    std::uint64_t offset = 0;
};
inline constexpr std::size_t kNoLink = ~std::size_t{0};

class Chain {
  public:
    // Follows top's parents down to a whole image (whole) or stops at top
    // (!whole: inherited runs then have no data here, link kNoLink).
    static Result<Chain> follow(Link top, bool whole = true);
    // A chain of images already loaded, oldest first (read_sequence()):
    // each must be the parent of the next (check_link()), the first whole.
    static Result<Chain> of(std::vector<Link> oldest_first);

    const Link& top() const { return links_.front(); }
    const std::vector<Link>& links() const { return links_; }
    // The newest image's pages, sorted and disjoint, each from the newest
    // image that has it.
    const std::vector<Extent>& extents() const { return extents_; }
    // Whether the newest image has the page at addr.
    bool has(std::uint64_t addr) const { return find(addr) != nullptr; }
    // The page's data, empty when it has none here (or no page).
    std::span<const std::byte> page(std::uint64_t addr) const;
    // Writes the whole image the chain stands for to out (borrowed): top's
    // records with every page's data, no PARENT section.
    Result<void> flatten(int out) const;
    // The same into a memory file of its own (libghost's descriptor range),
    // read from offset 0.
    Result<UniqueFd> flattened() const;

  private:
    const Extent* find(std::uint64_t addr) const;
    // extents_ from links_ (whole: down to the last link's parents).
    Result<void> resolve_all(bool whole);
    std::vector<Link> links_;
    std::vector<Extent> extents_;
};

// For restart: when the image at fd is incremental (GHOST_IMAGE_FEAT_PARENT,
// told from its header without moving fd's offset), a memory file holding
// the flattened chain, read from offset 0; otherwise an empty UniqueFd.
// With owner, an image that does not run as that user
// (image::check_owner) is refused before any parent is opened.
Result<UniqueFd> flatten_if_incremental(int fd, const Owner* owner = nullptr);
// The same for an image in memory; dir is where to look for parents besides
// their recorded paths (empty: nowhere else).
Result<UniqueFd> flatten_if_incremental(std::span<const std::byte> bytes, const std::string& dir,
                                        const Owner* owner = nullptr);

} // namespace ghost::chain
