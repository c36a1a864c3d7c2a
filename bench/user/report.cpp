// SPDX-License-Identifier: GPL-2.0
// ghost_bench_user's report: the rows Google Benchmark reports, kept by name,
// and the last table (ms per operation, MiB/s, and bandwidth as a fraction of
// memcpy's and of the one-copy floor's).
#include <sys/utsname.h>
#include <unistd.h>

#include <fmt/format.h>

#include "user_bench.hpp"

namespace bench::user {

TableReporter::TableReporter()
    : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular) {}

void TableReporter::ReportRuns(const std::vector<Run>& runs) {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
        if (r.error_occurred || r.run_type != Run::RT_Iteration)
            continue;
        Row row;
        row.ms = r.GetAdjustedRealTime(); // in the benchmark's unit: ms
        for (const auto& [k, c] : r.counters)
            row.counters[k] = c.value;
        row.bytes_per_s =
            row.counters.count("bytes_per_second") ? row.counters["bytes_per_second"] : 0;
        rows[r.run_name.function_name] = row; // as registered, without /iterations:N
    }
}

std::string name_of(const std::string& what, size_t mib) {
    return fmt::format("{}/{}MiB", what, mib);
}

void print_table(const TableReporter& rep) {
    utsname u{};
    uname(&u);
    fmt::print("\nghost_bench_user: kernel {}, {} CPUs, files in {}; ms per operation, MiB/s, "
               "and bandwidth as a fraction of memcpy's (memcpy time / time) and of the one-copy "
               "floor's ({})\n\n",
               u.release, sysconf(_SC_NPROCESSORS_ONLN), cfg.dir, floor_name);
    fmt::print("| MiB | operation | ms | MiB/s | /memcpy | /floor | frozen ms |\n"
               "|---|---|---|---|---|---|---|\n");
    for (size_t mib : cfg.sizes) {
        const auto base = rep.rows.find(name_of("memcpy", mib));
        const auto floor = rep.rows.find(name_of(floor_name, mib));
        const auto ratio = [](const auto& it, const auto& end, double bps) {
            return it != end && it->second.bytes_per_s > 0
                       ? fmt::format("{:.3f}x", bps / it->second.bytes_per_s)
                       : std::string("-");
        };
        std::vector<std::string> ops;
        for (const auto& e : cfg.engines)
            for (const auto& op : engine_ops)
                ops.push_back(e + op.name);
        ops.push_back("memcpy");
        for (const auto& b : baselines)
            ops.push_back(b.name);
        for (const auto& op : ops) {
            const auto it = rep.rows.find(name_of(op, mib));
            if (it == rep.rows.end()) {
                fmt::print("| {} | {} | failed or not run | | | |\n", mib, op);
                continue;
            }
            const auto& r = it->second;
            const auto frozen = r.counters.find("frozen_ms");
            fmt::print("| {} | {} | {:.1f} | {:.0f} | {} | {} | {} |\n", mib, op, r.ms,
                       r.bytes_per_s / (1 << 20), ratio(base, rep.rows.end(), r.bytes_per_s),
                       ratio(floor, rep.rows.end(), r.bytes_per_s),
                       frozen != r.counters.end() ? fmt::format("{:.1f}", frozen->second) : "-");
        }
    }
}

} // namespace bench::user
