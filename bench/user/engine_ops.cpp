// SPDX-License-Identifier: GPL-2.0
// ghost_bench_user's engine operations: export of a running workload into a
// memory ghost or a file ghost, and restart of its checkpoint from a file or
// from a pipe, each verified off the clock.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>
#include <thread>

#include <fmt/format.h>

#include "ghost/process.hpp"
#include "user_bench.hpp"

namespace bench::user {

namespace {

double ms_since(const timespec& t0) {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec - t0.tv_sec) * 1e3 +
           static_cast<double>(t.tv_nsec - t0.tv_nsec) / 1e6;
}

} // namespace

void bm_export(benchmark::State& state, const std::string& engine_name, size_t mib, bool to_file) {
    ghost::Engine& engine = *engines.at(engine_name);
    std::string why;
    auto w = start_workload(mib << 20, why);
    if (!w)
        return fail(state, why);
    ghost::UniqueFd file;
    if (to_file && !(file = temp_file(cfg.dir)))
        return fail(state, fmt::format("cannot create a file in {}: {}", cfg.dir, errno_text()));
    std::uint64_t image_bytes = 0, frozen_ns = 0;
    std::int64_t done = 0;
    std::string verdict;
    for (auto _ : state) {
        state.PauseTiming();
        if (to_file && (ftruncate(file.get(), 0) != 0 || lseek(file.get(), 0, SEEK_SET) != 0)) {
            fail(state, fmt::format("truncating the image file: {}", errno_text()));
            break;
        }
        // A file ghost, or a memory ghost (whose image is viewed below).
        std::unique_ptr<ghost::Ghost> g;
        ghost::MemoryGhost* mem = nullptr;
        if (to_file) {
            auto c = engine.create(ghost::Backend::file(file.get()));
            if (!c) {
                fail(state, fmt::format("create: {}", c.error().what()));
                break;
            }
            g = std::move(*c);
        } else {
            auto c = engine.create_memory();
            if (!c) {
                fail(state, fmt::format("create: {}", c.error().what()));
                break;
            }
            mem = c->get();
            g = std::move(*c);
        }
        state.ResumeTiming();
        auto st = g->export_process(w->pid, ghost::Fate::Run);
        state.PauseTiming();
        if (!st) {
            fail(state, fmt::format("export: {}", st.error().what()));
            break;
        }
        image_bytes = st->bytes;
        frozen_ns += st->frozen_ns;
        // The workload runs on after each export.
        if (w->ask('p') != w->pid) {
            fail(state, "the workload does not answer after its export");
            break;
        }
        // The last image is read back and checked.
        if (++done == state.max_iterations) {
            if (to_file) {
                verdict = verify_image_fd(file.get(), *w);
            } else if (auto v = mem->view(); !v) {
                verdict = fmt::format("view: {}", v.error().what());
            } else {
                ghost::image::SpanSource src(v->bytes());
                verdict = verify_image(src, *w);
            }
        }
        g.reset(); // drops the ghost (and a memory ghost's image)
        state.ResumeTiming();
    }
    if (state.error_occurred())
        return;
    if (!verdict.empty())
        return fail(state, verdict);
    if (w->ask('v') != 0)
        return fail(state, "the workload's memory changed under the exports");
    state.SetBytesProcessed(static_cast<std::int64_t>(image_bytes) * state.iterations());
    state.counters["image_MiB"] = static_cast<double>(image_bytes) / (1 << 20);
    state.counters["frozen_ms"] =
        static_cast<double>(frozen_ns) / 1e6 / static_cast<double>(state.iterations());
}

namespace {

constexpr EngineOp op_table[] = {
    {"/export-memory",
     [](benchmark::State& s, const std::string& e, size_t mib) { bm_export(s, e, mib, false); }},
    {"/export-file",
     [](benchmark::State& s, const std::string& e, size_t mib) { bm_export(s, e, mib, true); }},
    {"/restart-file",
     [](benchmark::State& s, const std::string& e, size_t mib) { bm_restart(s, e, mib, false); }},
    {"/restart-pipe",
     [](benchmark::State& s, const std::string& e, size_t mib) { bm_restart(s, e, mib, true); }},
};

} // namespace

const std::span<const EngineOp> engine_ops(op_table);

// Restarts from the file, or (pipe) from a pipe a thread splices the file
// into while the restart reads it: a stream, as migd's restore stub gets.
void bm_restart(benchmark::State& state, const std::string& engine_name, size_t mib, bool pipe) {
    ghost::Engine& engine = *engines.at(engine_name);
    std::string why;
    auto w = start_workload(mib << 20, why);
    if (!w)
        return fail(state, why);
    ghost::UniqueFd file = temp_file(cfg.dir);
    if (!file)
        return fail(state, fmt::format("cannot create a file in {}: {}", cfg.dir, errno_text()));
    // The restore stub is exec'd: the pipe ends the image marks as
    // inherited (close-on-exec here) are handed over at their numbers.
    ghost::RestartOptions ro;
    ro.inherit_fds = {{w->pipes.ctl_r.get(), w->pipes.ctl_r.get()},
                      {w->pipes.rep_w.get(), w->pipes.rep_w.get()}};
    // The checkpoint, off the clock: the workload is killed once its image is
    // complete, as `ghostctl checkpoint` does.
    ghost::CheckpointOptions co;
    co.fate = ghost::Fate::Kill;
    auto st = ghost::checkpoint(engine, w->pid, file.get(), co);
    if (!st)
        return fail(state, fmt::format("checkpoint: {}", st.error().what()));
    kill_and_reap(std::exchange(w->pid, -1));
    if (auto v = verify_image_fd(file.get(), *w); !v.empty())
        return fail(state, v);

    double restored_ms = 0;
    for (auto _ : state) {
        state.PauseTiming();
        if (lseek(file.get(), 0, SEEK_SET) != 0) {
            fail(state, fmt::format("lseek: {}", errno_text()));
            break;
        }
        timespec t0{};
        clock_gettime(CLOCK_MONOTONIC, &t0);
        state.ResumeTiming();
        ghost::UniqueFd rd;
        std::thread feeder;
        if (pipe) {
            int p[2];
            if (pipe2(p, O_CLOEXEC) != 0) {
                fail(state, fmt::format("pipe: {}", errno_text()));
                break;
            }
            rd = ghost::UniqueFd(p[0]);
            fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
            feeder = std::thread([in = file.get(), wr = p[1]] {
                loff_t off = 0;
                while (splice(in, &off, wr, nullptr, 1 << 20, SPLICE_F_MOVE) > 0) {
                }
                close(wr);
            });
        }
        auto pid = ghost::restart(engine, pipe ? rd.get() : file.get(), ro);
        if (feeder.joinable()) {
            rd.reset(); // a restart that stopped reading: the feeder gets EPIPE
            feeder.join();
        }
        const double r_ms = ms_since(t0);
        const std::int64_t answer = pid ? w->ask('p') : -1;
        state.PauseTiming();
        if (!pid) {
            fail(state, fmt::format("restart: {}", pid.error().what()));
            break;
        }
        restored_ms += r_ms;
        if (answer != *pid) {
            int status = 0;
            const pid_t gone = waitpid(*pid, &status, WNOHANG);
            fail(state,
                 fmt::format("the restored process {} does not answer ({}; {})", *pid,
                             answer >= 0 ? fmt::format("answer {}", answer) : "no answer",
                             gone == *pid ? fmt::format("it ended, wait status {:#x}", status)
                                          : "it still exists"));
            kill_and_reap(*pid);
            break;
        }
        const auto bad = w->ask('v');
        kill_and_reap(*pid);
        if (bad != 0) {
            fail(state, fmt::format("the restored memory is wrong: {}",
                                    bad > 0 ? fmt::format("{} wrong words", bad) : "no answer"));
            break;
        }
        state.ResumeTiming();
    }
    if (state.error_occurred())
        return;
    state.SetBytesProcessed(static_cast<std::int64_t>(st->bytes) * state.iterations());
    state.counters["image_MiB"] = static_cast<double>(st->bytes) / (1 << 20);
    // restart() itself, without the first answer of the restored process.
    state.counters["restart_call_ms"] = restored_ms / static_cast<double>(state.iterations());
}

} // namespace bench::user
