// ghostctl: the operator's command line for ghost.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ghost/engine.hpp"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

struct Options {
    std::string device{ghost::Engine::default_device};
    bool json = false;
};

int fail(const ghost::Error& e) {
    fmt::print(stderr, "ghostctl: {}\n", e.what());
    return exit_failure;
}

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

int cmd_check(const Options& o) {
    auto engine = ghost::Engine::open(ghost::EngineKind::Kernel, o.device);
    if (!engine)
        return fail(engine.error());
    auto info = (*engine)->info();
    if (!info)
        return fail(info.error());
    const auto names = ghost::feature_names(info->features);
    if (o.json) {
        nlohmann::json j = {{"engine", info->engine},
                            {"device", o.device},
                            {"version", info->version},
                            {"features", names},
                            {"features_mask", info->features},
                            {"image_version", info->image_version},
                            {"image_min", info->image_min}};
        fmt::print("{}\n", j.dump(2));
        return exit_ok;
    }
    fmt::print("ghost.ko interface {} on {}\n", info->version, o.device);
    fmt::print("image format: {}\n", image_line(*info));
    fmt::print("features: {}\n", names.empty() ? std::string("none")
                                                : fmt::format("{}", fmt::join(names, " ")));
    return exit_ok;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"ghostctl - checkpoint, restart, migrate and duplicate Linux processes with "
                 "ghost",
                 "ghostctl"};
    app.footer("Exit status: 0 success, 1 failure (the reason is printed on stderr), "
               "2 usage error.\nSee Documentation/ in the ghost sources for the image format "
               "and the ioctl API.");
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string(GHOST_VERSION));

    Options o;
    if (const char* env = std::getenv("GHOST_DEVICE"))
        o.device = env;
    app.add_option("--device", o.device,
                   "device node of the ghost kernel module (default /dev/ghost, or "
                   "$GHOST_DEVICE)")
        ->type_name("PATH");

    auto* check = app.add_subcommand(
        "check", "Show whether the ghost kernel module is loaded, its interface version, "
                 "the image format versions it handles and its features. Fails (status 1) "
                 "with the reason when the module cannot be used.");
    check->add_flag("--json", o.json, "print the result as JSON for scripts");

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
        return cmd_check(o);
    return exit_usage;
}
