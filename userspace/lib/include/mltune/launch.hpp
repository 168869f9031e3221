// Launch-time binding (mltunectl exec): one rank of the CPU plan, placed
// before its command runs.  launch_spec() picks the rank that drives a GPU
// (or a rank by number) and says what the command gets: CPU affinity on the
// rank's feeder CPUs, a memory policy on the NUMA nodes of those CPUs (so
// that first-touch allocations land there), and the rank's environment from
// the plan (CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS, NCCL_SET_THREAD_NAME, the
// NIC variables NCCL_IB_HCA / UCX_NET_DEVICES / NCCL_SOCKET_IFNAME, the
// DataLoader worker count and CPUs).  exec_launch() applies it to the
// calling process and execs the command, so the command starts placed and
// everything it forks inherits the placement.
//
// Documentation/topology.rst, "Launch-time binding".
#pragma once

#include "mltune/cpu_plan.hpp"
#include "mltune/result.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mltune {

enum class MemPolicy {
  bind,      // MPOL_BIND: memory only from the rank's nodes (numactl --membind, the plan's launch line)
  preferred, // MPOL_PREFERRED_MANY: those nodes first, others when they are full
  none,      // leave the inherited policy
};
std::string_view to_string(MemPolicy p);
// "bind", "preferred", "none"; an input error otherwise.
Result<MemPolicy> parse_mempolicy(std::string_view s);

struct LaunchOptions {
  std::optional<unsigned> gpu;  // the rank that drives this GPU (Topology::gpus index)
  std::optional<unsigned> rank; // or this rank; with both, the GPU must be the rank's
  MemPolicy mempolicy = MemPolicy::bind;
};

struct LaunchSpec {
  unsigned rank = 0;
  std::vector<unsigned> gpus;
  CpuSet cpus;            // CPU affinity: the rank's feeder CPUs
  std::vector<int> nodes; // memory policy nodes: those of its feeder CPUs
  MemPolicy mempolicy = MemPolicy::bind;
  std::vector<std::pair<std::string, std::string>> env; // set in the command's environment
};

// Errc::input for a GPU or rank the plan does not have, or a GPU of another
// rank; Errc::failed when the plan isolates nothing (no rank to place).
Result<LaunchSpec> launch_spec(const CpuPlan &plan, const LaunchOptions &opts);

// Applies spec's affinity, memory policy and environment to the calling
// process, then execvp(argv).  Returns only on failure (nothing is applied
// when the affinity fails; the error names the step).
Status exec_launch(const LaunchSpec &spec, const std::vector<std::string> &argv);

} // namespace mltune
