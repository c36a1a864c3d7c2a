// SPDX-License-Identifier: GPL-2.0
// RecordHook (see record.hpp).
#include "record.hpp"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace ghost::bsp {

Result<RecordHook> RecordHook::open(const std::string& path) {
    std::unique_ptr<std::FILE, FileClose> f(std::fopen(path.c_str(), "we"));
    if (!f)
        return Error::from_errno(errno, fmt::format("--record {}: {}", path, std::strerror(errno)));
    return RecordHook(std::move(f), path);
}

std::vector<int> RecordHook::barrier(std::uint64_t superstep, std::span<const VpStats> stats) {
    if (file_) {
        auto out = std::back_inserter(line_);
        line_.clear();
        fmt::format_to(out, "{{\"superstep\":{},\"cpu\":[", superstep);
        for (std::size_t v = 0; v < stats.size(); ++v)
            fmt::format_to(out, "{}{:.9f}", v ? "," : "", stats[v].comp_cpu);
        line_ += "],\"wall\":[";
        for (std::size_t v = 0; v < stats.size(); ++v)
            fmt::format_to(out, "{}{:.9f}", v ? "," : "", stats[v].comp_wall);
        line_ += "],\"memory\":[";
        for (std::size_t v = 0; v < stats.size(); ++v)
            fmt::format_to(out, "{}{}", v ? "," : "", stats[v].memory_bytes);
        line_ += "],\"from\":[";
        for (std::size_t v = 0; v < stats.size(); ++v) {
            line_ += v ? ",[" : "[";
            for (std::size_t u = 0; u < stats.size(); ++u)
                fmt::format_to(out, "{}{}", u ? "," : "",
                               u < stats[v].bytes_from.size() ? stats[v].bytes_from[u] : 0);
            line_ += ']';
        }
        line_ += "]}\n";
        if (std::fwrite(line_.data(), 1, line_.size(), file_.get()) != line_.size())
            close(); // says why, and records nothing more
    }
    return inner_ ? inner_->barrier(superstep, stats) : std::vector<int>{};
}

bool RecordHook::close() {
    if (!file_)
        return true;
    const bool ok = std::ferror(file_.get()) == 0 && std::fflush(file_.get()) == 0;
    const int err = errno;
    file_.reset();
    if (!ok)
        std::fprintf(stderr, "bsprun: --record %s: not every barrier was written: %s\n",
                     path_.c_str(), std::strerror(err));
    return ok;
}

} // namespace ghost::bsp
