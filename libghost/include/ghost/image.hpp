// SPDX-License-Identifier: LGPL-2.1-or-later
// Ghost images in user space: a validating reader that decodes an image from
// any byte source, and a writer that builds images (tests use it to make
// malformed ones on purpose). The format is that of uapi/linux/ghost.h and
// Documentation/image-format.md; the kernel engine writes it, ghost.ko reads
// it, and so do the tools through this reader.
//
// The reader checks everything that does not depend on the machine that will
// import the image: framing, order, sizes, padding, reserved fields, user
// addresses, mappings sorted and disjoint, page runs inside their mapping,
// page data page-aligned, descriptors ascending, the end checksum. It never
// opens a path or looks at the CPU. It reads front to back and never seeks,
// so it works on pipes, and it is meant to be safe on hostile input: no
// crash, no hang, bounded memory (fuzzed: tests/fuzz/).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <linux/ghost.h>

#include "ghost/fd.hpp"
#include "ghost/owner.hpp"
#include "ghost/result.hpp"

namespace ghost::image {

// CRC-32C (Castagnoli) as the image's END section uses it: crc32c(0, ...)
// of a whole buffer; chain by passing the previous value.
std::uint32_t crc32c(std::uint32_t crc, std::span<const std::byte> data);
// The same, always table-driven: what crc32c() uses on CPUs without SSE4.2
// (exposed so that tests compare the two).
std::uint32_t crc32c_portable(std::uint32_t crc, std::span<const std::byte> data);
// XXH64 (seed 0) of a whole buffer: the END checksum of images with
// GHOST_IMAGE_FEAT_XXH64.
std::uint64_t xxh64(std::span<const std::byte> data);
// Whether an image written here should end with XXH64 rather than crc32c:
// whichever checksums faster on this machine, timed once per process on
// 256 KiB. Natively the three-lane crc32c is faster; where the crc32
// instruction is emulated (the test VM's TCG) XXH64 is 20x faster. Readers
// take both, so the choice is the writer's alone. GHOST_IMAGE_CHECKSUM=xxh64
// or crc32c in the environment decides instead (tests, benchmarks).
bool prefer_xxh64();

class Checksum; // END's checksum on the way (src/checksum.hpp)

// Name of a section type ("task", "regs", ...; "unknown" otherwise).
std::string_view section_name(std::uint32_t type);

// Bytes of the record that begins a section of @type in images of
// @version, as this build knows it (version 1: the version-1 size, the
// smallest a reader takes); 0 for a type this reader does not know.
std::size_t record_size(std::uint32_t type, std::uint32_t version);

// A run of pages carried in a PAGES section.
struct PageRun {
    std::uint64_t addr = 0;
    std::uint64_t nr_pages = 0;
    std::uint64_t data_offset = 0; // stream offset of the first page's data (0: parent)
    // GHOST_PAGES_PARENT: no data here, the pages are the parent chain's.
    bool parent = false;
};

struct Vma {
    ghost_vma rec{};
    std::string path; // when rec.flags & GHOST_VMA_FILE
    std::vector<PageRun> runs;
};

struct File {
    ghost_file rec{};
    std::string path;
};

// A decoded image: every record but the page data (see ReadOptions).
struct Image {
    ghost_image_header header{};
    // Incremental images (GHOST_IMAGE_FEAT_PARENT): the parent they build
    // on, and its path as the writer knew it (a hint).
    std::optional<ghost_parent> parent;
    std::string parent_path;
    ghost_task task{};
    // Who the process was (a CREDS section; none in images before it, which
    // restore with the importer's credentials) and its supplementary groups.
    std::optional<ghost_creds> creds;
    std::vector<std::uint32_t> groups;
    // Process attributes (GHOST_IMAGE_FEAT_ATTRS); none in older images.
    std::optional<ghost_attrs> attrs;
    ghost_regs regs{};
    ghost_xstate xstate{};
    std::vector<std::byte> xsave; // xstate.size bytes of XSAVE area
    ghost_signals signals{};
    std::uint32_t umask = 0;
    std::string cwd;
    ghost_rlimits rlimits{};
    ghost_mm mm{};
    std::vector<Vma> vmas;
    std::vector<File> files;
    std::vector<ghost_lock> locks; // after the files they name (GHOST_IMAGE_FEAT_LOCKS)
    // END's checksum: crc32c, or with GHOST_IMAGE_FEAT_XXH64 xxh64 (crc32c 0).
    std::uint32_t crc32c = 0;
    std::uint64_t xxh64 = 0;
    std::uint64_t bytes = 0; // whole image, END included
    // Sections of unknown types flagged GHOST_SECTION_SKIPPABLE, read past.
    std::uint32_t skipped = 0;
    // False when the image has a form encode() does not reproduce: skipped
    // sections, or a record of another size than this reader's (for its
    // version). encode() writes such an image in the canonical form.
    bool exact = true;
    // Read with ReadOptions::skip_pages and page data was skipped: the END
    // checksum was not checked.
    bool unchecked = false;

    std::uint64_t pages() const;           // pages carried (with data), all mappings
    std::uint64_t inherited_pages() const; // pages in runs flagged GHOST_PAGES_PARENT
};

// Where the bytes come from, front to back.
class Source {
  public:
    virtual ~Source() = default;
    // Fills up to buf.size() bytes; 0 means end of stream.
    virtual Result<std::size_t> read(std::span<std::byte> buf) = 0;
    // The next n bytes where they are, without a copy, when the source
    // holds them in memory (and consumes them); empty when it does not, or
    // has fewer: then read() them.
    virtual std::span<const std::byte> take(std::size_t n) {
        (void)n;
        return {};
    }
    // The same as read(), for page data the reader puts straight into its
    // final place (ReadOptions::place): a source that keeps a copy of what
    // it reads need not keep these bytes.
    virtual Result<std::size_t> read_placed(std::span<std::byte> buf) { return read(buf); }
    // Moves past the next n bytes without reading them, where the source
    // can (a regular file: lseek); false when it cannot, and nothing moved.
    virtual Result<bool> skip(std::uint64_t n) {
        (void)n;
        return false;
    }
};

// Reads a buffer in memory (a memory ghost's view, a mapped file).
class SpanSource final : public Source {
  public:
    explicit SpanSource(std::span<const std::byte> data) : data_(data) {}
    Result<std::size_t> read(std::span<std::byte> buf) override;
    std::span<const std::byte> take(std::size_t n) override;
    Result<bool> skip(std::uint64_t n) override;

  private:
    std::span<const std::byte> data_;
    std::size_t off_ = 0;
};

// Reads a descriptor (file, pipe, socket); borrows it, does not close it.
class FdSource final : public Source {
  public:
    explicit FdSource(int fd) : fd_(fd) {}
    Result<std::size_t> read(std::span<std::byte> buf) override;
    Result<bool> skip(std::uint64_t n) override;

  private:
    int fd_;
};

struct ReadOptions {
    // Called for every page run with its data (nr_pages * page_size bytes),
    // in stream order; an error stops the read with that error. Without it
    // the data is skipped (still covered by the checksum). The reader holds
    // at most kPagesChunk bytes of page data at a time: a longer run comes in
    // several calls, each with a PageRun for just that part (its addr,
    // nr_pages and data_offset), ascending. The Vma is the one being read
    // (its runs so far, not this one). The data is only checked by the END
    // checksum, after the last call: a caller must not trust it before
    // read() succeeded.
    std::function<Result<void>(const Vma&, const PageRun&, std::span<const std::byte>)> on_pages;
    // Where a run's page data goes: called before each part of a run (the
    // parts on_pages gets) with the image read so far (header, mappings)
    // and the mapping being read; returns nr_pages * page_size bytes that
    // the reader fills straight from the source (Source::read_placed), or
    // an empty span to read the part as usual. on_pages then gets the
    // placed bytes. As for on_pages, the data is trusted only once read()
    // succeeded: a caller must not use it before.
    std::function<std::span<std::byte>(const Image&, const Vma&, const PageRun&)> place;
    // Refuse images larger than this (bytes), with std::errc::file_too_large;
    // 0: no limit.
    std::uint64_t max_bytes = 0;
    // Do not read page data where the source can skip it (Source::skip: a
    // regular file), and then do not check the END checksum, which covers
    // it: a quick look at an image's records (ghostctl naming the
    // descriptors a checkpoint's restart needs). Such a result describes
    // the image but does not vouch for it; Image::unchecked says so. Not
    // with on_pages or place, which want the data.
    bool skip_pages = false;
};

// Largest piece of page data given to ReadOptions::on_pages at once.
inline constexpr std::size_t kPagesChunk = 1 << 20;

// Reads and validates a whole image, and not one byte past its END section
// (what follows in a stream is left to the caller). Memory use is bounded by
// the image's records (never by a size field it has not yet checked) plus
// one kPagesChunk buffer. Errors carry std::errc::bad_message
// (EBADMSG) and a sentence naming what is wrong and at which byte; read
// errors of the source keep their own code.
Result<Image> read(Source& src, const ReadOptions& opts = {});
Result<Image> read(std::span<const std::byte> data, const ReadOptions& opts = {});

// Does img run as owner and as nothing more: credentials whose uids are
// all owner.uid, one gid (no set-group-id process) and, unless owner.uid is
// 0, that gid and its supplementary groups among the owner's, no
// capability and no hard limit above the calling process's own (whatever
// its CAP_SYS_RESOURCE)? EPERM and the reason otherwise, also for an image without
// credentials (it would run as whoever restores it). The rule both engines
// and migd apply (common/ghost_creds.h, RestoreOptions::owner).
Result<void> check_owner(const Image& img, const Owner& owner);

// Builds an image section by section, into memory or straight into a
// descriptor. It computes padding, page alignment and the END checksum, and
// checks nothing else: a test can write any sequence of sections, valid or
// not. It writes the version of the last header(): for version 1 records
// are cut to their version-1 size and the section headers' record_size is
// 0; later versions carry the record's whole size. Writing to a descriptor buffers up to 1 MiB of
// records and passes page data through; the first write error sticks (status()) and makes the rest
// no-ops.
class Writer {
  public:
    Writer();
    // Streams into fd (borrowed; written at its current offset).
    explicit Writer(int fd);
    ~Writer();
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;
    void header(const ghost_image_header& h);
    // A section with this payload, padded to 8 bytes.
    void section(std::uint32_t type, std::span<const std::byte> payload, std::uint16_t flags = 0,
                 std::uint16_t record_size = 0);
    // A record followed by a tail (a path, the XSAVE area).
    template <class T>
    void record(std::uint32_t type, const T& rec, std::span<const std::byte> tail = {}) {
        std::size_t n = sizeof(T);
        if (version_ == 1 && record_size(type, 1))
            n = std::min(n, record_size(type, 1));
        std::vector<std::byte> p(n + tail.size());
        std::memcpy(p.data(), &rec, n);
        if (!tail.empty())
            std::memcpy(p.data() + n, tail.data(), tail.size());
        section(type, p, 0, wire_record_size(n));
    }
    // A PAGES section for data.size() / page_size pages at addr, its data
    // page-aligned in the stream.
    void pages(std::uint64_t addr, std::span<const std::byte> data);
    // The same in pieces: the PAGES header for nr_pages pages at addr, then
    // exactly nr_pages pages of data through page_data(), in any slices.
    void pages_begin(std::uint64_t addr, std::uint64_t nr_pages);
    void page_data(std::span<const std::byte> data);
    // A PAGES section flagged GHOST_PAGES_PARENT: nr_pages pages at addr
    // that the parent image chain holds; no data.
    void parent_pages(std::uint64_t addr, std::uint64_t nr_pages);
    // END: checksum of everything written so far, an XXH64 when the header
    // had GHOST_IMAGE_FEAT_XXH64 (a whole END record), else a crc32c (an
    // END record of GHOST_END_SIZE_VER1 bytes, as before the feature);
    // flushes a descriptor.
    void end();
    // The END record end() wrote (its checksum names the image to a child).
    const ghost_end& end_record() const { return end_; }
    // Bytes of image so far (written or buffered).
    std::uint64_t offset() const { return flushed_ + out_.size(); }
    // The first error writing to the descriptor, if any.
    Result<void> status() const;
    // Memory mode: the image.
    std::vector<std::byte>& bytes() { return out_; }

  private:
    std::uint16_t wire_record_size(std::size_t n) const {
        return version_ == 1 ? 0 : static_cast<std::uint16_t>(n);
    }
    void put(std::span<const std::byte> b);
    void pad_to(std::uint64_t n);
    void flush();
    void write_out(std::span<const std::byte> b);
    std::vector<std::byte> out_;
    int fd_ = -1;
    std::uint64_t flushed_ = 0;     // bytes already written to fd_
    std::unique_ptr<Checksum> sum_; // of the flushed bytes
    std::uint32_t version_ = GHOST_IMAGE_VERSION;
    bool failed_ = false;
    Error err_;
    ghost_end end_{};
};

// Writes img through w, every record in the format's order and END last;
// pages(w, vma) writes each mapping's PAGES sections right after its VMA
// record (an error from it stops the writing). The result is w.status().
Result<void> write(Writer& w, const Image& img,
                   const std::function<Result<void>(Writer&, const Vma&)>& pages);

// Encodes a decoded image back into bytes (a valid image, if img is one);
// data gives each run's page data. Tests mutate an Image and encode it.
// Records are written as they are (path_len, nr_pages, nr_vmas, xstate.size
// are not recomputed, so they can be made inconsistent on purpose); what the
// Image does not hold is derived: FS's cwd_len from cwd, and each PAGES
// record's nr_pages and data_offset from the data given for the run.
// Encoding what read() decoded from an image of ghost.ko gives that image
// back, byte for byte.
std::vector<std::byte>
encode(const Image& img,
       const std::function<std::span<const std::byte>(const Vma&, const PageRun&)>& data);

} // namespace ghost::image
