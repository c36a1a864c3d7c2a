// SPDX-License-Identifier: GPL-2.0
// rollback(): bsprun --on-failure rollback (see rollback.hpp).
#include "rollback.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace ghost::bsp {

void rollback(HostsMover& mover, const std::vector<std::string>& hosts, const JobCheckpointer& ck,
              const std::string& server, const std::string& why,
              const std::vector<std::string>& pass_on) {
    const char* env = std::getenv("GHOST_BSPRUN_ROLLBACKS");
    const int done = env ? std::atoi(env) : 0;
    if (done >= kMaxRollbacks) {
        std::fprintf(stderr,
                     "bsprun: --on-failure rollback: not again, after %d rollbacks in a "
                     "row; the job fails\n",
                     done);
        return;
    }
    const Manifest& m = ck.last();
    if (m.number == 0) {
        std::fprintf(stderr,
                     "bsprun: --on-failure rollback: no checkpoint of job %s is complete "
                     "yet, nothing to roll back to; the job fails\n",
                     m.job.c_str());
        return;
    }
    const std::vector<std::string> up = hosts_up(mover, hosts);
    if (up.empty()) {
        std::fprintf(stderr, "bsprun: --on-failure rollback: no host's migd answers; the job "
                             "fails\n");
        return;
    }
    std::string list;
    for (const auto& h : up)
        list += (list.empty() ? "" : ",") + h;
    std::fprintf(stderr,
                 "bsprun: rolling back job %s to checkpoint %llu (end of superstep %llu) on %s, "
                 "because %s\n",
                 m.job.c_str(), static_cast<unsigned long long>(m.number),
                 static_cast<unsigned long long>(m.hub.superstep - 1), list.c_str(), why.c_str());
    std::vector<std::string> args = {"bsprun", "--restart", m.job, "--server",
                                     server,   "--hosts",   list};
    args.insert(args.end(), pass_on.begin(), pass_on.end());
    std::vector<char*> av;
    for (auto& a : args)
        av.push_back(a.data());
    av.push_back(nullptr);
    ::setenv("GHOST_BSPRUN_ROLLBACKS", std::to_string(done + 1).c_str(), 1);
    std::fflush(nullptr);
    ::execv("/proc/self/exe", av.data());
    std::fprintf(stderr, "bsprun: --on-failure rollback: cannot run bsprun again: %s\n",
                 std::strerror(errno));
}

} // namespace ghost::bsp
