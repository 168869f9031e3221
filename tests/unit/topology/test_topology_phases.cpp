// Unit tests of each phase of discover_topology (topology/topology_phases.hpp)
// on the generated fixtures and writable copies of them: online CPUs, CPU
// model, per-CPU topology, NUMA nodes, cores and sockets, GPUs, NICs and NVMe.
#include "topology/topology_phases.hpp"

#include "topology_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>

using namespace mltune;
using namespace mltune::detail;
using mltune::test::fixture;
using mltune::test::FixtureCopy;

namespace {

// A topology carried through the CPU phases.
Topology cpu_phases(const Sysroot &root, CpuInfoMap &cpus) {
  Topology t;
  EXPECT_TRUE(read_online_cpus(root, t).ok());
  cpus = read_cpu_topology(root, t);
  EXPECT_TRUE(read_numa_nodes(root, t, cpus).ok());
  return t;
}

bool any_warning(const Topology &t, std::string_view needle) {
  return std::ranges::any_of(t.warnings, [&](const std::string &w) { return w.find(needle) != std::string::npos; });
}

} // namespace

TEST(TopologyPhases, OnlineCpus) {
  Topology t;
  ASSERT_TRUE(read_online_cpus(fixture("hgx-2s-8gpu"), t).ok());
  EXPECT_EQ(t.online.str(), "0-191");

  FixtureCopy fc("vm-2cpu");
  fc.set("/sys/devices/system/cpu/online", "\n");
  Topology empty;
  const auto st = read_online_cpus(fc.root(), empty);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "/sys/devices/system/cpu/online: no online CPU");
  fc.remove("/sys/devices/system/cpu/online");
  const auto missing = read_online_cpus(fc.root(), empty);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message.rfind("cannot describe the machine: ", 0), 0U);
}

TEST(TopologyPhases, CpuModel) {
  Topology t;
  read_cpu_model(fixture("hgx-2s-8gpu"), t);
  EXPECT_FALSE(t.cpu_vendor.empty());
  EXPECT_FALSE(t.cpu_model.empty());
  FixtureCopy fc("vm-2cpu");
  fc.remove("/proc/cpuinfo");
  Topology none;
  read_cpu_model(fc.root(), none);
  EXPECT_TRUE(none.cpu_vendor.empty());
  EXPECT_TRUE(none.warnings.empty());
  // Only the first processor's lines are read (the kernel makes the file as
  // far as it is read): a field past the first 4 KiB is not seen.
  std::string info = "processor\t: 0\nvendor_id\t: GenuineIntel\n";
  info += "flags\t\t: " + std::string(5000, 'x') + "\nmodel name\t: late\n";
  fc.set("/proc/cpuinfo", info);
  Topology head;
  read_cpu_model(fc.root(), head);
  EXPECT_EQ(head.cpu_vendor, "GenuineIntel");
  EXPECT_EQ(head.cpu_model, "");
}

TEST(TopologyPhases, CpuTopologyHasEveryOnlineCpu) {
  Topology t;
  const Sysroot root = fixture("hgx-2s-8gpu");
  ASSERT_TRUE(read_online_cpus(root, t).ok());
  const CpuInfoMap cpus = read_cpu_topology(root, t);
  EXPECT_EQ(cpus.size(), t.online.count());
  for (const auto &[c, ci] : cpus) {
    EXPECT_TRUE(ci.siblings.test(c));
    EXPECT_TRUE(t.online.contains(ci.siblings));
    EXPECT_EQ(ci.node, -1) << "nodes come from the NUMA phase";
  }
  EXPECT_TRUE(t.warnings.empty());
}

TEST(TopologyPhases, CpuTopologyWarnsOnMissingSiblings) {
  FixtureCopy fc("vm-2cpu");
  fc.remove("/sys/devices/system/cpu/cpu1/topology/thread_siblings_list");
  fc.remove("/sys/devices/system/cpu/cpu1/topology/core_cpus_list");
  Topology t;
  ASSERT_TRUE(read_online_cpus(fc.root(), t).ok());
  const CpuInfoMap cpus = read_cpu_topology(fc.root(), t);
  EXPECT_EQ(cpus.at(1).siblings, CpuSet{1});
  EXPECT_TRUE(any_warning(t, "treating CPU 1 as a core of its own"));
}

TEST(TopologyPhases, NumaNodeIdsFromOnlineOrDirectories) {
  Topology t;
  EXPECT_EQ(numa_node_ids(fixture("hgx-2s-8gpu"), t), (std::vector<int>{0, 1}));
  FixtureCopy fc("hgx-2s-8gpu");
  fc.remove("/sys/devices/system/node/online");
  EXPECT_EQ(numa_node_ids(fc.root(), t), (std::vector<int>{0, 1}));
  EXPECT_TRUE(t.warnings.empty());
}

TEST(TopologyPhases, NumaNodeReadsCpusMemoryAndDistances) {
  Topology t;
  const Sysroot root = fixture("hgx-2s-8gpu");
  ASSERT_TRUE(read_online_cpus(root, t).ok());
  const NumaNode n = read_numa_node(root, t, 0, 2);
  EXPECT_EQ(n.id, 0);
  EXPECT_FALSE(n.cpus.empty());
  EXPECT_GT(n.mem_total_kb, 0U);
  EXPECT_EQ(n.distances, (std::vector<int>{10, 21}));
  const NumaNode wrong = read_numa_node(root, t, 0, 3);
  EXPECT_TRUE(wrong.distances.empty());
  EXPECT_TRUE(any_warning(t, "/distance: 2 entries for 3 nodes"));
}

TEST(TopologyPhases, NumaNodeRejectsBadDistance) {
  FixtureCopy fc("hgx-2s-8gpu");
  fc.set("/sys/devices/system/node/node1/distance", "21 x\n");
  Topology t;
  ASSERT_TRUE(read_online_cpus(fc.root(), t).ok());
  const NumaNode n = read_numa_node(fc.root(), t, 1, 2);
  EXPECT_TRUE(n.distances.empty());
  EXPECT_TRUE(any_warning(t, "node1/distance: invalid entry 'x'"));
}

TEST(TopologyPhases, NumaNodesAssignEveryCpu) {
  CpuInfoMap cpus;
  const Topology t = cpu_phases(fixture("hgx-2s-8gpu"), cpus);
  ASSERT_EQ(t.nodes.size(), 2U);
  for (const auto &[c, ci] : cpus) {
    ASSERT_NE(t.node(ci.node), nullptr) << "CPU " << c;
    EXPECT_TRUE(t.node(ci.node)->cpus.test(c));
  }
}

TEST(TopologyPhases, NumaNodesRefuseACpuInTwoNodes) {
  FixtureCopy fc("hgx-2s-8gpu");
  fc.set("/sys/devices/system/node/node1/cpulist", "0\n");
  Topology t;
  ASSERT_TRUE(read_online_cpus(fc.root(), t).ok());
  CpuInfoMap cpus = read_cpu_topology(fc.root(), t);
  const auto st = read_numa_nodes(fc.root(), t, cpus);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "inconsistent topology: CPU 0 is listed in both "
                                "/sys/devices/system/node/node0/cpulist and /sys/devices/system/node/node1/cpulist");
}

TEST(TopologyPhases, NoNumaMeansOneNodeWithEveryCpu) {
  FixtureCopy fc("vm-2cpu");
  fc.remove("/sys/devices/system/node");
  CpuInfoMap cpus;
  const Topology t = cpu_phases(fc.root(), cpus);
  ASSERT_EQ(t.nodes.size(), 1U);
  EXPECT_EQ(t.nodes[0].cpus, t.online);
  EXPECT_EQ(t.nodes[0].distances, std::vector<int>{10});
}

TEST(TopologyPhases, CoresCoverEveryCpuOnce) {
  CpuInfoMap cpus;
  Topology t = cpu_phases(fixture("hgx-2s-8gpu"), cpus);
  build_cores_and_sockets(t, cpus);
  CpuSet seen;
  for (const auto &c : t.cores) {
    EXPECT_FALSE(seen.intersects(c.threads));
    seen |= c.threads;
  }
  EXPECT_EQ(seen, t.online);
  ASSERT_EQ(t.sockets.size(), 2U);
  unsigned cores = 0;
  for (const auto &s : t.sockets) {
    cores += s.cores;
    EXPECT_TRUE(std::ranges::is_sorted(s.nodes));
  }
  EXPECT_EQ(cores, t.cores.size());
  EXPECT_TRUE(t.smt());
}

TEST(TopologyPhases, PciDevicesMatchTheWholeDiscovery) {
  for (const auto name : mltune::test::k_fixtures) {
    SCOPED_TRACE(name);
    const Sysroot root = fixture(name);
    const Topology whole = discover_topology(root).value();
    Topology t;
    find_gpus(root, t);
    find_nics(root, t);
    find_nvme(root, t);
    ASSERT_EQ(t.gpus.size(), whole.gpus.size());
    for (size_t i = 0; i < t.gpus.size(); ++i) {
      EXPECT_EQ(t.gpus[i].index, i);
      EXPECT_EQ(t.gpus[i].pci.address, whole.gpus[i].pci.address);
      EXPECT_EQ(t.gpus[i].vendor, whole.gpus[i].vendor);
    }
    ASSERT_EQ(t.nics.size(), whole.nics.size());
    for (size_t i = 0; i < t.nics.size(); ++i) {
      EXPECT_EQ(t.nics[i].name, whole.nics[i].name);
      EXPECT_EQ(t.nics[i].irqs.size(), whole.nics[i].irqs.size());
    }
    EXPECT_EQ(t.nvme.size(), whole.nvme.size());
  }
}

TEST(TopologyPhases, HgxDevices) {
  Topology t;
  const Sysroot root = fixture("hgx-2s-8gpu");
  find_gpus(root, t);
  find_nics(root, t);
  find_nvme(root, t);
  EXPECT_EQ(t.gpus.size(), 8U);
  EXPECT_EQ(t.nics.size(), 8U) << "lo has no device";
  EXPECT_EQ(t.nvme.size(), 2U);
  for (const auto &n : t.nics) {
    EXPECT_TRUE(std::ranges::is_sorted(n.irqs, [](const auto &a, const auto &b) { return a.irq < b.irq; }));
  }
}
