// SPDX-License-Identifier: GPL-2.0
// A real BSP job replayed: what bsprun --record wrote at every barrier of
// a run on the test cluster (one JSON object per line: "superstep", and per
// VP its CPU seconds of computation "cpu", its resident bytes "memory"
// (0: not sampled), and "from", the bytes each VP received from each VP).
// Each recorded superstep is one superstep here: a VP computes its CPU
// seconds times kReplayPower instructions, then sends every VP what that
// VP received from it. So a simulated platform that is the test cluster as
// bsprun describes it to its policy runs the job a policy saw for real.
#include <cerrno>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../app.hpp"

namespace ghost::sim {

namespace {

using nlohmann::json;

struct Superstep {
    std::vector<double> cpu;                      // per VP
    std::vector<std::vector<std::uint64_t>> from; // [dest][src]
};

class Replay final : public App {
  public:
    Replay(std::vector<Superstep> steps, std::vector<std::uint64_t> memory)
        : steps_(std::move(steps)), memory_(std::move(memory)) {}
    std::string_view name() const override { return "replay"; }
    Proc procs() const override { return Proc(memory_.size()); }
    std::uint64_t supersteps() const override { return steps_.size(); }
    Step step(std::uint64_t s, Proc i) const override {
        const Superstep& r = steps_.at(s - 1);
        Step st;
        st.instructions = r.cpu[i] * kReplayPower;
        for (Proc d = 0; d < procs(); ++d)
            if (d != i && r.from[d][i] > 0)
                st.sends.push_back({i, d, r.from[d][i]});
        for (Proc src = 0; src < procs(); ++src)
            if (src != i && r.from[i][src] > 0)
                ++st.recv_count;
        return st;
    }
    std::uint64_t memory_bytes(Proc i) const override { return memory_[i]; }

  private:
    std::vector<Superstep> steps_;
    std::vector<std::uint64_t> memory_; // the largest recorded, per VP
};

Error bad(const std::string& path, std::size_t line, const std::string& what) {
    return Error::from_errno(EINVAL, path + ":" + std::to_string(line) + ": " + what);
}

} // namespace

Result<std::unique_ptr<App>> make_replay(const std::string& path, Proc procs) {
    if (path.empty())
        return Error::from_errno(EINVAL,
                                 "--app replay needs --replay FILE (bsprun --record FILE).");
    std::ifstream in(path);
    if (!in)
        return Error::from_errno(errno ? errno : ENOENT, "cannot read '" + path + "'.");
    std::vector<Superstep> steps;
    std::vector<std::uint64_t> memory;
    std::string text;
    std::size_t n = 0;
    while (std::getline(in, text)) {
        ++n;
        if (text.empty())
            continue;
        const json j = json::parse(text, nullptr, false);
        if (j.is_discarded() || !j.is_object())
            return bad(path, n, "not a JSON object.");
        Superstep s;
        std::vector<std::uint64_t> mem;
        try {
            s.cpu = j.at("cpu").get<std::vector<double>>();
            s.from = j.at("from").get<std::vector<std::vector<std::uint64_t>>>();
            mem = j.at("memory").get<std::vector<std::uint64_t>>();
        } catch (const json::exception& e) {
            return bad(path, n, std::string("not a bsprun --record line: ") + e.what());
        }
        const std::size_t p = s.cpu.size();
        bool square = s.from.size() == p && mem.size() == p && p > 0;
        for (const auto& row : s.from)
            square = square && row.size() == p;
        if (!square)
            return bad(path, n, "cpu, memory and from must cover the same VPs.");
        if (memory.empty())
            memory.assign(p, 0);
        if (memory.size() != p)
            return bad(path, n, "a different number of VPs than line 1.");
        for (std::size_t v = 0; v < p; ++v)
            memory[v] = std::max(memory[v], mem[v]);
        steps.push_back(std::move(s));
    }
    if (steps.empty())
        return Error::from_errno(EINVAL, "'" + path + "' holds no superstep.");
    if (procs != 0 && procs != memory.size())
        return Error::from_errno(EINVAL, "'" + path + "' was recorded with " +
                                             std::to_string(memory.size()) + " VPs, not " +
                                             std::to_string(procs) + ".");
    // A VP whose size was never sampled: bsprun's default image size.
    for (auto& m : memory)
        if (m == 0)
            m = 64ULL << 20;
    return std::unique_ptr<App>(std::make_unique<Replay>(std::move(steps), std::move(memory)));
}

} // namespace ghost::sim
