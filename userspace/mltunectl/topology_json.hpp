// JSON forms of mltune::Topology and mltune::Plan (schemas in
// Documentation/topology.rst), shared by the topology, plan and boot commands.
#pragma once

#include "mltune/plan.hpp"
#include "mltune/topology.hpp"

#include <nlohmann/json.hpp>

namespace mltune::cli {

nlohmann::json topology_json(const Topology &t);
nlohmann::json plan_json(const Plan &p);

} // namespace mltune::cli
