// SPDX-License-Identifier: GPL-2.0
// The BSP execution: actors, barriers, observations, policy calls, costs and
// migrations.
#include "bsp.hpp"

#include <simgrid/kernel/ProfileBuilder.hpp>
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string>

namespace ghost::sim {

namespace sg4 = simgrid::s4u;
using balance::HostId;

Result<Scenario> parse_scenario(std::string_view s) {
    if (s == "i")
        return Scenario::i;
    if (s == "ii")
        return Scenario::ii;
    if (s == "iii")
        return Scenario::iii;
    return Error::from_errno(EINVAL,
                             "unknown scenario '" + std::string(s) + "' (known: i, ii, iii).");
}

std::string_view scenario_name(Scenario s) {
    switch (s) {
    case Scenario::i:
        return "i";
    case Scenario::ii:
        return "ii";
    case Scenario::iii:
        return "iii";
    }
    return "?";
}

namespace {

// What one process measured in the superstep that just ended.
struct Record {
    double instructions = 0.0;
    double comp_time = 0.0;
    double step_time = 0.0;
    std::vector<double> bytes_from_set;
    std::vector<double> recv_time_from_set;
};

class Runner {
  public:
    Runner(const App& app, Platform plat, balance::Policy* policy, RunConfig cfg)
        : app_(app), plat_(std::move(plat)), policy_(policy), cfg_(std::move(cfg)),
          procs_(app.procs()), where_(procs_), move_to_(procs_), move_index_(procs_),
          records_(procs_), barrier_(sg4::Barrier::create(procs_)) {
        for (balance::ProcId i = 0; i < procs_; ++i) {
            where_[i] = HostId(i % plat_.hosts.size());
            records_[i].bytes_from_set.assign(plat_.sets(), 0.0);
            records_[i].recv_time_from_set.assign(plat_.sets(), 0.0);
        }
        if (cfg_.keep_step_ends)
            result_.step_end.reserve(app.supersteps());
        step_load_.assign(cfg_.load.hosts(), 0.0);
        hogs_.assign(cfg_.load.hosts(), nullptr);
    }

    // "p7", "b7": built by appending, since GCC 12's -Wrestrict misfires on
    // "p" + std::to_string(i) in Release builds.
    static std::string numbered(char prefix, balance::ProcId i) {
        std::string s(1, prefix);
        s += std::to_string(i);
        return s;
    }

    void start() {
        step_load(1);
        for (balance::ProcId i = 0; i < procs_; ++i) {
            mailboxes_.push_back(sg4::Mailbox::by_name(numbered('p', i)));
            barrier_boxes_.push_back(sg4::Mailbox::by_name(numbered('b', i)));
        }
        for (balance::ProcId i = 0; i < procs_; ++i)
            sg4::Actor::create(numbered('p', i), plat_.hosts[where_[i]], [this, i] { process(i); });
    }

    RunResult finish() {
        result_.makespan = sg4::Engine::get_clock();
        return std::move(result_);
    }

  private:
    void process(balance::ProcId i) {
        mailboxes_[i]->set_receiver(sg4::Actor::self()); // eager: BSP sends never wait
        barrier_boxes_[i]->set_receiver(sg4::Actor::self());
        const std::uint64_t steps = app_.supersteps();
        for (std::uint64_t s = 1; s <= steps; ++s) {
            const Step st = app_.step(s, i); // alive until the barrier: payloads point into it
            Record& rec = records_[i];
            std::fill(rec.bytes_from_set.begin(), rec.bytes_from_set.end(), 0.0);
            std::fill(rec.recv_time_from_set.begin(), rec.recv_time_from_set.end(), 0.0);
            const double t0 = sg4::Engine::get_clock();
            if (st.instructions > 0.0)
                sg4::this_actor::execute(st.instructions);
            const double t1 = sg4::Engine::get_clock();
            std::vector<sg4::CommPtr> sends;
            sends.reserve(st.sends.size());
            for (const Message& m : st.sends)
                sends.push_back(mailboxes_[m.to]->put_async(const_cast<Message*>(&m), m.bytes));
            receive(i, st.recv_count, rec);
            sg4::Comm::wait_all(sends);
            rec.instructions = st.instructions;
            rec.comp_time = t1 - t0;
            rec.step_time = sg4::Engine::get_clock() - t0;
            sync(i, s);
            if (any_moves_) {
                if (move_to_[i])
                    migrate(i, *move_to_[i]);
                if (++arrived_ == procs_) {
                    arrived_ = 0;
                    any_moves_ = false;
                    std::fill(move_to_.begin(), move_to_.end(), std::nullopt);
                }
                barrier_->wait();
            }
            if (i == 0 && cfg_.keep_step_ends)
                result_.step_end.push_back(sg4::Engine::get_clock());
        }
        mailboxes_[i]->set_receiver(nullptr);
        barrier_boxes_[i]->set_receiver(nullptr);
    }

    // The barrier, then the policy's call (by the last process to arrive,
    // or by process 0 at a centralised barrier).
    void sync(balance::ProcId i, std::uint64_t s) {
        const std::uint64_t bytes = plat_.spec.barrier_bytes;
        if (bytes == 0 || procs_ == 1) {
            if (++arrived_ == procs_) {
                arrived_ = 0;
                at_barrier(s);
            }
            barrier_->wait();
            return;
        }
        static int token = 0;
        if (i != 0) {
            barrier_boxes_[0]->put(&token, bytes);
            barrier_boxes_[i]->get<int>();
            return;
        }
        for (balance::ProcId k = 1; k < procs_; ++k)
            barrier_boxes_[0]->get<int>();
        at_barrier(s);
        std::vector<sg4::CommPtr> releases;
        releases.reserve(procs_ - 1);
        for (balance::ProcId k = 1; k < procs_; ++k)
            releases.push_back(barrier_boxes_[k]->put_async(&token, bytes));
        sg4::Comm::wait_all(releases);
    }

    // Receives count messages; the time blocked between two arrivals is
    // charged to the Set of the message that ended it.
    void receive(balance::ProcId i, std::uint32_t count, Record& rec) {
        std::vector<sg4::CommPtr> recvs;
        std::vector<Message*> payloads(count, nullptr);
        recvs.reserve(count);
        for (std::uint32_t k = 0; k < count; ++k)
            recvs.push_back(mailboxes_[i]->get_async<Message>(&payloads[k]));
        std::vector<std::size_t> slot(count);
        for (std::uint32_t k = 0; k < count; ++k)
            slot[k] = k;
        double last = sg4::Engine::get_clock();
        while (!recvs.empty()) {
            const auto idx = std::size_t(sg4::Comm::wait_any(recvs));
            const double now = sg4::Engine::get_clock();
            const Message* m = payloads[slot[idx]];
            const auto set = plat_.host_set[where_[m->from]];
            rec.bytes_from_set[set] += double(m->bytes);
            rec.recv_time_from_set[set] += now - last;
            last = now;
            recvs.erase(recvs.begin() + std::ptrdiff_t(idx));
            slot.erase(slot.begin() + std::ptrdiff_t(idx));
        }
    }

    // Load set in supersteps (--load H=F@sN): from the start of superstep s
    // on, a daemon actor on the host computes for ever with the priority
    // that leaves the host's processes 1 - F of its CPU (SimGrid shares a
    // CPU by priority), as a higher-priority hog does on a real host.
    void step_load(std::uint64_t s) {
        for (std::size_t h = 0; h < cfg_.load.hosts(); ++h) {
            if (!cfg_.load.by_superstep(h))
                continue;
            const double f = cfg_.load.at_step(h, s);
            if (f == step_load_[h])
                continue;
            if (hogs_[h])
                hogs_[h]->kill();
            hogs_[h] = nullptr;
            step_load_[h] = f;
            if (f > 0.0)
                hogs_[h] = sg4::Actor::create("load-" + std::to_string(h), plat_.hosts[h], [f] {
                    sg4::Actor::self()->daemonize();
                    sg4::this_actor::exec_init(1e300)->set_priority(f / (1.0 - f))->wait();
                });
        }
    }

    void at_barrier(std::uint64_t s) {
        step_load(s + 1);
        if (cfg_.scenario == Scenario::i || policy_ == nullptr)
            return;
        observe(s);
        const balance::Decision d = policy_->at_barrier(obs_);
        if (cfg_.on_decision)
            cfg_.on_decision(obs_, d);
        if (d.rescheduled)
            ++result_.calls;
        charge(d.cost);
        for (const auto& m : d.moves) {
            MoveRecord r{s, m, false, 0.0};
            const bool valid =
                m.proc < procs_ && m.to < plat_.hosts.size() && m.to != where_[m.proc];
            if (cfg_.scenario == Scenario::iii && valid) {
                r.carried = true;
                if (move_to_[m.proc]) // moved twice in one decision: the last move wins
                    result_.moves[move_index_[m.proc]].carried = false;
                move_to_[m.proc] = m.to;
                move_index_[m.proc] = result_.moves.size();
                any_moves_ = true;
            }
            result_.moves.push_back(std::move(r));
        }
        for (const auto& m : d.withheld)
            result_.moves.push_back({s, m, false, 0.0});
    }

    void observe(std::uint64_t s) {
        const double now = sg4::Engine::get_clock();
        obs_.superstep = s;
        obs_.now = now;
        obs_.sets = plat_.sets();
        obs_.net = plat_.net;
        obs_.hosts.resize(plat_.hosts.size());
        for (std::size_t h = 0; h < plat_.hosts.size(); ++h) {
            auto& host = obs_.hosts[h];
            host.set = plat_.host_set[h];
            host.cpu_power = plat_.spec.sets[host.set].speed;
            host.processors = 1;
            host.external_load = !cfg_.load.hosts()          ? 0.0
                                 : cfg_.load.by_superstep(h) ? step_load_[h]
                                                             : cfg_.load.at(h, now);
            host.managed = 0;
            host.available = true;
        }
        obs_.procs.resize(procs_);
        for (balance::ProcId i = 0; i < procs_; ++i) {
            auto& p = obs_.procs[i];
            const Record& r = records_[i];
            p.host = where_[i];
            p.memory_bytes = app_.memory_bytes(i);
            p.instructions = r.instructions;
            p.comp_time = r.comp_time;
            p.step_time = r.step_time;
            p.bytes_from_set = r.bytes_from_set;
            p.recv_time_from_set = r.recv_time_from_set;
            ++obs_.hosts[where_[i]].managed;
        }
        for (auto& host : obs_.hosts)
            host.load_average = host.managed + host.external_load;
    }

    // The policy's own cost, as documented in Documentation/simulation.md:
    // its instructions on the deciding host (that of process 0), its bytes
    // as one real transfer to the first host of the Set farthest from it,
    // and rounds x that route's latency.
    void charge(const balance::Cost& cost) {
        const double t0 = sg4::Engine::get_clock();
        sg4::Host* decider = plat_.hosts[where_[0]];
        const auto from_set = plat_.host_set[where_[0]];
        balance::SetId far = from_set;
        for (balance::SetId b = 0; b < plat_.sets(); ++b)
            if (plat_.latency(from_set, b) > plat_.latency(from_set, far))
                far = b;
        sg4::Host* peer = plat_.hosts[plat_.first_host[far]];
        if (cost.instructions > 0.0)
            sg4::this_actor::exec_init(cost.instructions)->set_host(decider)->wait();
        if (cost.bytes > 0 && peer != decider)
            sg4::Comm::sendto(decider, peer, cost.bytes);
        if (cost.rounds > 0)
            sg4::this_actor::sleep_for(cost.rounds * plat_.latency(from_set, far));
        result_.policy_time += sg4::Engine::get_clock() - t0;
    }

    // Mem(i, j): the image over the route, then the fixed cost; then the
    // actor moves itself.
    void migrate(balance::ProcId i, HostId to) {
        const double t0 = sg4::Engine::get_clock();
        sg4::Host* from = plat_.hosts[where_[i]];
        sg4::Comm::sendto(from, plat_.hosts[to], app_.memory_bytes(i));
        sg4::this_actor::sleep_for(plat_.net.migration_cost);
        sg4::this_actor::set_host(plat_.hosts[to]);
        where_[i] = to;
        ++result_.migrations;
        result_.moves[move_index_[i]].mem_time = sg4::Engine::get_clock() - t0;
    }

    const App& app_;
    Platform plat_;
    balance::Policy* policy_;
    RunConfig cfg_;
    balance::ProcId procs_;
    std::vector<HostId> where_;
    std::vector<std::optional<HostId>> move_to_;
    std::vector<std::size_t> move_index_;
    std::vector<Record> records_;
    std::vector<sg4::Mailbox*> mailboxes_;
    std::vector<sg4::Mailbox*> barrier_boxes_; // the centralised barrier's messages
    sg4::BarrierPtr barrier_;
    unsigned arrived_ = 0;
    bool any_moves_ = false;
    balance::Observation obs_;
    RunResult result_;
    std::vector<double> step_load_;   // per host: the share a hog takes now
    std::vector<sg4::ActorPtr> hogs_; // per host: that hog, if any
};

void apply_load(const Platform& plat, const LoadSchedule& load) {
    for (std::size_t h = 0; h < load.hosts() && h < plat.hosts.size(); ++h) {
        const auto changes = load.changes(h);
        if (changes.empty() || load.by_superstep(h))
            continue;
        std::string text;
        if (changes.front().time > 0.0)
            text += "0 1\n";
        for (const auto& c : changes)
            text += std::to_string(c.time) + " " + std::to_string(1.0 - c.fraction) + "\n";
        plat.hosts[h]->set_speed_profile(simgrid::kernel::profile::ProfileBuilder::from_string(
            "load-" + std::to_string(h), text, -1));
    }
}

} // namespace

Result<RunResult> run(const App& app, const PlatformSpec& spec, balance::Policy* policy,
                      RunConfig cfg) {
    if (cfg.scenario != Scenario::i && policy == nullptr)
        return Error::from_errno(EINVAL, "scenarios ii and iii need a balancing policy.");
    if (app.procs() == 0)
        return Error::from_errno(EINVAL, "the application has no process.");
    unsigned stack = cfg.stack_kib ? cfg.stack_kib : (app.procs() > 10'000 ? 32 : 256);
    std::string stack_arg = "--cfg=contexts/stack-size:" + std::to_string(stack);
    // Guard pages cost two memory mappings per actor; Linux allows 65,530 by
    // default (vm.max_map_count), so huge runs go without them.
    std::string guard_arg =
        "--cfg=contexts/guard-size:" + std::string(app.procs() > 10'000 ? "0" : "1");
    std::string log_arg = "--log=root.thres:warning";
    std::string name = "ghost-sim";
    std::vector<char*> argv = {name.data(), stack_arg.data(), guard_arg.data(), log_arg.data(),
                               nullptr};
    int argc = 4;
    sg4::Engine engine(&argc, argv.data());
    Platform plat = build_platform(spec);
    if (cfg.load.hosts() != 0 && cfg.load.hosts() != plat.hosts.size())
        return Error::from_errno(
            EINVAL, "the load schedule covers " + std::to_string(cfg.load.hosts()) +
                        " hosts but the platform has " + std::to_string(plat.hosts.size()) + ".");
    apply_load(plat, cfg.load);
    Runner runner(app, std::move(plat), policy, std::move(cfg));
    runner.start();
    engine.run();
    return runner.finish();
}

} // namespace ghost::sim
