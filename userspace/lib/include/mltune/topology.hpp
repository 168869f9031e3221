// Machine topology as the kernel reports it in sysfs and procfs: sockets,
// NUMA nodes, physical cores with their SMT siblings, GPUs, NICs and NVMe
// devices with their NUMA locality.  Everything is read through a Sysroot.
//
// discover_topology() fails (Errc::failed) only when the machine cannot be
// described at all (no online CPU list) or is inconsistent (a CPU in two
// NUMA nodes).  Missing or malformed optional files become warnings that name
// the file; the rest of the topology is still returned.
//
// JSON schema: Documentation/topology.rst.
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mltune {

struct NumaNode {
  int id = 0;
  CpuSet cpus; // may be empty (memory-only node, e.g. GPU or CXL memory)
  std::uint64_t mem_total_kb = 0;
  std::vector<int> distances; // SLIT row, indexed like Topology::nodes (by position)
};

// One physical core: its SMT threads share a core (thread_siblings_list).
struct Core {
  int socket = 0;
  int core_id = 0;
  int node = -1; // NUMA node of its first thread
  CpuSet threads;
};

struct Socket {
  int id = 0;
  CpuSet cpus;
  std::vector<int> nodes; // NUMA nodes with CPUs of this socket
  unsigned cores = 0;
};

struct PciLocality {
  std::string address; // "0000:1b:00.0"
  int numa_node = -1;  // raw sysfs value; -1 = not reported by firmware
  CpuSet local_cpus;   // local_cpulist
};

struct Gpu {
  unsigned index = 0; // in PCI address order (nvidia-smi's default order)
  PciLocality pci;
  std::string vendor;                          // "NVIDIA", "AMD", "Intel", "Habana", "QEMU"
  std::string vendor_id, device_id, pci_class; // "0x10de", "0x2330", "0x030200"
};

struct Irq {
  unsigned irq = 0;
  std::string name; // action name from /proc/interrupts ("" when unlisted)
};

struct Nic {
  std::string name; // "eth0"
  PciLocality pci;
  std::string driver;
  unsigned rx_queues = 0, tx_queues = 0;
  std::vector<Irq> irqs;
};

struct Nvme {
  std::string name; // "nvme0"
  PciLocality pci;
};

struct Topology {
  std::string cpu_vendor; // vendor_id of /proc/cpuinfo ("GenuineIntel", "AuthenticAMD")
  std::string cpu_model;
  CpuSet online;
  std::vector<Socket> sockets; // by id
  std::vector<NumaNode> nodes; // by id
  std::vector<Core> cores;     // by first thread
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::vector<Nvme> nvme;
  std::vector<std::string> warnings; // each names the file it is about

  [[nodiscard]] const NumaNode *node(int id) const;
  [[nodiscard]] bool smt() const;
};

Result<Topology> discover_topology(const Sysroot &root);

} // namespace mltune
