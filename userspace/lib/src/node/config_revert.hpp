// revert_config() for callers that hold the node lock (mltune/node.hpp).
#pragma once

#include "mltune/config.hpp"

namespace mltune::detail {

// revert_config() without taking the node lock.  With `pool_only`, only the
// pool reservations and quota go back (node_off() restores the other domains
// itself); the record of this boot's applies is dropped either way.
Result<ConfigReport> revert_config_locked(const Sysroot &root, bool pool_only);

} // namespace mltune::detail
