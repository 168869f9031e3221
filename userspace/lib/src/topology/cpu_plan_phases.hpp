// The phases of make_cpu_plan (topology/cpu_plan.cpp), one function each, so
// unit tests can exercise every phase on its own: housekeeping cores, the NUMA
// node each GPU's feeder cores come from, feeder cores, worker CPUs and NIC IRQ
// CPUs, ranks and their DataLoader workers, and each rank's environment and
// launch line.  Library-private: not part of the installed API.
#pragma once

#include "mltune/cpu_plan.hpp"
#include "mltune/result.hpp"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace mltune::detail {

// The physical cores of a topology, per NUMA node in CPU order, and those a
// phase has already given out.
class CoreBook {
public:
  explicit CoreBook(const Topology &topo);
  [[nodiscard]] const std::vector<const Core *> &on_node(int node) const;
  // Cores of `node` not taken yet, in CPU order.
  [[nodiscard]] std::vector<const Core *> free_on(int node) const;
  void take(const Core *c) { taken_.insert(c); }
  [[nodiscard]] bool taken(const Core *c) const { return taken_.count(c) != 0; }

private:
  std::map<int, std::vector<const Core *>> node_cores_;
  std::set<const Core *> taken_;
};

// GpuPlan indices per NUMA node their feeder cores come from.
using NodeGpus = std::map<int, std::vector<size_t>>;
// Rank numbers per the first NUMA node of their GPUs.
using NodeRanks = std::map<int, std::vector<unsigned>>;

// One NicIrqPlan per NIC: the CPUs of `pool` on the NIC's node (or in its
// local_cpulist), all of `pool` when neither is known.
void plan_nic_irqs(const Topology &topo, const CpuSet &pool, CpuPlan &p);

// The plan that isolates nothing, with `reason` first among the reasons.
CpuPlan empty_cpu_plan(const Topology &topo, CpuPlan p, std::string reason);

// Housekeeping cores: one per 24 physical cores of each socket (CPU 0's core
// first), and one on every node with a NIC that has none yet.
void plan_housekeeping(const Topology &topo, CoreBook &book, CpuPlan &p);

// One GpuPlan per GPU with the node its feeder cores come from.
NodeGpus place_gpus(const Topology &topo, const CoreBook &book, CpuPlan &p);

// Feeder cores per GPU on `node` (nfree free cores, k GPUs): the requested
// count, or 2, 1 or 0 when automatic; an input error when a request does not fit.
Result<unsigned> feeder_cores_per_gpu(int node, unsigned k, unsigned nfree, const PlanOptions &opts,
                                      std::vector<std::string> &why);

// Whole free cores of each node to the GPUs placed on it.
Status assign_feeders(const NodeGpus &node_gpus, const PlanOptions &opts, CoreBook &book, CpuPlan &p);

// Worker CPUs (neither housekeeping nor feeder) and the NIC IRQ CPUs.
void plan_workers(const Topology &topo, CpuPlan &p);

// Each GPU's nearest NIC (pair_gpus_with_nics), with the reason, and a
// warning for GPUs whose nearest NIC is on another node.
void plan_gpu_nics(const Topology &topo, CpuPlan &p);

// Ranks of opts.gpus_per_rank consecutive GPUs, with their feeder CPUs and nodes.
NodeRanks plan_ranks(const PlanOptions &opts, CpuPlan &p);

// The free cores of each node, shared out among the ranks on it as DataLoader workers.
void plan_rank_workers(const Topology &topo, const NodeRanks &node_ranks, const CoreBook &book, CpuPlan &p);

// OMP_NUM_THREADS, the environment (with the NICs of its GPUs) and the launch
// line of every rank.
void plan_rank_env(const Topology &topo, CpuPlan &p);

} // namespace mltune::detail
