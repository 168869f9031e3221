// JSON forms of mltune::Topology and mltune::CpuPlan (schemas in
// Documentation/topology.rst), shared by the topology, plan and boot commands.
#pragma once

#include "mltune/cpu_plan.hpp"
#include "mltune/topology.hpp"

#include <nlohmann/json.hpp>

namespace mltune::cli {

nlohmann::json topology_json(const Topology &t);
nlohmann::json plan_json(const CpuPlan &p);

} // namespace mltune::cli
