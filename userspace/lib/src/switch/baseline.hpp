// The node baseline: <sysroot>/run/mltune/baseline.json (k_state_file),
// the one record of the value every setting had before mltune first wrote
// it, across domains (kernel knobs of the direct backend, NIC settings with
// their queue IRQs and RPS masks), the kernel modules mltune loaded, and
// the profile the direct backend names active.  A value is recorded before the first write of its
// setting, so a crash half-way through a switch leaves a record that
// `mltunectl off` can restore from.  The kernel backend's knobs keep their
// baseline in the module (/sys/kernel/mltune/baseline); thread policies,
// partitions and the feeder record what they did in their own state files
// (sched.hpp, feeder.hpp), which `off` replays.
//
// Version 2 added "nic" and "modules"; a version-1 file loads with none.  Callers hold
// the node lock (mltune/node.hpp) around a load-modify-save.
#pragma once

#include "mltune/nic.hpp"
#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <string>
#include <utility>
#include <vector>

namespace mltune::detail {

struct NodeBaseline {
  std::string active;                                     // direct backend's active profile
  std::vector<std::pair<std::string, std::string>> knobs; // path, value before mltune
  // NIC settings in first-change order: `from` is the value before mltune
  // (`to` is unused); ifname "" for a global such as
  // sysctl.net.core.rps_sock_flow_entries.
  std::vector<NicChange> nic;
  // Kernel modules mltune loaded (modules = [...]), in load order.
  std::vector<std::string> modules;

  [[nodiscard]] bool empty() const { return active.empty() && knobs.empty() && nic.empty() && modules.empty(); }
};

// An absent file is an empty baseline.
Result<NodeBaseline> load_baseline(const Sysroot &root);
// Writes the file atomically; an empty baseline removes it.
Status save_baseline(const Sysroot &root, const NodeBaseline &b);

// Records, for every change not recorded yet, its `from` value as the NIC
// setting's baseline.  Saves only when something was added.
Status record_nic_baseline(const Sysroot &root, const std::vector<NicChange> &changes);

} // namespace mltune::detail
