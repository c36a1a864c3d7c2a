// SPDX-License-Identifier: GPL-2.0
// bsprun's checkpoint options (--checkpoint-every, --server, --restart,
// --on-failure): their definitions, their usage rules, and reading the
// manifest of the job to restart (Documentation/bsp.md, "Checkpoint and
// rollback").
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "checkpoint.hpp"

namespace ghost::bsp {

struct CkptOptions {
    unsigned every = 0;
    std::string server, restart, on_failure{"fail"};
};

void add_checkpoint_options(CLI::App& app, CkptOptions& o);

// 0, or 2 after printing why the options do not go together (-n given or
// not, a PROGRAM given or not).
int checkpoint_usage(const CkptOptions& o, int nprocs, bool has_program);

// --restart: the manifest of o.restart from o.server through the home migd
// (home_socket), once the job is known not to run and job_dir (if given)
// is its own; otherwise nothing, after printing why, with the exit status
// in *code (1, or 2 for a usage error).
std::optional<Manifest> restart_manifest(const CkptOptions& o, const std::string& home_socket,
                                         const std::string& job_dir, int& code);

} // namespace ghost::bsp
