// GPU-feeder core planning (Documentation/topology.rst, "GPU-feeder cores").
//
// make_cpu_plan() splits a machine's physical cores into three roles and never
// splits an SMT pair between roles:
//   housekeeping - OS, kthreads, IRQs: at least one core per socket (the core
//                  of CPU 0 on its socket) plus one on every NUMA node that
//                  hosts a NIC, so NIC IRQs stay local;
//   feeder       - per GPU, whole physical cores on the GPU's NUMA node (the
//                  nearest node with CPUs when the GPU's node has none) for
//                  the training loop and NCCL proxy threads; isolated at boot;
//   workers      - everything else: DataLoader workers of the node's ranks.
// Every decision is recorded in CpuPlan::reasons for the human output.  A machine
// without GPUs, or too small to isolate anything, gets an empty plan whose
// reasons say why.
//
// Consumers: the feeder-cores runtime (feeder / housekeeping sets), NIC IRQ
// placement (NicIrqPlan::irq_cpus), boot parameters (boot.hpp).
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/result.hpp"
#include "mltune/topology.hpp"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mltune {

struct PlanOptions {
  unsigned gpus_per_rank = 1;        // GPUs driven by one process (rank)
  unsigned feeder_cores_per_gpu = 0; // physical cores; 0 = automatic (2, fewer when short)
};

struct GpuPlan {
  unsigned gpu = 0; // Topology::gpus index
  std::string pci;
  int gpu_node = -1; // the GPU's own NUMA node (-1: not reported)
  int cpu_node = -1; // node its feeder cores come from
  CpuSet feeder;     // whole physical cores
  // The NIC nearest to the GPU in the PCIe tree ("" when the node has none):
  // its netdev, PCI address, RDMA device and port ("mlx5_0", 1; "" and 0
  // without RDMA) and how far it is.
  std::string nic, nic_pci, nic_ib_device;
  unsigned nic_ib_port = 0;
  PciDistance nic_distance = PciDistance::unknown;
};

struct NicIrqPlan {
  std::string name;
  int node = -1;   // NIC's node (-1: not reported)
  CpuSet irq_cpus; // housekeeping CPUs local to the NIC; never feeder CPUs
  std::vector<unsigned> irqs;
};

struct RankPlan {
  unsigned rank = 0;
  std::vector<unsigned> gpus;
  std::vector<int> nodes; // NUMA nodes its GPUs' feeder cores are on
  CpuSet cpus;            // feeder cores of its GPUs (taskset)
  CpuSet worker_cpus;     // its share of worker cores for DataLoader workers
  unsigned dataloader_workers = 0;
  unsigned omp_threads = 1;
  std::vector<std::pair<std::string, std::string>> env;
  std::string launch; // "numactl ... taskset ... env ... <command>"
};

struct CpuPlan {
  CpuSet online;
  CpuSet housekeeping;
  CpuSet feeder;  // union of every GpuPlan::feeder
  CpuSet workers; // online - housekeeping - feeder
  std::vector<GpuPlan> gpus;
  std::vector<NicIrqPlan> nics;
  std::vector<RankPlan> ranks;
  std::vector<std::string> reasons;  // every decision, in order
  std::vector<std::string> warnings; // topology warnings and planning doubts

  // True when nothing is isolated (no GPU, machine too small).
  [[nodiscard]] bool empty() const { return feeder.empty(); }
};

// The NIC each GPU should use: the nearest by PciDistance; among equals the
// one serving the fewest GPUs so far, then the first.  One entry per GPU, in
// Topology::gpus order; an entry without NIC when the machine has none.
std::vector<GpuPlan> pair_gpus_with_nics(const Topology &topo);

// Errc::input when the options cannot be met (feeder cores requested beyond
// what a node has, GPU count not a multiple of gpus_per_rank).
Result<CpuPlan> make_cpu_plan(const Topology &topo, const PlanOptions &opts = {});

// A CPU set given literally or by its role in the plan, as profiles write it:
//   "0-3,8"        a cpulist
//   "feeder"       every feeder core       "feeder:N"  the feeder cores of GPU N
//   "housekeeping" housekeeping cores      "workers"   DataLoader worker cores
//   "nic:NAME"     IRQ CPUs of NIC NAME    "online"    every online CPU
Result<CpuSet> resolve_cpuset(std::string_view spec, const CpuPlan &plan);

} // namespace mltune
