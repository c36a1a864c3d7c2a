// SPDX-License-Identifier: GPL-2.0
// Checkpoint + restart time of ghost against CRIU, measured in the same run
// on the same workload. Run in the VM (it needs ghost.ko, criu and root):
//   tests/vm/run --mem 3072 -- ghost_bench_vs_criu --sizes 16,64,256 --repeat 3
//
// One run of one tool: a fresh ghost-ckpt-workload daemon holds SIZE MiB of
// patterned anonymous memory. The clock starts, the tool's checkpoint command
// writes an image to /tmp (tmpfs) and kills the process (the default of both
// `ghostctl checkpoint` and `criu dump`), the tool's restart command brings it
// back in the background, and the clock stops when the restored process is
// alive: sleeping in its wait loop with the workload's name, it answers
// SIGUSR1 by writing a marker. Only then, off the clock, it checks every word
// of its memory; a run whose memory is not intact fails the benchmark.
//
// Tools (--tools, run interleaved so that drift in the machine hits all alike):
//   ghostctl  the kernel engine: `ghostctl --engine kernel checkpoint PID -o IMG`,
//             `ghostctl --engine kernel restart IMG --detach`
//   user      the user-space (ptrace) engine, the same commands with
//             `--engine user`; skipped, with the reason, when this ghostctl
//             cannot open that engine
//   stubs     `ghost-export --kill PID IMG`, `ghost-restore IMG` (backgrounded)
//   ioctl     GHOST_IOC_EXPORT from this process, GHOST_IOC_IMPORT in a forked
//             child: the kernel's share, with no program started
//   ioctl-mem the same through a memory ghost: nothing reaches a file, so not
//             a checkpoint; the floor of the module's own work
//   criu      `criu dump -t PID -D DIR`, `criu restore -D DIR -d`
// The headline ratio is ghostctl (stubs when this ghostctl cannot checkpoint
// yet) over criu; a second table sets both engines beside CRIU with
// bandwidths (image MiB over the mean time). Every number is printed as mean,
// min and median over --repeat runs, with the image sizes and, besides, what
// starting each command costs on its own and what the same bytes cost through
// user space (memcpy, crc32c, xxh64, write(2)/read(2) of tmpfs in page-sized and
// 1 MiB calls), which is where the ghost figures are explained.
//
// The parts, in bench/vs_criu/: vs_criu.hpp (what they share), process.cpp
// (commands, the run directory, the workload), measure.cpp (one run of one
// tool), report.cpp (statistics, tables, --json), baselines.cpp (program
// start-up and the same bytes from user space), main.cpp (options, the loop).
#include <sys/prctl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "vs_criu.hpp"

using namespace bench::vs_criu;

namespace {

void usage(FILE* out) {
    fmt::print(
        out,
        "Usage: ghost_bench_vs_criu [--sizes 16,64,256] [--repeat N] [--warmup N]\n"
        "                           [--tools ghostctl,user,user-lazy,stubs,ioctl,ioctl-mem,criu]\n"
        "                           [--dir DIR] [--json FILE]\n"
        "\n"
        "Checkpoint + restart time of ghost against CRIU on the same workload in\n"
        "the same run; prints markdown tables (times in ms: mean / min / median).\n"
        "Tools: ghostctl (--engine kernel), user (ghostctl --engine user, skipped\n"
        "when unavailable), user-lazy (the same, restarted with --lazy: not by\n"
        "default), stubs (ghost-export/ghost-restore), ioctl and ioctl-mem\n"
        "(the module's ioctls from this program), criu (dump/restore).\n"
        "Needs root, ghost.ko and criu: run it in the test VM, e.g.\n"
        "  tests/vm/run --mem 3072 -- ghost_bench_vs_criu --repeat 3\n"
        "Images go to DIR (default /tmp/ghost-vs-criu; keep it on tmpfs).\n"
        "--warmup N (default 1): N untimed checkpoint + restart rounds of every tool\n"
        "at the smallest size before the measured ones, so that no tool's first run\n"
        "pays alone for starting cold (page cache, and under TCG the translation of\n"
        "code run for the first time); 0 measures from cold.\n"
        "For ghostctl, user and criu each run also checkpoints a fresh workload with\n"
        "--leave-running and reports how long it was held still (ghostctl's 'frozen'\n"
        "figure, CRIU's stats-dump frozen_time) against that checkpoint's time.\n"
        "--json FILE also writes one row per size and tool, means over the runs:\n"
        "  {{\"mib\", \"tool\", \"checkpoint_ms\", \"restart_ms\", \"total_ms\",\n"
        "   \"total_vs_criu\", \"frozen_ms\", \"frozen_leave_running_ms\", \"export_ms\"}}\n"
        "(tool: kernel, user, user-lazy, stubs, ioctl, ioctl-mem or criu; export_ms\n"
        "is the --leave-running checkpoint's time; null where a tool has no such\n"
        "figure), and \"memory_read_ms\": from the restart's start until the restored\n"
        "process has read all its memory back (a lazy restart's pages all in).\n");
}

} // namespace

int main(int argc, char** argv) {
    std::vector<size_t> sizes{16, 64, 256};
    int repeat = 3;
    int warmup = 1;
    std::vector<Tool> tools{Tool::Ghostctl, Tool::User,     Tool::Stubs,
                            Tool::Ioctl,    Tool::IoctlMem, Tool::Criu};
    fs::path base = "/tmp/ghost-vs-criu";
    fs::path json_out;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        const bool has_value = i + 1 < argc;
        if (a == "--repeat" && has_value) {
            repeat = std::max(1, atoi(argv[++i]));
        } else if (a == "--warmup" && has_value) {
            warmup = std::max(0, atoi(argv[++i]));
        } else if (a == "--sizes" && has_value) {
            sizes.clear();
            for (char* s = strtok(argv[++i], ","); s; s = strtok(nullptr, ","))
                sizes.push_back(strtoul(s, nullptr, 10));
        } else if (a == "--tools" && has_value) {
            tools.clear();
            for (char* s = strtok(argv[++i], ","); s; s = strtok(nullptr, ",")) {
                const std::string t = s;
                if (t == "ghostctl")
                    tools.push_back(Tool::Ghostctl);
                else if (t == "user")
                    tools.push_back(Tool::User);
                else if (t == "user-lazy")
                    tools.push_back(Tool::UserLazy);
                else if (t == "stubs")
                    tools.push_back(Tool::Stubs);
                else if (t == "ioctl")
                    tools.push_back(Tool::Ioctl);
                else if (t == "ioctl-mem")
                    tools.push_back(Tool::IoctlMem);
                else if (t == "criu")
                    tools.push_back(Tool::Criu);
                else {
                    fmt::print(stderr, "ghost_bench_vs_criu: unknown tool '{}'\n", t);
                    return 2;
                }
            }
        } else if (a == "--dir" && has_value) {
            base = argv[++i];
        } else if (a == "--json" && has_value) {
            json_out = argv[++i];
        } else if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (sizes.empty() || tools.empty() || std::count(sizes.begin(), sizes.end(), 0u)) {
        usage(stderr);
        return 2;
    }

    // Restored processes whose restart command exits (ghostctl --detach,
    // criu -d) become our children, so they can be reaped and their pids
    // freed before the next run.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    const Programs pr{find_program("ghost-ckpt-workload"), find_program("ghostctl"),
                      find_program("ghost-export"), find_program("ghost-restore"), "criu"};
    fs::create_directories(base);

    if ((std::count(tools.begin(), tools.end(), Tool::Ghostctl) ||
         std::count(tools.begin(), tools.end(), Tool::User) ||
         std::count(tools.begin(), tools.end(), Tool::UserLazy)) &&
        !ghostctl_can_checkpoint(pr, base)) {
        fmt::print(stderr, "ghost_bench_vs_criu: this ghostctl has no checkpoint/restart; "
                           "skipping it (the headline uses the stubs)\n");
        tools.erase(std::remove(tools.begin(), tools.end(), Tool::Ghostctl), tools.end());
        tools.erase(std::remove(tools.begin(), tools.end(), Tool::User), tools.end());
        tools.erase(std::remove(tools.begin(), tools.end(), Tool::UserLazy), tools.end());
    }
    if (std::string why; (std::count(tools.begin(), tools.end(), Tool::User) ||
                          std::count(tools.begin(), tools.end(), Tool::UserLazy)) &&
                         !ghostctl_has_user_engine(pr, base, why)) {
        fmt::print(stderr,
                   "ghost_bench_vs_criu: 'ghostctl --engine user check' fails ({}); skipping "
                   "the user engine\n",
                   why);
        tools.erase(std::remove(tools.begin(), tools.end(), Tool::User), tools.end());
        tools.erase(std::remove(tools.begin(), tools.end(), Tool::UserLazy), tools.end());
    }
    if (std::count(tools.begin(), tools.end(), Tool::Criu) &&
        run({pr.criu, "check"}, base / "check.out", base / "check.err") != 0) {
        fmt::print(stderr, "ghost_bench_vs_criu: 'criu check' fails:\n{}",
                   slurp(base / "check.err"));
        return 1;
    }

    const size_t smallest = *std::min_element(sizes.begin(), sizes.end());
    for (int r = 0; r < warmup; r++)
        for (Tool t : tools) {
            Failure f;
            auto s = run_once(t, smallest, pr, base, f);
            if (!s) {
                fmt::print(stderr, "ghost_bench_vs_criu: warm-up, {} MiB, {}: {}\n", smallest,
                           tool_name(t), f.what);
                return 1;
            }
            fmt::print(stderr, "{:>4} MiB {:<8} warm-up {}: total {:>6.0f} ms (not counted)\n",
                       smallest, tool_name(t), r + 1, s->total_ms);
        }

    Results res;
    for (size_t mib : sizes) {
        for (int r = 0; r < repeat; r++) {
            for (Tool t : tools) {
                Failure f;
                auto s = run_once(t, mib, pr, base, f);
                if (!s) {
                    fmt::print(stderr, "ghost_bench_vs_criu: {} MiB, {}: {}\n", mib, tool_name(t),
                               f.what);
                    return 1;
                }
                fmt::print(stderr,
                           "{:>4} MiB {:<8} run {}: checkpoint {:>6.0f} ms, restart {:>6.0f} ms, "
                           "total {:>6.0f} ms\n",
                           mib, tool_name(t), r + 1, s->ckpt_ms, s->restart_ms, s->total_ms);
                if (has_leave_running(t) && !leave_running_once(t, mib, pr, base, *s, f)) {
                    fmt::print(stderr, "ghost_bench_vs_criu: {} MiB, {}: {}\n", mib, tool_name(t),
                               f.what);
                    return 1;
                }
                res[{mib, t}].samples.push_back(*s);
            }
        }
    }

    print_tables(sizes, tools, repeat, warmup, res);
    if (!json_out.empty() && !write_json(json_out, sizes, tools, res))
        return 1;
    print_startup_costs(pr, base);
    print_same_bytes(sizes, repeat, base);
    std::error_code ec;
    fs::remove_all(base, ec);
    return 0;
}
