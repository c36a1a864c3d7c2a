// SPDX-License-Identifier: GPL-2.0
// The --trace writer.
#include "trace.hpp"

#include <cerrno>
#include <fstream>

namespace ghost::sim {

namespace {

nlohmann::json figures(const std::vector<balance::Figure>& fs) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& f : fs)
        j[f.name] = f.value;
    return j;
}

} // namespace

TraceWriter::TraceWriter(const PlatformSpec& spec) {
    for (const auto& s : spec.sets)
        host_set_.insert(host_set_.end(), s.nodes, s.name);
}

std::string TraceWriter::set_of(balance::HostId h) const {
    return h < host_set_.size() ? host_set_[h] : std::string("?");
}

void TraceWriter::call(const balance::Observation& obs, const balance::Decision& d) {
    if (!d.rescheduled && d.moves.empty() && d.withheld.empty())
        return;
    calls_.push_back({{"kind", "call"},
                      {"superstep", obs.superstep},
                      {"now", obs.now},
                      {"rescheduled", d.rescheduled},
                      {"figures", figures(d.figures)},
                      {"cost",
                       {{"instructions", d.cost.instructions},
                        {"messages", d.cost.messages},
                        {"bytes", d.cost.bytes},
                        {"rounds", d.cost.rounds}}}});
}

Result<void> TraceWriter::write(const std::string& path, const RunResult& result) const {
    std::ofstream out(path);
    if (!out)
        return Error::from_errno(EIO, "cannot open the trace file '" + path + "'.");
    std::size_t c = 0;
    auto flush_calls = [&](std::uint64_t upto) {
        for (; c < calls_.size() && calls_[c]["superstep"].get<std::uint64_t>() <= upto; ++c)
            out << calls_[c].dump() << '\n';
    };
    for (const auto& m : result.moves) {
        flush_calls(m.superstep);
        nlohmann::json j = {{"kind", "move"},
                            {"superstep", m.superstep},
                            {"process", m.move.proc},
                            {"from", m.move.from},
                            {"to", m.move.to},
                            {"from_set", set_of(m.move.from)},
                            {"to_set", set_of(m.move.to)},
                            {"carried", m.carried},
                            {"mem_time", m.mem_time},
                            {"why", m.move.why},
                            {"figures", figures(m.move.figures)}};
        out << j.dump() << '\n';
    }
    flush_calls(UINT64_MAX);
    if (!out)
        return Error::from_errno(EIO, "cannot write the trace file '" + path + "'.");
    return {};
}

} // namespace ghost::sim
