// SPDX-License-Identifier: GPL-2.0
// --trace: every rescheduling call and every migration decision of a run,
// as JSON lines in superstep order. A call line:
//   {"kind":"call","superstep":12,"now":8.41,"rescheduled":true,
//    "figures":{"alpha":8,...},"cost":{"instructions":..,"messages":..,"bytes":..,"rounds":..}}
// a move line (carried false: withheld, scenario ii, or invalid):
//   {"kind":"move","superstep":12,"process":20,"from":20,"to":154,
//    "from_set":"Corisco","to_set":"Aquario","carried":true,"mem_time":0.27,
//    "why":"...","figures":{"PM(20,Aquario)":1.2,...}}
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include <ghost/balance/decision.hpp>
#include <ghost/balance/observation.hpp>
#include <ghost/result.hpp>

#include "bsp.hpp"
#include "platform.hpp"

namespace ghost::sim {

class TraceWriter {
  public:
    explicit TraceWriter(const PlatformSpec& spec);
    // Records one call (the hook of RunConfig::on_decision).
    void call(const balance::Observation& obs, const balance::Decision& d);
    // Writes the calls and the run's moves to path.
    Result<void> write(const std::string& path, const RunResult& result) const;

  private:
    std::string set_of(balance::HostId h) const;
    std::vector<std::string> host_set_;
    std::vector<nlohmann::json> calls_;
};

} // namespace ghost::sim
