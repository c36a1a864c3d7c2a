// SPDX-License-Identifier: GPL-2.0
// bsprun's checkpoint options (see ckpt_cli.hpp).
#include "ckpt_cli.hpp"

#include <cstdio>

namespace ghost::bsp {

void add_checkpoint_options(CLI::App& app, CkptOptions& o) {
    app.add_option("--checkpoint-every", o.every,
                   "with --hosts and --server: checkpoint the whole job at every N-th barrier "
                   "(see CHECKPOINT AND ROLLBACK)")
        ->option_text("N");
    app.add_option("--server", o.server,
                   "the checkpoint server (a migd host name) that --checkpoint-every stores on "
                   "and --restart reads from")
        ->option_text("HOST");
    app.add_option("--restart", o.restart,
                   "restart job JOB from its last complete checkpoint on --server (no -n, no "
                   "PROGRAM: both come from the checkpoint)")
        ->option_text("JOB");
    app.add_option("--on-failure", o.on_failure,
                   "what a lost VP or host does: fail (default) or rollback (to the last "
                   "complete checkpoint, on the hosts still up)")
        ->check(CLI::IsMember({"fail", "rollback"}));
}

int checkpoint_usage(const CkptOptions& o, int nprocs, bool has_program) {
    const bool restarting = !o.restart.empty();
    const char* why = nullptr;
    if (o.every > 0 && o.server.empty())
        why = "--checkpoint-every needs --server HOST (the migd host whose checkpoint server "
              "stores the images)";
    else if (restarting && o.server.empty())
        why = "--restart JOB needs --server HOST (where its checkpoint is stored)";
    else if (o.on_failure == "rollback" && o.every == 0)
        why = "--on-failure rollback needs --checkpoint-every N (it rolls back to the last "
              "checkpoint)";
    else if (!restarting && nprocs == 0)
        why = "-n P is required (bsprun --help)";
    else if (restarting && (nprocs != 0 || has_program))
        why = "--restart takes P and the program from the checkpoint: give neither -n nor PROGRAM";
    if (!why)
        return 0;
    std::fprintf(stderr, "bsprun: %s\n", why);
    return 2;
}

std::optional<Manifest> restart_manifest(const CkptOptions& o, const std::string& home_socket,
                                         const std::string& job_dir, int& code) {
    auto m = fetch_manifest(home_socket, o.server, o.restart);
    code = 1;
    if (!m) {
        std::fprintf(stderr, "bsprun: --restart %s: %s\n", o.restart.c_str(),
                     m.error().what().c_str());
        return std::nullopt;
    }
    if (hub_answers(*m)) {
        std::fprintf(stderr,
                     "bsprun: --restart %s: the job still runs (its hub answers at %s with the "
                     "job's key): end it first\n",
                     o.restart.c_str(), m->hub_address.c_str());
        return std::nullopt;
    }
    if (!job_dir.empty() && job_dir != m->job_dir) {
        std::fprintf(stderr,
                     "bsprun: --restart: the VPs reopen their files in the checkpoint's job "
                     "directory %s: --job-dir cannot change it\n",
                     m->job_dir.c_str());
        code = 2;
        return std::nullopt;
    }
    code = 0;
    return std::move(*m);
}

} // namespace ghost::bsp
