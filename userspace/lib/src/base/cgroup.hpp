// cgroup v2 at /sys/fs/cgroup: the one place that names cgroup files, turns
// on the cpuset controller and makes a cgroup a cpuset partition and back.
// Used by the feeder cores (feeder/) and the thread rules (sched/).
#pragma once

#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace mltune::cgroup {

inline constexpr std::string_view k_mount = "/sys/fs/cgroup";

// Node path of a cgroup ("/mltune-feeder", or "/" for the root) or of one of
// its files: path("/a", "cpuset.cpus") == "/sys/fs/cgroup/a/cpuset.cpus".
std::string path(std::string_view cg, std::string_view file = {});

// Creates the cgroup directory `cg` unless it exists.
Status make(const Sysroot &root, std::string_view cg);
// Removes the (empty) cgroup `cg`; an absent one is not an error.
Status remove(const Sysroot &root, std::string_view cg);

// Adds "+cpuset" to the root's cgroup.subtree_control when missing; true when
// this call enabled it.  An error when cgroup v2 is not mounted.
Result<bool> enable_cpuset(const Sysroot &root);

// Makes `cg` a partition of `type` ("root" or "isolated"): writes
// cpuset.cpus.partition unless it already reads `type`, then reads it back.
// The result is the state the kernel reports, trimmed ("root", or
// "root invalid (reason)"); is_valid() tells whether it took.
Result<std::string> set_partition(const Sysroot &root, std::string_view cg, std::string_view type);
// `state` (as set_partition returned it) is a valid partition of `type`.
bool is_valid(std::string_view state, std::string_view type);
// Back to an ordinary member cgroup.
Status clear_partition(const Sysroot &root, std::string_view cg);

// Every cgroup by its id (the inode number of its directory, which BPF's
// cgroup ids are): id -> path ("/" for the root, "/a/b" below it).
std::map<std::uint64_t, std::string> by_id(const Sysroot &root);

} // namespace mltune::cgroup
