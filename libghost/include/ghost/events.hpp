// SPDX-License-Identifier: LGPL-2.1-or-later
// The export/import event stream of ghost.ko: every export and import the
// module finishes (or refuses) is announced on its generic netlink family
// "ghost", multicast group "events" (uapi/linux/ghost.h). An EventStream is
// one subscription to it.
//
// Only the kernel engine announces anything: the user engine (ptrace, in
// the calling process) emits no events, and a subscription sees nothing of
// its exports and imports. Opening a stream needs ghost.ko loaded (ENOENT
// otherwise) and CAP_NET_ADMIN (EPERM otherwise); nothing else of the
// engine (no /dev/ghost access).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ghost/result.hpp"

namespace ghost {

struct Event {
    enum class Kind { Export, Import };
    Kind kind = Kind::Export;
    // The exported process, or the importer (which becomes the image), as
    // a pid of the initial pid namespace.
    pid_t pid = 0;
    std::uint64_t bytes = 0;     // image bytes written or read
    std::uint64_t frozen_ns = 0; // export: how long the process was held
    int result = 0;              // 0, or the negative errno of the failure
    std::uint32_t flags = 0;     // the request's GHOST_EXPORT_* / GHOST_IMPORT_*
    std::string reason;          // on failure, why (may be empty)

    bool ok() const { return result == 0; }
    // The failure as an Error (an empty one for a success).
    Error error() const;
    // "run", "stop", "kill" (export fate); "prepare" or "restore" (import).
    std::string mode() const;
};

class EventStream {
  public:
    // Subscribes to ghost.ko's events: those that finish from now on.
    static Result<EventStream> open();

    EventStream(EventStream&&) noexcept;
    EventStream& operator=(EventStream&&) noexcept;
    EventStream(const EventStream&) = delete;
    EventStream& operator=(const EventStream&) = delete;
    ~EventStream();

    // The next event, waiting at most timeout (negative: forever); nullopt
    // when none came in time. An error (the socket failed, ENOBUFS when the
    // kernel dropped events because they were not read fast enough) leaves
    // the stream usable.
    Result<std::optional<Event>>
    next(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1));

    // A descriptor to poll for POLLIN: readable when events wait in the
    // kernel. Events already received are kept in the stream: after poll
    // says readable, call next(0ms) until it gives nullopt.
    int fd() const;

  private:
    struct Impl;
    explicit EventStream(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

} // namespace ghost
