// Machine topology as the kernel reports it in sysfs and procfs: sockets,
// NUMA nodes, physical cores with their SMT siblings, GPUs, NICs and NVMe
// devices with their NUMA locality, and the PCIe tree above those devices
// (root ports, switch ports, links, ACS, IOMMU groups).  Everything is read
// through a Sysroot.
//
// discover_topology() fails (Errc::failed) only when the machine cannot be
// described at all (no online CPU list) or is inconsistent (a CPU in two
// NUMA nodes).  Missing or malformed optional files become warnings that name
// the file; the rest of the topology is still returned.
//
// JSON schema: Documentation/topology.rst.
#pragma once

#include "mltune/cpulist.hpp"
#include "mltune/pci.hpp"
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
  std::string address;           // "0000:1b:00.0"
  int numa_node = -1;            // raw sysfs value; -1 = not reported by firmware
  CpuSet local_cpus;             // local_cpulist
  std::string host_bridge;       // "pci0000:17", the root bus the device hangs below
  std::vector<std::string> path; // PCI bridges from the root port down to the device's own port
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
  std::string ib_device; // RDMA device of the PCI function ("mlx5_0"), "" when none
  unsigned ib_port = 0;  // its first port (ports/N), 0 when none
  unsigned rx_queues = 0, tx_queues = 0;
  std::vector<Irq> irqs;
};

struct Nvme {
  std::string name; // "nvme0"
  PciLocality pci;
};

// One PCI function of the PCIe tree: a GPU, NIC or NVMe device, or a bridge
// on the way from its host bridge down to it.
struct PciNode {
  std::string address;     // "0000:17:00.0"
  std::string parent;      // the bridge above; "" on a root bus
  std::string host_bridge; // "pci0000:15"
  std::string pci_class;   // "0x060400"
  // From config space where readable, else inferred from the tree: a bridge
  // on a root bus is a root port, below a root port or downstream port it is
  // a switch upstream port, below an upstream port a downstream port.
  PciePortType type = PciePortType::unknown;
  bool type_from_config = false;
  PcieLink link;    // current_link_* / max_link_* (config space where sysfs lacks them)
  PciConfig config; // the parsed `config` file
  int numa_node = -1;
  int iommu_group = -1;   // -1: none (no IOMMU, or not in a group)
  std::string iommu_type; // /sys/kernel/iommu_groups/N/type: identity, DMA, DMA-FQ, ...
  std::string slot;       // physical slot (/sys/bus/pci/slots/NAME/address), "" unknown
  std::string device;     // "GPU 0", "NIC eth0", "NVMe nvme0"; "" for bridges

  [[nodiscard]] bool bridge() const { return pci_class.starts_with("0x0604"); }
};

struct Topology {
  std::string cpu_vendor; // vendor_id of /proc/cpuinfo ("GenuineIntel", "AuthenticAMD")
  std::string cpu_model;
  CpuSet online;
  std::vector<Socket> sockets;    // by id
  std::vector<NumaNode> nodes;    // by id
  std::uint64_t mem_total_kb = 0; // /proc/meminfo MemTotal (0: unreadable)
  std::vector<Core> cores;        // by first thread
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::vector<Nvme> nvme;
  std::vector<PciNode> pci;          // the PCIe tree above GPUs, NICs and NVMe, by address
  bool iommu_groups = false;         // /sys/kernel/iommu_groups has groups (an IOMMU is in use)
  std::vector<std::string> warnings; // each names the file it is about

  [[nodiscard]] const NumaNode *node(int id) const;
  [[nodiscard]] const PciNode *pci_node(std::string_view address) const;
  [[nodiscard]] bool smt() const;
  // NUMA nodes that have CPUs.
  [[nodiscard]] unsigned cpu_nodes() const;
};

// What discover_topology() reads beyond the CPUs, NUMA nodes, memory and
// the GPUs, NICs and NVMe devices themselves.
struct DiscoverOptions {
  // The state of every function on the PCIe tree: its configuration space
  // (port type, link, payload sizes, ACS), its link files, a bridge's NUMA
  // node, IOMMU group and type, physical slot; and whether the node has
  // IOMMU groups.  Without it the tree keeps its shape (each device's host
  // bridge and bridges, each function's class) and port types are inferred
  // from the shape (PciNode::type), which is all feeder planning and
  // pci_distance() need: `plan`, `exec` and `recommend` skip some thousand
  // files on a 1024-CPU node, and the configuration space that a VM reads
  // by trapping every dword (about 1 ms per function on a GPU VM).
  // `topology` and `audit` read it.
  bool pcie_state = true;
};

Result<Topology> discover_topology(const Sysroot &root, const DiscoverOptions &opt = {});

// Fills the action names of the NICs' IRQs (Irq::name) from /proc/interrupts.
// discover_topology() leaves them empty: only `topology --json` shows them,
// and a 1024-CPU node's /proc/interrupts is some 45 MB (one column per CPU)
// that plan, audit and recommend do not need.
void name_nic_irqs(const Sysroot &root, Topology &t);

// How far apart two PCI devices are, nearest first; nvidia-smi topo -m
// calls these PIX/PXB, PHB, NODE and SYS.
enum class PciDistance {
  same_switch,      // below one PCIe switch: peer traffic turns around in it
  same_root_port,   // below one root port, in different switches
  same_host_bridge, // one root bus (host bridge), different root ports
  same_node,        // one NUMA node, different host bridges
  cross_node,       // different NUMA nodes: across the socket interconnect
  unknown,
};
// "switch", "root-port", "host-bridge", "node", "system", "unknown"
std::string_view to_string(PciDistance d);
PciDistance pci_distance(const Topology &t, const PciLocality &a, const PciLocality &b);

} // namespace mltune
