// Which knob paths and profile names a profile may use: the trees and limits
// of kmod/include/mltune_knobs_allow.h, the same source the kernel module
// uses. tests/unit/profile/test_allowlist.cpp checks that these verdicts
// equal the module's (kmod/mltune_allow.c).
#pragma once

#include <string_view>

namespace mltune {

// An absolute knob path ("/proc/sys/vm/swappiness", "/sys/block/sda/queue/nr_requests"):
// shorter than MLTUNE_PATH_MAX, below /proc/ or /sys/, no empty, "." or ".."
// component, inside the allowed trees. Bytes are not checked here.
bool knob_path_allowed(std::string_view path);

// A profile name: 1 to MLTUNE_NAME_MAX - 1 bytes of [A-Za-z0-9_-], starting
// with a letter or a digit.
bool profile_name_allowed(std::string_view name);

} // namespace mltune
