// The backends' halves of undo_switch() (switch/undo.cpp).
#pragma once

#include "mltune/switch.hpp"

#include <string>

namespace mltune::detail {

// kernel_backend.cpp: the module's active profile and its knob list.
Result<ActiveProfile> kernel_active(const Sysroot &root);
// kernel_backend.cpp: switches the module from `profile` back to `previous`.
Status kernel_reactivate(const Sysroot &root, const std::string &profile, const ActiveProfile &previous);
// direct_backend.cpp: the profile baseline.json names active ("" when none).
Result<std::string> direct_active(const Sysroot &root);
// direct_backend.cpp: names `name` active in baseline.json.
Status direct_set_active(const Sysroot &root, const std::string &name);

} // namespace mltune::detail
