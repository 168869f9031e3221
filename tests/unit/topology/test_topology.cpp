#include "mltune/topology.hpp"

#include "cli.hpp"
#include "topology_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

using namespace mltune;
using mltune::test::fixture;
using mltune::test::FixtureCopy;

namespace {

bool any_warning(const Topology &t, std::string_view needle) {
  return std::ranges::any_of(t.warnings, [&](const std::string &w) { return w.find(needle) != std::string::npos; });
}

} // namespace

TEST(Topology, EveryFixtureIsConsistent) {
  for (const auto name : mltune::test::k_fixtures) {
    auto t = discover_topology(fixture(name));
    ASSERT_TRUE(t.ok()) << name << ": " << t.error().message;
    EXPECT_TRUE(t->warnings.empty()) << name << ": " << t->warnings.front();
    // Every online CPU is in exactly one core; cores partition the CPUs.
    CpuSet all;
    for (const auto &c : t->cores) {
      EXPECT_FALSE(all.intersects(c.threads)) << name;
      all |= c.threads;
    }
    EXPECT_EQ(all, t->online) << name;
  }
}

TEST(Topology, TwoSocketEightGpuServer) {
  auto t = discover_topology(fixture("hgx-2s-8gpu")).value();
  for (const auto &n : t.nics) {
    EXPECT_EQ(n.irqs.at(0).name, "") << "discovery leaves IRQ names to name_nic_irqs()";
  }
  name_nic_irqs(fixture("hgx-2s-8gpu"), t);
  EXPECT_EQ(t.online.count(), 192U);
  EXPECT_EQ(t.cores.size(), 96U);
  ASSERT_EQ(t.sockets.size(), 2U);
  EXPECT_EQ(t.sockets[1].cores, 48U);
  ASSERT_EQ(t.nodes.size(), 2U);
  EXPECT_EQ(t.nodes[0].cpus.str(), "0-47,96-143");
  EXPECT_EQ(t.nodes[1].distances, (std::vector<int>{21, 10}));
  EXPECT_EQ(t.nodes[0].mem_total_kb, 1056675840U);
  EXPECT_TRUE(t.smt());
  ASSERT_EQ(t.gpus.size(), 8U); // the ASPEED BMC display controller is not a GPU
  EXPECT_EQ(t.gpus[0].pci.address, "0000:18:00.0");
  EXPECT_EQ(t.gpus[0].vendor, "NVIDIA");
  EXPECT_EQ(t.gpus[7].pci.numa_node, 1);
  ASSERT_EQ(t.nics.size(), 8U);
  for (const auto &n : t.nics) {
    EXPECT_EQ(n.driver, "mlx5_core");
    EXPECT_EQ(n.rx_queues, 64U);
    ASSERT_EQ(n.irqs.size(), 65U);
    EXPECT_EQ(n.irqs[0].name, "mlx5_async0@pci:" + n.pci.address);
  }
  EXPECT_EQ(t.nvme.size(), 2U);
  EXPECT_EQ(t.cpu_vendor, "GenuineIntel");
}

TEST(Topology, EpycNps4AndAmdInstinct) {
  auto t = discover_topology(fixture("epyc-nps4-4gpu")).value();
  ASSERT_EQ(t.sockets.size(), 1U);
  EXPECT_EQ(t.sockets[0].nodes, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(t.gpus.size(), 4U); // class 0x0380
  EXPECT_EQ(t.gpus[2].vendor, "AMD");
  EXPECT_EQ(t.gpus[2].pci.numa_node, 2);
  EXPECT_EQ(t.nodes[2].distances, (std::vector<int>{12, 12, 10, 11}));
}

TEST(Topology, GuestVirtioNicBehindExpander) {
  auto t = discover_topology(fixture("guest-q35")).value();
  ASSERT_EQ(t.nics.size(), 2U);
  EXPECT_EQ(t.nics[0].name, "eth0");
  EXPECT_EQ(t.nics[0].pci.numa_node, -1);
  EXPECT_EQ(t.nics[1].driver, "virtio_net"); // the netdev's driver, not virtio-pci
  EXPECT_EQ(t.nics[1].pci.address, "0000:81:00.0");
  EXPECT_EQ(t.nics[1].pci.numa_node, 1);
  EXPECT_EQ(t.nics[1].rx_queues, 4U);
  EXPECT_EQ(t.nics[1].irqs.size(), 9U);
  ASSERT_EQ(t.gpus.size(), 1U);
  EXPECT_EQ(t.gpus[0].vendor, "QEMU");
}

TEST(Topology, HybridWorkstationCores) {
  auto t = discover_topology(fixture("workstation-1gpu")).value();
  EXPECT_EQ(t.cores.size(), 24U); // 8 P-cores with SMT + 16 E-cores
  EXPECT_EQ(t.cores[0].threads.str(), "0-1");
  EXPECT_EQ(t.cores[23].threads.str(), "31");
  EXPECT_EQ(t.gpus.at(0).pci.numa_node, -1);
}

TEST(TopologyBadInput, CpuInTwoNodesIsAnErrorNamingBothFiles) {
  FixtureCopy f("guest-q35");
  f.set("/sys/devices/system/node/node1/cpulist", "3-7\n");
  auto t = discover_topology(f.root());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("CPU 3 is listed in both /sys/devices/system/node/node0/cpulist and "
                                   "/sys/devices/system/node/node1/cpulist"),
            std::string::npos)
      << t.error().message;
}

TEST(TopologyBadInput, MissingOrBadOnlineListIsAnError) {
  FixtureCopy f("vm-2cpu");
  f.set("/sys/devices/system/cpu/online", "0-1,\n");
  auto t = discover_topology(f.root());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("/sys/devices/system/cpu/online: invalid cpulist"), std::string::npos);
  f.remove("/sys/devices/system/cpu/online");
  t = discover_topology(f.root());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("/sys/devices/system/cpu/online"), std::string::npos);
  EXPECT_FALSE(discover_topology(Sysroot("/nonexistent-sysroot")).ok());
}

TEST(TopologyBadInput, MalformedOptionalFilesAreWarningsNamingTheFile) {
  FixtureCopy f("guest-q35");
  f.set("/sys/devices/system/node/node1/cpulist", "4-x\n");
  f.remove("/sys/devices/system/cpu/cpu2/topology/thread_siblings_list");
  f.remove("/sys/devices/system/cpu/cpu2/topology/core_cpus_list");
  f.set("/sys/devices/system/cpu/cpu3/topology/core_id", "banana\n");
  f.set("/sys/devices/system/node/node0/distance", "10 20 30\n");
  f.set("/sys/bus/pci/devices/0000:82:00.0/local_cpulist", "9999999\n");
  f.remove("/proc/interrupts");
  auto t = discover_topology(f.root());
  ASSERT_TRUE(t.ok()) << t.error().message;
  name_nic_irqs(f.root(), *t);
  EXPECT_TRUE(any_warning(*t, "/sys/devices/system/node/node1/cpulist: invalid cpulist"));
  EXPECT_TRUE(any_warning(*t, "/sys/devices/system/cpu/cpu2/topology/thread_siblings_list: missing"));
  EXPECT_TRUE(any_warning(*t, "/sys/devices/system/cpu/cpu3/topology/core_id: expected an integer"));
  EXPECT_TRUE(any_warning(*t, "/sys/devices/system/node/node0/distance: 3 entries for 2 nodes"));
  EXPECT_TRUE(any_warning(*t, "local_cpulist: invalid cpulist"));
  EXPECT_TRUE(any_warning(*t, "online CPUs 4-7 are in no NUMA node"));
  EXPECT_EQ(t->nics.at(1).irqs.at(0).name, ""); // no /proc/interrupts: numbers only
}

TEST(TopologyBadInput, SiblingOnAnotherNodeIsAWarning) {
  FixtureCopy f("guest-q35");
  // CPU 2's list claims CPU 1, which CPU 0's core already holds.
  f.set("/sys/devices/system/cpu/cpu2/topology/thread_siblings_list", "1-3\n");
  auto t = discover_topology(f.root());
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(
      any_warning(*t, "/sys/devices/system/cpu/cpu2/topology/thread_siblings_list: 1-3 disagrees with CPU 1's 0-1"));
  f.set("/sys/devices/system/cpu/cpu2/topology/thread_siblings_list", "2-3\n");
  f.set("/sys/devices/system/cpu/cpu2/topology/thread_siblings_list", "2-4\n");
  f.set("/sys/devices/system/cpu/cpu3/topology/thread_siblings_list", "2-4\n");
  t = discover_topology(f.root());
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(any_warning(*t, "SMT sibling of CPU 2 is on NUMA node 1"));
}

// One CPU's files per core and per package: a thread whose own topology
// files are gone is placed by its sibling's and its package's lists.
TEST(TopologyFiles, OneReadPerCoreAndPackage) {
  FixtureCopy f("hgx-2s-8gpu");
  for (const char *name : {"core_id", "physical_package_id", "thread_siblings_list", "core_cpus_list",
                           "package_cpus_list", "core_siblings_list"}) {
    f.remove(std::string("/sys/devices/system/cpu/cpu150/topology/") + name);
  }
  auto t = discover_topology(f.root());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_TRUE(t->warnings.empty()) << t->warnings.front();
  ASSERT_EQ(t->sockets.size(), 2U);
  EXPECT_TRUE(t->sockets[1].cpus.test(150));
  EXPECT_EQ(t->cores.size(), 96U);
  // Without package lists (kernels before 5.3 name them core_siblings_list;
  // some name neither) each CPU's own physical_package_id places it.
  FixtureCopy g("hgx-2s-8gpu");
  for (unsigned c = 0; c < 192; ++c) {
    g.remove("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/package_cpus_list");
    g.remove("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/core_siblings_list");
  }
  g.set("/sys/devices/system/cpu/cpu100/topology/physical_package_id", "1\n"); // CPU 100 (socket 0) moved
  t = discover_topology(g.root());
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->sockets.size(), 2U);
  EXPECT_TRUE(t->sockets[1].cpus.test(100));
  EXPECT_TRUE(any_warning(*t, "/sys/devices/system/cpu/cpu100/topology/physical_package_id: SMT sibling of CPU 4"));
}

TEST(TopologyCli, JsonAndHumanOutput) {
  std::ostringstream out;
  std::ostringstream err;
  const std::string root = mltune::test::fixture_dir("guest-q35").string();
  ASSERT_EQ(cli::run({"--sysroot", root, "topology", "--json"}, out, err), 0) << err.str();
  auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["cpu"]["online"], "0-7");
  EXPECT_EQ(j["nodes"][1]["cpus"], "4-7");
  EXPECT_EQ(j["gpus"][0]["numa_node"], 1);
  EXPECT_EQ(j["nics"][1]["driver"], "virtio_net");
  EXPECT_EQ(j["cores"].size(), 4U);
  out.str("");
  ASSERT_EQ(cli::run({"--sysroot", root, "topology"}, out, err), 0);
  EXPECT_NE(out.str().find("NIC eth1: 0000:81:00.0 virtio_net, node 1, 4 rx / 4 tx queues, 9 IRQs"), std::string::npos)
      << out.str();
  out.str("");
  EXPECT_EQ(cli::run({"--sysroot", "/nonexistent", "topology"}, out, err), 1);
}
