// SPDX-License-Identifier: GPL-2.0
// The body of a thread of migd's: an exception escaping one (nlohmann
// throws on a field of the wrong type, the allocator on exhaustion) would
// std::terminate() the whole daemon, every migration in flight with it.
#pragma once

#include <exception>
#include <utility>

#include <spdlog/spdlog.h>

namespace migd {

// Runs f(); an exception is logged as what failed, and goes no further.
template <class F> void guarded(const char* what, F&& f) noexcept {
    try {
        std::forward<F>(f)();
    } catch (const std::exception& e) {
        spdlog::error("{}: {}", what, e.what());
    } catch (...) {
        spdlog::error("{}: an unknown exception", what);
    }
}

} // namespace migd
