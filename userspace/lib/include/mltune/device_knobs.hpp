// CPU power and block devices: the profile's [cpu] table and its
// [block."GLOB"] tables (Documentation/profiles.rst), expanded on a node into
// the sysfs knobs of the CPUs and disks that node has.  The knobs then go
// through the knob step like any other (the module writes them atomically
// with the rest, and keeps their baseline).
//
//   [cpu]
//   governor = "performance"            -> cpufreq/policyN/scaling_governor
//   energy_performance_preference = "performance"
//                                       -> cpufreq/policyN/energy_performance_preference
//   energy_perf_bias = 0                -> cpuN/power/energy_perf_bias (0-15 or a name)
//   boost = true                        -> cpufreq/boost
//   idle_max_latency_us = 20            -> cpuN/cpuidle/stateM/disable = 1 for every
//                                          state with a longer exit latency
//   [block."nvme*"]                     -> block/DEV/queue/KEY of every disk DEV
//   scheduler = "none"                     whose name matches (fnmatch)
//   read_ahead_kb = 128, nr_requests = 1023, wbt_lat_usec = 0, rq_affinity = 2,
//   nomerges = 0, add_random = 0, iostats = 1, max_sectors_kb = 1024
//
// A setting this node has no file for (no cpufreq in a VM, no NVMe) becomes
// no knob and a note that says so, never an error.  The tables' types
// (DeviceSetting, BlockRule) are the profile's (profile.hpp).
#pragma once

#include "mltune/profile.hpp"
#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace mltune {

struct DeviceKnobs {
  std::vector<Knob> knobs;        // sysfs knobs, skipped where their file goes away
  std::vector<std::string> notes; // settings this node has no file for
};

// The knobs of the profile's [cpu] and [block] settings on this node.
Result<DeviceKnobs> expand_device_settings(const Profile &profile, const Sysroot &root);

// The profile as this node runs it: its own knobs, then those of its [cpu]
// and [block] settings (a knob of its own for the same file wins).
// `notes` (may be null) gets what expand_device_settings() noted.
Result<Profile> profile_for_node(const Profile &profile, const Sysroot &root,
                                 std::vector<std::string> *notes = nullptr);

} // namespace mltune
