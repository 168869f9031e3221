// resolve_feeder_cpus(): the CPUs `mltunectl feeder on --cpus` and the
// node configuration's [feeder] cpus name (feeder.hpp).
#include "mltune/cpu_plan.hpp"
#include "mltune/feeder.hpp"
#include "mltune/node_info.hpp"
#include "mltune/topology.hpp"

#include <cctype>

namespace mltune {

Result<std::pair<CpuSet, CpuSet>> resolve_feeder_cpus(const Sysroot &root, const std::string &spec,
                                                      std::string_view what) {
  if (!spec.empty() && std::isdigit(static_cast<unsigned char>(spec[0])) != 0) {
    auto c = parse_node_cpus(root, spec, what);
    if (!c) {
      return c.error();
    }
    return std::pair{*c, CpuSet{}};
  }
  auto t = discover_topology(root, {.pcie_state = false});
  if (!t) {
    return t.error();
  }
  auto p = make_cpu_plan(*t);
  if (!p) {
    return p.error();
  }
  auto c = resolve_cpuset(spec, *p);
  if (!c) {
    return c.error();
  }
  if (c->empty()) {
    const std::string why = p->reasons.empty() ? "" : ": " + p->reasons.back();
    return input_error("the plan has no '" + spec + "' CPUs" + why + "; give " + std::string(what) + " a cpulist");
  }
  return std::pair{*c, p->housekeeping};
}

} // namespace mltune
