// SPDX-License-Identifier: LGPL-2.1-or-later
// The Engine interface: one way of turning processes into ghosts and back.
// The kernel engine drives ghost.ko through /dev/ghost; the user engine
// (ptrace, /proc) does the same where the module cannot be loaded.
//
// A Ghost holds one image in one backend: a memory buffer, a file (or pipe)
// or a connected stream socket. A process is exported into a ghost, and a
// ghost is imported by the process that wants to become the image.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ghost/owner.hpp"
#include "ghost/precopy.hpp"
#include "ghost/result.hpp"

namespace ghost {

// Feature bits are those of uapi/linux/ghost.h (GHOST_FEAT_*).
using Features = std::uint64_t;

// Names of the bits in f, in bit order; unknown bits as "unknown-bit-N".
std::vector<std::string> feature_names(Features f);

struct EngineInfo {
    std::string engine;  // "kernel" or "user"
    std::string version; // interface version, "major.minor.patch"
    Features features = 0;
    std::uint32_t image_version = 0; // format export writes (0: cannot export)
    std::uint32_t image_min = 0;     // oldest format import reads (0: cannot import)
};

enum class EngineKind { Auto, Kernel, User };

// What becomes of an exported process once its image is complete.
enum class Fate {
    Run,  // keeps running: checkpoint, duplication
    Stop, // stays stopped (SIGSTOP): migration
    Kill, // is killed: checkpoint-and-exit, as criu dump does
};

struct ExportStats {
    std::uint64_t bytes = 0;     // image size
    std::uint64_t frozen_ns = 0; // how long the process was held still
    // The pages were copied while the process ran on, from a copy-on-write
    // snapshot (a fork made at the capture point) or, in a pre-copy round,
    // from the process itself: a Fate::Run export where the engine could;
    // otherwise it was held for the whole copy.
    bool copy_on_write = false;
    // Before it was held, how long the process ran on with its system calls
    // watched while the export read what it could ahead (the last image of a
    // user-engine pre-copy); not part of frozen_ns.
    std::uint64_t watched_ns = 0;
};

// Where a ghost keeps its image. The descriptor is borrowed: the ghost takes
// its own reference, the caller still closes its fd. (Kind::Memory is what
// backend() of a MemoryGhost says; Engine::create_memory() makes one.)
struct Backend {
    enum class Kind { Memory, File, Socket };
    Kind kind = Kind::Memory;
    int fd = -1;
    std::uint64_t capacity = 0; // Memory: largest image (0: the engine's default)

    static Backend memory(std::uint64_t capacity = 0) { return {Kind::Memory, -1, capacity}; }
    static Backend file(int fd) { return {Kind::File, fd, 0}; }
    static Backend socket(int fd) { return {Kind::Socket, fd, 0}; }
};

// A read-only view of a memory ghost's image; unmaps itself.
class ImageView {
  public:
    ImageView() = default;
    ImageView(const void* addr, std::size_t len);
    ImageView(ImageView&& o) noexcept;
    ImageView& operator=(ImageView&& o) noexcept;
    ImageView(const ImageView&) = delete;
    ImageView& operator=(const ImageView&) = delete;
    ~ImageView();

    std::span<const std::byte> bytes() const {
        return {static_cast<const std::byte*>(addr_), len_};
    }

  private:
    const void* addr_ = nullptr;
    std::size_t len_ = 0;
};

// What restore_self() does besides becoming the image.
struct RestoreOptions {
    // The restored process stops (SIGSTOP, a group-stop: state T, and
    // waitpid(WUNTRACED) reports it to its parent) before it runs one
    // instruction of the image; SIGCONT lets it go on, SIGKILL ends it.
    bool stopped = false;
    // restart_self(): the input is a pre-copy's sequence of images
    // (RestartOptions::sequence).
    bool sequence = false;
    // With sequence: called each time one more image has been taken in.
    std::function<void()> image_done;
    // The kernel engine reads page data from an image file straight into
    // place, after its point of no return (GHOST_IMPORT_DIRECT, where the
    // module has it): one copy of every page fewer, but damaged page data
    // then kills the caller instead of failing the call. For a process
    // that exists to become the image (the restore stub).
    bool direct = false;
    // The user engine restores a file's image lazily: the process runs
    // before its anonymous memory is in, which a pager process puts in from
    // the image file, read in place under a read lease, on first touch or
    // in the background (Documentation/user-engine.md, "Lazy restart").
    // Needs CAP_SYS_PTRACE (userfaultfd's fork events).
    bool lazy = false;
    // The image must run as this user and as nothing more
    // (image::check_owner(): all its uids the owner's, one gid, its gids
    // among the owner's, no capability unless root). Anything else, or an
    // image without credentials (it would run as the restorer), is refused
    // (EPERM) before any file the image names is opened or locked, by
    // either engine (common/ghost_creds.h). The kernel engine checks the
    // gids against the caller's own, which must be the owner's (the
    // restore stub takes them). For a privileged restorer acting for a
    // user (migd).
    std::optional<Owner> owner;
};

// A ghost on a file (or pipe) or a socket: Engine::create(). A memory
// ghost, whose image the caller may also write and read, is a MemoryGhost.
class Ghost {
  public:
    virtual ~Ghost() = default;

    // Captures process pid into the backend. Only its owner (or root) may;
    // on failure the process is left running as it was, and the error says
    // why (for state ghost cannot carry: EOPNOTSUPP and what it is).
    virtual Result<ExportStats> export_process(pid_t pid, Fate fate) = 0;

    // The same as an incremental image: only the pages written since the
    // image at path parent, which must be the process's last leave-running
    // checkpoint (ghost/chain.hpp; Documentation/image-format.md). Only the
    // user engine tracks written pages: this default refuses (EOPNOTSUPP).
    virtual Result<ExportStats> export_incremental(pid_t pid, Fate fate, const std::string& parent);

    // The next image of a pre-copy (ghost/precopy.hpp): whole the first
    // time, then only the pages written since the previous one. The user
    // engine's; this default refuses (EOPNOTSUPP).
    virtual Result<ExportStats> export_precopy(pid_t pid, Fate fate, Precopy& precopy);

    // Replaces the calling process with the image, like execve(): returns
    // only on failure, with the caller unchanged (but for where its vDSO
    // is). The caller must be single-threaded; descriptors the image marks
    // as inherited must be open at the same numbers. Not for a
    // multithreaded caller: restart() spawns the restore stub, which calls it.
    virtual Error restore_self(const RestoreOptions& opts = {}) = 0;

    virtual const Backend& backend() const = 0;
};

// A ghost whose image lives in memory (Engine::create_memory()): after an
// export the caller can read the image (view()), and an image that arrives
// from elsewhere (e.g. decompressed) is written into it (write()) to be
// restored. Only memory ghosts have these operations.
class MemoryGhost : public Ghost {
  public:
    // Appends image bytes.
    virtual Result<void> write(std::span<const std::byte> data) = 0;

    // The image bytes (after an export or writes).
    virtual Result<ImageView> view() = 0;
};

class Engine {
  public:
    virtual ~Engine() = default;
    virtual std::string_view name() const = 0;
    virtual Result<EngineInfo> info() = 0;

    // A new, empty ghost on a file (or pipe) or socket backend. A memory
    // backend is refused (EINVAL): create_memory() makes memory ghosts.
    virtual Result<std::unique_ptr<Ghost>> create(const Backend& backend) = 0;

    // A new, empty memory ghost holding at most capacity bytes (0: the
    // engine's default).
    virtual Result<std::unique_ptr<MemoryGhost>> create_memory(std::uint64_t capacity = 0) = 0;

    // Opens the engine of that kind; Auto picks the kernel engine when its
    // device node exists, else the user engine. device is the kernel
    // engine's device node.
    static Result<std::unique_ptr<Engine>> open(EngineKind kind = EngineKind::Auto,
                                                std::string_view device = default_device);

    static constexpr std::string_view default_device = "/dev/ghost";
};

// "auto", "kernel", "user" -> kind; errors name the accepted values.
Result<EngineKind> parse_engine_kind(std::string_view s);

} // namespace ghost
