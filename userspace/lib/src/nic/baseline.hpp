// The NIC record of the node baseline (base/baseline.hpp): under "nic",
// every NIC setting mltune changed, in first-change order, with its value
// before mltune ([{"ifname", "key", "value"}]; ifname "" for a global such
// as sysctl.net.core.rps_sock_flow_entries).  restore_nic_baseline()
// (nic.hpp) puts them back.
#pragma once

#include "mltune/nic.hpp"
#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <vector>

namespace mltune::detail {

// Records, for every change not recorded yet, its `from` value as the NIC
// setting's baseline.  Saves only when something was added.  The caller
// holds the node lock.
Status record_nic_baseline(const Sysroot &root, const std::vector<NicChange> &changes);

} // namespace mltune::detail
