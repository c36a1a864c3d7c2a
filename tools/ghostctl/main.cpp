// SPDX-License-Identifier: GPL-2.0
// ghostctl: the operator's command line for ghost.
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"

namespace ghostctl {

int fail(const ghost::Error& e) {
    return fail(e.what());
}

int fail(const std::string& message) {
    fmt::print(stderr, "ghostctl: {}\n", message);
    return exit_failure;
}

int usage_fail(const std::string& message) {
    fmt::print(stderr, "ghostctl: {}\nRun 'ghostctl --help' for usage.\n", message);
    return exit_usage;
}

std::optional<int> parse_int(std::string_view s) {
    int n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size())
        return std::nullopt;
    return n;
}

std::optional<pid_t> parse_pid(std::string_view s) {
    const auto n = parse_int(s);
    if (!n || *n <= 0)
        return std::nullopt;
    return *n;
}

std::unique_ptr<ghost::Engine> open_engine(const Globals& g) {
    auto kind = ghost::parse_engine_kind(g.engine);
    if (!kind) {
        fail(kind.error());
        return nullptr;
    }
    auto engine = ghost::Engine::open(*kind, g.device);
    if (!engine) {
        fail(engine.error());
        return nullptr;
    }
    return std::move(*engine);
}

namespace {

std::string image_line(const ghost::EngineInfo& info) {
    if (info.image_version == 0 && info.image_min == 0)
        return "none (this module neither exports nor imports yet)";
    std::string s;
    if (info.image_version)
        s = fmt::format("exports v{}", info.image_version);
    if (info.image_min)
        s += fmt::format("{}imports v{}..v{}", s.empty() ? "" : ", ", info.image_min,
                         info.image_version ? info.image_version : info.image_min);
    return s;
}

} // namespace

int cmd_check(const Globals& g, bool json) {
    auto engine = open_engine(g);
    if (!engine)
        return exit_failure;
    auto info = engine->info();
    if (!info)
        return fail(info.error());
    const auto names = ghost::feature_names(info->features);
    if (json) {
        nlohmann::json j = {
            {"engine", info->engine},          {"device", g.device},
            {"version", info->version},        {"features", names},
            {"features_mask", info->features}, {"image_version", info->image_version},
            {"image_min", info->image_min}};
        fmt::print("{}\n", j.dump(2));
        return exit_ok;
    }
    if (info->engine == "user")
        fmt::print("user engine {} (ptrace and /proc; no module needed)\n", info->version);
    else
        fmt::print("ghost.ko interface {} on {}\n", info->version, g.device);
    fmt::print("image format: {}\n", image_line(*info));
    fmt::print("features: {}\n",
               names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, " ")));
    return exit_ok;
}

// The command word of argv: the first argument that is neither an option
// nor the value of one of the global options; empty if it names no command.
std::string_view command_in(int argc, char** argv) {
    static constexpr std::string_view commands[] = {"check",   "checkpoint", "restart", "dup",
                                                    "migrate", "images",     "ps",      "hosts",
                                                    "where",   "kill",       "inspect", "monitor"};
    for (int i = 1; i < argc; i++) {
        const std::string_view a = argv[i];
        if (a == "--device" || a == "--engine" || a == "--migd-socket") {
            i++;
            continue;
        }
        if (a.starts_with('-'))
            continue;
        for (auto c : commands)
            if (a == c)
                return c;
        return {};
    }
    return {};
}

} // namespace ghostctl

int main(int argc, char** argv) {
    using namespace ghostctl;
    // Answered before CLI11, which answers --version by throwing: in a
    // static program the first exception sorts every unwind table entry
    // (libgcc's frame registry), 25 million instructions, most of a
    // start-up that is otherwise 0.4 million.
    if (argc == 2 && std::string_view(argv[1]) == "--version") {
        std::puts(GHOST_VERSION);
        return exit_ok;
    }
    CLI::App app{"ghostctl - checkpoint, restart, duplicate and inspect Linux processes with "
                 "ghost",
                 "ghostctl"};
    app.footer(
        "Exit status: 0 success, 1 failure (the reason is printed on stderr), 2 usage error;\n"
        "'restart' without --detach exits with the restored process's status.\n"
        "Run 'ghostctl COMMAND --help' for a command's options. Images hold the process's\n"
        "memory: they are created mode 0600. See ghostctl(1) and Documentation/ in the\n"
        "ghost sources for the image format and the ioctl API.");
    app.require_subcommand(1);
    app.fallthrough();
    app.set_version_flag("--version", std::string(GHOST_VERSION));

    // Only the options of the command asked for are built: building every
    // command's is most of ghostctl's start-up, which every command pays
    // (issue 15). Without a known command (ghostctl --help, a typo) all are.
    const std::string_view asked = command_in(argc, argv);
    const auto want = [&](std::string_view name) { return asked.empty() || asked == name; };

    Globals g;
    if (const char* env = std::getenv("GHOST_DEVICE"))
        g.device = env;
    app.add_option("--device", g.device,
                   "device node of the ghost kernel module (default /dev/ghost, or "
                   "$GHOST_DEVICE)")
        ->type_name("PATH");
    if (const char* env = std::getenv("GHOST_ENGINE"))
        g.engine = env;
    app.add_option("--engine", g.engine,
                   "engine: 'kernel' (ghost.ko), 'user' (ptrace and /proc, no module needed) "
                   "or 'auto' (kernel when its device exists, else user; default, or "
                   "$GHOST_ENGINE)")
        ->type_name("auto|kernel|user");

    if (const char* env = std::getenv("GHOST_MIGD_SOCKET"))
        g.migd_socket = env;
    app.add_option("--migd-socket", g.migd_socket,
                   "this host's migd control socket, for the cluster commands (default "
                   "/run/ghost/migd.sock, or $GHOST_MIGD_SOCKET)")
        ->type_name("PATH");

    bool check_json = false;
    auto* check = app.add_subcommand(
        "check", "Show whether the ghost kernel module is loaded, its interface version, "
                 "the image format versions it handles and its features. Fails (status 1) "
                 "with the reason when the module cannot be used.");
    if (want("check")) {
        check->add_flag("--json", check_json, "print the result as JSON for scripts");
    }

    CheckpointArgs ck;
    auto* checkpoint = app.add_subcommand(
        "checkpoint",
        "Write an image of process PID to FILE. By default the process is killed once the "
        "image is complete and safely on disk (like 'criu dump'); if anything fails it keeps "
        "running and FILE is left as it was. The image is written under a temporary name "
        "beside FILE and renamed into place. Only the process's owner or root may "
        "checkpoint it. Single-threaded processes only; sockets, shared anonymous memory "
        "and deleted files are refused with the reason. With --server HOST the images of "
        "one or more PIDs go to HOST's checkpoint server through this host's migd instead; "
        "each gets an image id (see 'images', 'restart --server').");
    if (want("checkpoint")) {
        checkpoint->add_option("PID", ck.pids, "the process (several with --server)")
            ->required()
            ->check(CLI::PositiveNumber);
        checkpoint->add_option("-o,--output", ck.output, "image file to write ('-' for stdout)")
            ->type_name("FILE");
        checkpoint
            ->add_option("--server", ck.server,
                         "store the images on HOST's checkpoint server (a migd peer) instead of a "
                         "file")
            ->type_name("HOST");
        checkpoint
            ->add_option("--schedule", ck.schedule,
                         "with several PIDs, how they reach the server (Hector's schedules): "
                         "one-at-a-time (a session each, in turn; default), combined (one session "
                         "announcing all, then each in turn), all-at-once (all at the same time)")
            ->check(CLI::IsMember({"one-at-a-time", "combined", "all-at-once"}))
            ->type_name("SCHEDULE");
        checkpoint->add_flag(
            "--json", ck.json,
            "print the result as JSON: pid, image, bytes, frozen_ms (how long the "
            "process was held still), copy_on_write (with --leave-running: its pages "
            "were copied from a snapshot while it ran on, so frozen_ms is only the "
            "capture) and what became of the process; with --server, migd's reply");
        auto* lr = checkpoint->add_flag("--leave-running", ck.leave_running,
                                        "keep the process running after the checkpoint");
        checkpoint
            ->add_flag("--leave-stopped", ck.leave_stopped,
                       "leave the process stopped (SIGSTOP) after the checkpoint, for migration")
            ->excludes(lr);
        checkpoint
            ->add_option("--parent", ck.parent,
                         "write an incremental image: only the pages the process wrote since "
                         "IMAGE, which must be its last --leave-running checkpoint (user engine "
                         "only); 'restart' follows the chain of parents")
            ->type_name("IMAGE");
        checkpoint->add_flag("--compress", ck.compress, "compress the image with zstd");
        checkpoint->add_option("--level", ck.level, "zstd level with --compress (default 3)")
            ->check(CLI::Range(1, 19))
            ->type_name("N");
    }

    RestartArgs rs;
    auto* restart = app.add_subcommand(
        "restart",
        "Rebuild the process in image FILE (raw or compressed; '-' for stdin) as a new "
        "process, a child of ghostctl, which waits for it and exits with its status. Its "
        "memory, registers, signal state, working directory and files are those of the "
        "image; files are reopened by path at their offsets, and descriptors the image "
        "marks as inherited (pipes, terminals) are taken from ghostctl's own descriptors "
        "of the same numbers. An incremental image (checkpoint --parent) is restored "
        "with its chain of parents, each found by the path it was written with or "
        "beside FILE, checked, and flattened into one whole image first.");
    if (want("restart")) {
        restart->add_option("FILE", rs.input, "the image (an image id with --server)")->required();
        restart
            ->add_option("--server", rs.server,
                         "restart image id FILE of HOST's checkpoint server, through migd; prints "
                         "HOST:PID and the new gid")
            ->type_name("HOST");
        restart
            ->add_option("--on", rs.on, "with --server: the host to restart on (default: this one)")
            ->type_name("HOST");
        restart->add_flag("--detach,-d", rs.detach,
                          "print the restored process's pid and return once it runs");
        restart->add_flag(
            "--lazy", rs.lazy,
            "user engine (the default with --lazy): let the process run before its memory is "
            "in; a pager process puts each page in from FILE on first touch or in the "
            "background, then exits. FILE (a whole, uncompressed image) is read in place "
            "under a read lease: it must not be open for writing anywhere, and a later "
            "open for writing or truncation waits until the pager is done (replacing the "
            "file is fine). Needs root (CAP_SYS_PTRACE, for userfaultfd)");
        restart
            ->add_option("--inherit-fd", rs.inherit_fds,
                         "give the image's inherited descriptor N from ghostctl's descriptor M "
                         "(N:M), or N from N; repeatable. 'ghostctl checkpoint' lists the "
                         "descriptors a restart needs")
            ->type_name("N[:M]");
    }

    MoveArgs dupa;
    dupa.op = "dup";
    auto* dup = app.add_subcommand(
        "dup", "Make a second, independent copy of process PID, which keeps running; prints "
               "the copy's pid. On this host the copy shares PID's pipes and terminals and "
               "reopens its files by path. With --to HOST the copy runs on HOST (through "
               "migd; prints HOST:PID and the copy's gid); then GID may name a process of "
               "the cluster wherever it runs.");
    if (want("dup")) {
        dup->add_option("PID|GID", dupa.target,
                        "the process: a pid of this host, or with --to a gid")
            ->required();
        dup->add_option("--to", dupa.to, "make the copy on HOST, a migd peer")->type_name("HOST");
        dup->add_flag("--json", dupa.json, "with --to: print migd's reply as JSON");
    }

    MoveArgs mig;
    mig.op = "migrate";
    auto* migrate = app.add_subcommand(
        "migrate",
        "Move process PID to HOST through migd: it is exported, imported on HOST and kept "
        "stopped there until the original is gone, then it goes on running there (same "
        "memory, registers, files by path; a new pid). Prints HOST:PID and its gid, a "
        "cluster-wide id that stays the same across moves. If anything fails, the original "
        "runs on. Only the process's owner or root may move it; it runs as the same uid on "
        "HOST. Pipes and terminals cannot move (redirect them to files). A GID (as printed "
        "by an earlier move, or by ps --cluster) names the process wherever it runs now: "
        "this host's migd forwards the request to that host, whose migd moves it. A large "
        "process (migd.toml [migration] precopy_min_bytes, 64 MiB by default) is pre-copied "
        "where the user engine runs on Linux 6.7 or later: its memory is copied while it "
        "runs, then what it wrote meanwhile, and it stops only for the last, small round.");
    if (want("migrate")) {
        migrate
            ->add_option("PID|GID", mig.target,
                         "the process: a pid of this host, or a gid of the cluster")
            ->required();
        migrate->add_option("--to", mig.to, "the destination host (a migd peer)")
            ->required()
            ->type_name("HOST");
        migrate->add_flag("--json", mig.json,
                          "print migd's reply as JSON: bytes, frozen_ms, downtime_ms (from the "
                          "last capture to the copy running), total_ms, and precopy (its rounds, "
                          "or why there were none)");
        auto* pre = migrate->add_flag_function(
            "--precopy", [&mig](std::int64_t) { mig.precopy = 1; },
            "pre-copy whatever the size; fails, naming the reason, where it cannot (not the "
            "user engine, a kernel before 6.7)");
        migrate
            ->add_flag_function(
                "--no-precopy", [&mig](std::int64_t) { mig.precopy = 0; },
                "stop the process for the whole copy (stop-and-copy)")
            ->excludes(pre);
    }

    ImagesArgs img;
    auto* images = app.add_subcommand(
        "images", "List the images stored on HOST's checkpoint server (id, command, size, "
                  "time, owner, origin), or remove one with --rm (its owner or root only).");
    if (want("images")) {
        images->add_option("--server", img.server, "the checkpoint server")
            ->required()
            ->type_name("HOST");
        images->add_option("--rm", img.rm, "remove image ID")->type_name("ID");
        images->add_flag("--json", img.json, "print the list as JSON");
    }

    bool ps_cluster = false, ps_json = false;
    auto* ps = app.add_subcommand(
        "ps", "With --cluster: every migrated, duplicated or restarted process of the cluster, "
              "as each host's migd knows it: gid, host, pid, state (running, stopped, exited), "
              "uid, command.");
    if (want("ps")) {
        ps->add_flag("--cluster", ps_cluster, "ask every host of the cluster (required)")
            ->required();
        ps->add_flag("--json", ps_json, "print the list as JSON");
    }

    bool hosts_json = false;
    auto* hostsc = app.add_subcommand(
        "hosts", "The hosts of the cluster as this host's migd knows them: its own name and "
                 "each configured peer, with the address and port migd reaches it on, one per "
                 "line (this host first).");
    if (want("hosts")) {
        hostsc->add_flag("--json", hosts_json, "print the list as JSON");
    }

    std::string where_gid;
    bool where_json = false;
    auto* where = app.add_subcommand(
        "where", "Where process GID lives now (HOST:PID STATE), following forwarding entries "
                 "from host to host; the hosts asked learn the answer.");
    if (want("where")) {
        where->add_option("GID", where_gid, "the process's cluster-wide id")->required();
        where->add_flag("--json", where_json, "print the answer (with hops) as JSON");
    }

    std::string kill_gid, kill_sig;
    auto* killc = app.add_subcommand(
        "kill", "Send signal SIG (default TERM; a number or a name) to process GID wherever it "
                "lives now. Only its owner or root may.");
    if (want("kill")) {
        killc->add_option("GID", kill_gid, "the process's cluster-wide id")->required();
        killc->add_option("SIG", kill_sig, "the signal")->type_name("SIG");
    }

    InspectArgs ins;
    auto* inspect = app.add_subcommand(
        "inspect", "Validate image FILE (raw or compressed; '-' for stdin) and describe it: the "
                   "process, its memory map with sizes, its files and signal state. Fails "
                   "(status 1) with the reason on a damaged or foreign file.");
    if (want("inspect")) {
        inspect->add_option("FILE", ins.input, "the image")->required();
        inspect->add_flag("--json", ins.json, "print everything as JSON for scripts");
        inspect->add_flag("--regs", ins.regs, "also show the registers");
    }

    MonitorArgs mon;
    auto* monitor = app.add_subcommand(
        "monitor", "Print every export and import as the module announces it (generic "
                   "netlink family \"ghost\", group \"events\"; needs CAP_NET_ADMIN).");
    if (want("monitor")) {
        monitor->add_flag("--json", mon.json, "one JSON object per line");
        monitor->add_option("--count", mon.count, "exit after N events")
            ->check(CLI::PositiveNumber)
            ->type_name("N");
    }

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        fmt::print(stderr, "ghostctl: {}\nRun 'ghostctl --help' for usage.\n", e.what());
        return exit_usage;
    }

    if (check->parsed())
        return cmd_check(g, check_json);
    if (checkpoint->parsed())
        return cmd_checkpoint(g, ck);
    if (restart->parsed())
        return cmd_restart(g, rs);
    if (dup->parsed()) {
        if (!dupa.to.empty())
            return cmd_move(g, dupa);
        auto pid = parse_pid(dupa.target);
        if (!pid)
            return usage_fail(fmt::format("dup without --to copies a process of this host: '{}' "
                                          "is not a pid",
                                          dupa.target));
        return cmd_dup(g, *pid);
    }
    if (migrate->parsed())
        return cmd_move(g, mig);
    if (images->parsed())
        return cmd_images(g, img);
    if (ps->parsed())
        return cmd_ps(g, ps_json);
    if (hostsc->parsed())
        return cmd_hosts(g, hosts_json);
    if (where->parsed())
        return cmd_where(g, where_gid, where_json);
    if (killc->parsed())
        return cmd_kill(g, kill_gid, kill_sig);
    if (inspect->parsed())
        return cmd_inspect(ins);
    if (monitor->parsed())
        return cmd_monitor(mon);
    return exit_usage;
}
