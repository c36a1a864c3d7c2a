// SPDX-License-Identifier: GPL-2.0
// ghost_bench_vs_criu's report: mean, min and median over the runs, the
// markdown tables (ghost against CRIU, the engines with bandwidths, every
// tool, the time held still) and the --json file.
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "vs_criu.hpp"

namespace bench::vs_criu {

namespace {

std::string ms3(const Stat& s) {
    return fmt::format("{:.0f} / {:.0f} / {:.0f}", s.mean, s.min, s.median);
}

double mib_of(std::uint64_t bytes) {
    return static_cast<double>(bytes) / (1 << 20);
}

std::string today() {
    const time_t t = time(nullptr);
    char buf[32];
    strftime(buf, sizeof(buf), "%Y-%m-%d", localtime(&t));
    return buf;
}

} // namespace

Stat stat_of(std::vector<double> v) {
    Stat s;
    if (v.empty())
        return s;
    std::sort(v.begin(), v.end());
    for (double x : v)
        s.mean += x;
    s.mean /= static_cast<double>(v.size());
    s.min = v.front();
    const size_t n = v.size();
    s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return s;
}

void print_tables(const std::vector<size_t>& sizes, const std::vector<Tool>& tools, int repeat,
                  int warmup, Results& res) {
    utsname u{};
    uname(&u);
    fmt::print("ghost vs CRIU, checkpoint + restart to tmpfs: {} runs each after {} warm-up "
               "round(s), kernel {}, {} CPUs, {}\n\n",
               repeat, warmup, u.release, sysconf(_SC_NPROCESSORS_ONLN), today());

    const bool have_criu = std::count(tools.begin(), tools.end(), Tool::Criu) > 0;
    const Tool head = std::count(tools.begin(), tools.end(), Tool::Ghostctl) ? Tool::Ghostctl
                      : std::count(tools.begin(), tools.end(), Tool::Stubs)  ? Tool::Stubs
                                                                             : Tool::Ioctl;
    if (have_criu && std::count(tools.begin(), tools.end(), head)) {
        fmt::print("ghost = {}; times in ms, mean (totals: mean / min / median)\n\n",
                   tool_name(head));
        fmt::print("| MiB | ghost checkpoint | ghost restart | ghost total | CRIU dump | "
                   "CRIU restore | CRIU total | ghost/CRIU (means) | (medians) | ghost image MiB | "
                   "CRIU image MiB |\n");
        fmt::print("|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (size_t mib : sizes) {
            const Series& g = res[{mib, head}];
            const Series& c = res[{mib, Tool::Criu}];
            fmt::print("| {} | {:.0f} | {:.0f} | {} | {:.0f} | {:.0f} | {} | {:.2f}x | {:.2f}x | "
                       "{:.1f} | {:.1f} |\n",
                       mib, g.get(&Sample::ckpt_ms).mean, g.get(&Sample::restart_ms).mean,
                       ms3(g.get(&Sample::total_ms)), c.get(&Sample::ckpt_ms).mean,
                       c.get(&Sample::restart_ms).mean, ms3(c.get(&Sample::total_ms)),
                       g.get(&Sample::total_ms).mean / c.get(&Sample::total_ms).mean,
                       g.get(&Sample::total_ms).median / c.get(&Sample::total_ms).median,
                       mib_of(g.samples.front().image_bytes),
                       mib_of(c.samples.front().image_bytes));
        }
        fmt::print("\n");
    }

    // The two engines beside CRIU, with bandwidths: image bytes over the mean.
    const auto has = [&](Tool t) { return std::count(tools.begin(), tools.end(), t) > 0; };
    if (has(Tool::User) || has(Tool::Ghostctl)) {
        fmt::print("Engines (ghostctl --engine kernel|user) beside CRIU; ms as means, MiB/s as "
                   "image MiB over the mean time, ratios of means\n\n");
        fmt::print("| MiB | tool | checkpoint ms | MiB/s | restart ms | MiB/s | total ms | MiB/s | "
                   "total/CRIU | total/kernel | image MiB |\n");
        fmt::print("|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (size_t mib : sizes) {
            for (Tool t : {Tool::Ghostctl, Tool::User, Tool::UserLazy, Tool::Criu}) {
                if (!has(t))
                    continue;
                const Series& s = res[{mib, t}];
                const double img = mib_of(s.samples.front().image_bytes);
                const double ck = s.get(&Sample::ckpt_ms).mean,
                             rs = s.get(&Sample::restart_ms).mean,
                             tot = s.get(&Sample::total_ms).mean;
                const auto ratio = [&](Tool base) {
                    return has(base)
                               ? fmt::format("{:.2f}x",
                                             tot / res[{mib, base}].get(&Sample::total_ms).mean)
                               : std::string("-");
                };
                fmt::print("| {} | {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {} | "
                           "{} | {:.1f} |\n",
                           mib, t == Tool::Ghostctl ? "kernel" : tool_name(t), ck, img / ck * 1e3,
                           rs, img / rs * 1e3, tot, img / tot * 1e3, ratio(Tool::Criu),
                           ratio(Tool::Ghostctl), img);
            }
        }
        fmt::print("\n");
    }

    fmt::print("Every tool; ms as mean / min / median\n\n");
    fmt::print(
        "| MiB | tool | checkpoint | restart | total | total/CRIU | frozen ms | image bytes | "
        "restart to memory read |\n");
    fmt::print("|---|---|---|---|---|---|---|---|---|\n");
    for (size_t mib : sizes) {
        for (Tool t : tools) {
            const Series& s = res[{mib, t}];
            const double frozen = s.get(&Sample::frozen_ms).mean;
            fmt::print(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", mib, tool_name(t),
                ms3(s.get(&Sample::ckpt_ms)), ms3(s.get(&Sample::restart_ms)),
                ms3(s.get(&Sample::total_ms)),
                have_criu
                    ? fmt::format("{:.2f}x", s.get(&Sample::total_ms).mean /
                                                 res[{mib, Tool::Criu}].get(&Sample::total_ms).mean)
                    : "-",
                frozen >= 0 ? fmt::format("{:.0f}", frozen) : "-", s.samples.front().image_bytes,
                ms3(s.get(&Sample::memory_read_ms)));
        }
    }

    // Goal 2 of issue 15: held still by a --leave-running checkpoint.
    if (has(Tool::User) || has(Tool::Ghostctl) || has(Tool::Criu)) {
        fmt::print("\nHeld still: a checkpoint that kills (frozen ms) and one that leaves the "
                   "process running (its time, frozen ms, frozen / time); means\n\n");
        fmt::print("| MiB | tool | frozen ms (kill) | --leave-running ms | frozen ms | "
                   "frozen / checkpoint |\n|---|---|---|---|---|---|\n");
        for (size_t mib : sizes)
            for (Tool t : {Tool::Ghostctl, Tool::User, Tool::Criu}) {
                if (!has(t))
                    continue;
                const Series& s = res[{mib, t}];
                const double ex = s.get(&Sample::lr_export_ms).mean,
                             fr = s.get(&Sample::lr_frozen_ms).mean;
                fmt::print("| {} | {} | {:.1f} | {:.0f} | {:.1f} | {:.1f}% |\n", mib,
                           t == Tool::Ghostctl ? "kernel" : tool_name(t),
                           s.get(&Sample::frozen_ms).mean, ex, fr, 100 * fr / ex);
            }
    }
}

bool write_json(const fs::path& json_out, const std::vector<size_t>& sizes,
                const std::vector<Tool>& tools, Results& res) {
    const bool have_criu = std::count(tools.begin(), tools.end(), Tool::Criu) > 0;
    nlohmann::json rows = nlohmann::json::array();
    const auto value = [](double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(); };
    for (size_t mib : sizes)
        for (Tool t : tools) {
            const Series& s = res[{mib, t}];
            const double tot = s.get(&Sample::total_ms).mean;
            rows.push_back(
                {{"mib", mib},
                 {"tool", t == Tool::Ghostctl ? "kernel" : tool_name(t)},
                 {"checkpoint_ms", s.get(&Sample::ckpt_ms).mean},
                 {"restart_ms", s.get(&Sample::restart_ms).mean},
                 {"total_ms", tot},
                 {"total_vs_criu",
                  have_criu ? value(tot / res[{mib, Tool::Criu}].get(&Sample::total_ms).mean)
                            : nlohmann::json()},
                 {"frozen_ms", value(s.get(&Sample::frozen_ms).mean)},
                 {"frozen_leave_running_ms", value(s.get(&Sample::lr_frozen_ms).mean)},
                 {"export_ms", value(s.get(&Sample::lr_export_ms).mean)},
                 {"image_bytes", s.samples.front().image_bytes},
                 {"memory_read_ms", s.get(&Sample::memory_read_ms).mean},
                 {"runs", s.samples.size()}});
        }
    std::ofstream j(json_out);
    j << rows.dump(2) << "\n";
    if (!j) {
        fmt::print(stderr, "ghost_bench_vs_criu: cannot write {}\n", json_out.string());
        return false;
    }
    return true;
}

} // namespace bench::vs_criu
