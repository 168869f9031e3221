// revert_config() for callers that hold the node lock (mltune/node.hpp).
#pragma once

#include "mltune/config.hpp"

namespace mltune::detail {

// revert_config() without taking the node lock.
Result<ConfigReport> revert_config_locked(const Sysroot &root);
// Drops the record of this boot's applies (node_off(), which puts every
// domain back itself); what an earlier version kept in it moves to the node
// baseline first.
Status forget_config(const Sysroot &root);

} // namespace mltune::detail
