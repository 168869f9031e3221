// Placement of the calling process and handing it over to a command: the
// one place libmltune sets CPU affinity and memory policy for itself and
// calls execvp (mltunectl exec, feeder run).  Library-private.
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/result.hpp"

#include <string>
#include <vector>

namespace mltune::detail {

// sched_setaffinity(0, cpus): the calling thread, and what it execs.
Status set_affinity(const CpuSet &cpus);
// set_mempolicy(MPOL_BIND, nodes): allocations only from `nodes`.
Status bind_memory(const std::vector<int> &nodes);
// set_mempolicy(MPOL_PREFERRED_MANY, nodes), or MPOL_PREFERRED on the first
// node where the kernel lacks MPOL_PREFERRED_MANY (before 5.15).
Status prefer_memory(const std::vector<int> &nodes);
// execvp(argv[0], argv); returns only on failure, with the error.
Status exec_argv(const std::vector<std::string> &argv);

} // namespace mltune::detail
