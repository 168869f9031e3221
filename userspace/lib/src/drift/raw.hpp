// The drift watcher's records (bpf/mltune_drift.h) as DriftWrite: plain
// conversions, built with or without the BPF toolchain so unit tests cover
// them.
#pragma once

#include "mltune/drift.hpp"

#include "mltune_drift.h"

#include <cstdint>
#include <map>
#include <string>

namespace mltune {

// The node path of the file a record names: the file system's mount point
// (by its magic) and the path components, leaf first in the record.
std::string drift_path(const mltune_drift_rec &r);
// `boot_to_unix_ns`: CLOCK_REALTIME - CLOCK_BOOTTIME now; `cgroups`: cgroup
// id -> path (cgroup::by_id).
DriftWrite drift_write_of(const mltune_drift_key &k, const mltune_drift_rec &r, std::int64_t boot_to_unix_ns,
                          const std::map<std::uint64_t, std::string> &cgroups);

} // namespace mltune
