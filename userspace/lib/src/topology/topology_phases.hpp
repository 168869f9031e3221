// The phases of discover_topology (topology/topology.cpp), one function each,
// so unit tests can exercise every phase on a fake sysroot: online CPUs, the
// CPU model, per-CPU topology (socket, core, SMT siblings), NUMA nodes,
// physical cores and sockets, the PCI devices (GPUs, NICs with their IRQs,
// NVMe) and the PCIe tree above them.  Each phase adds to the Topology and its
// warnings, in order.
// Library-private: not part of the installed API.
#pragma once

#include "mltune/result.hpp"
#include "mltune/sysroot.hpp"
#include "mltune/topology.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mltune::detail {

// What /sys/devices/system/cpu/cpuN/topology says about one online CPU.
struct CpuInfo {
  int socket = 0;
  int core_id = 0;
  int node = -1;
  CpuSet siblings;
};
using CpuInfoMap = std::map<unsigned, CpuInfo>;

// "dddd:bb:dd.f" in hex, as sysfs names PCI functions.
bool is_pci_address(std::string_view s);

// The target of a symlink (an absolute node path), as a node path inside the
// sysroot; nullopt when it does not exist, or when it escapes the sysroot
// (with a warning).
std::optional<std::string> resolve_link(const Sysroot &root, const std::string &abs, Topology &t);

// t.online from /sys/devices/system/cpu/online; a failure when it is missing or empty.
Status read_online_cpus(const Sysroot &root, Topology &t);

// t.cpu_vendor and t.cpu_model from /proc/cpuinfo (left empty when absent).
void read_cpu_model(const Sysroot &root, Topology &t);

// Socket, core id and SMT siblings of every online CPU, from the files of one
// CPU per core and per package (a 1024-CPU node: about 1,000 files, not 3,000).
CpuInfoMap read_cpu_topology(const Sysroot &root, Topology &t);

// The NUMA node ids, from node/online or else the nodeN directories (sorted).
std::vector<int> numa_node_ids(const Sysroot &root, Topology &t);

// One NUMA node: its online CPUs, MemTotal and distances (`nnodes` entries expected).
NumaNode read_numa_node(const Sysroot &root, Topology &t, int id, size_t nnodes);

// t.nodes (one node with every CPU on a kernel without NUMA) and each CPU's
// node; a failure when a CPU is in two nodes.
Status read_numa_nodes(const Sysroot &root, Topology &t, CpuInfoMap &cpus);

// t.cores and t.sockets from the per-CPU topology, warning on siblings that disagree.
void build_cores_and_sockets(Topology &t, CpuInfoMap &cpus);

// What the device phases learned of PCI functions, for the later phases to
// reuse instead of reading it again: every function's class (find_gpus
// reads them all) and, where a phase resolved it, the function's own
// directory.
struct PciSeen {
  std::map<std::string, std::string, std::less<>> cls; // "0000:17:00.0" -> "0x030200"
  std::map<std::string, std::string, std::less<>> dir; // "0000:17:00.0" -> "/sys/devices/pci0000:15/.../0000:17:00.0"
};

// t.gpus: display controllers and accelerators of GPU vendors on the PCI bus.
void find_gpus(const Sysroot &root, Topology &t, PciSeen *seen = nullptr);

// t.nics: PCI network interfaces with their queues, driver and IRQs.
void find_nics(const Sysroot &root, Topology &t, PciSeen *seen = nullptr);

// t.nvme: NVMe controllers on PCI.
void find_nvme(const Sysroot &root, Topology &t, PciSeen *seen = nullptr);

// t.pci: every GPU, NIC and NVMe function and the bridges above it, with
// links, config space, IOMMU group and slot; each device's PciLocality gets
// its host bridge and bridge path (topology/pci_tree.cpp).
// With `state` false only the tree's shape and classes (DiscoverOptions).
void read_pci_tree(const Sysroot &root, Topology &t, const PciSeen &seen = {}, bool state = true);

} // namespace mltune::detail
