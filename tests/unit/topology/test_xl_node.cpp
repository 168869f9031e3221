// The 1024-CPU fixture (xl-8s-1024cpu, tests/fixtures): discovery, the CPU
// plan, the recommendation and the PCIe audit at the size of the largest
// real nodes: 8 sockets, 32 NUMA nodes, 32 GPUs with an RDMA NIC and two
// NVMe drives below one PCIe switch on every node, 8 Ethernet ports, some
// 3,950 MSI-X vectors.
#include "mltune/audit.hpp"
#include "mltune/cpu_plan.hpp"
#include "mltune/recommend.hpp"
#include "mltune/topology.hpp"

#include "topology_fixture.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace mltune;
using mltune::test::fixture;

namespace {

constexpr std::string_view k_xl = "xl-8s-1024cpu";

const Topology &xl() {
  static const Topology t = [] {
    auto r = discover_topology(fixture(k_xl));
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) {
      return Topology{};
    }
    name_nic_irqs(fixture(k_xl), *r);
    return *r;
  }();
  return t;
}

// The node of CPU c in the layout: socket c/64 (first threads 0-511, their
// siblings 512-1023), 16 cores per node.
int node_of_cpu(unsigned c) {
  return static_cast<int>((c % 512) / 16);
}

} // namespace

TEST(XlNode, EveryCpuNodeAndDeviceIsFound) {
  const Topology &t = xl();
  EXPECT_TRUE(t.warnings.empty()) << t.warnings.front();
  EXPECT_EQ(t.online.count(), 1024U);
  EXPECT_EQ(t.online.str(), "0-1023");
  EXPECT_TRUE(t.smt());
  EXPECT_EQ(t.cores.size(), 512U);
  ASSERT_EQ(t.sockets.size(), 8U);
  for (const auto &s : t.sockets) {
    EXPECT_EQ(s.cores, 64U) << "socket " << s.id;
    EXPECT_EQ(s.nodes.size(), 4U) << "socket " << s.id;
  }
  ASSERT_EQ(t.nodes.size(), 32U);
  EXPECT_EQ(t.nodes[5].cpus.str(), "80-95,592-607");
  EXPECT_EQ(t.nodes[31].cpus.str(), "496-511,1008-1023");
  ASSERT_EQ(t.nodes[0].distances.size(), 32U);
  EXPECT_EQ(t.nodes[0].distances[0], 10);
  EXPECT_EQ(t.nodes[0].distances[3], 12);  // same socket, another cluster
  EXPECT_EQ(t.nodes[0].distances[4], 21);  // one socket-interconnect hop
  EXPECT_EQ(t.nodes[0].distances[16], 31); // two hops
  EXPECT_EQ(t.sockets[7].nodes, (std::vector<int>{28, 29, 30, 31}));

  ASSERT_EQ(t.gpus.size(), 32U); // the BMC's display controller is not a GPU
  std::set<int> gpu_nodes;
  for (const auto &g : t.gpus) {
    EXPECT_EQ(g.vendor, "NVIDIA");
    gpu_nodes.insert(g.pci.numa_node);
    EXPECT_EQ(g.pci.local_cpus, t.node(g.pci.numa_node)->cpus) << g.pci.address;
  }
  EXPECT_EQ(gpu_nodes.size(), 32U); // one GPU on every node

  ASSERT_EQ(t.nics.size(), 40U);
  unsigned rdma = 0, ethernet = 0, irqs = 0;
  std::set<std::string> ib;
  for (const auto &n : t.nics) {
    irqs += static_cast<unsigned>(n.irqs.size());
    if (n.driver == "mlx5_core") {
      ++rdma;
      EXPECT_EQ(n.rx_queues, 64U) << n.name;
      ASSERT_EQ(n.irqs.size(), 65U) << n.name;
      EXPECT_EQ(n.irqs[0].name, "mlx5_async0@pci:" + n.pci.address);
      EXPECT_EQ(n.irqs[64].name, "mlx5_comp63@pci:" + n.pci.address);
      EXPECT_EQ(n.ib_port, 1U) << n.name;
      ib.insert(n.ib_device);
    } else {
      ++ethernet;
      EXPECT_EQ(n.driver, "ice") << n.name;
      EXPECT_EQ(n.rx_queues, 32U) << n.name;
      ASSERT_EQ(n.irqs.size(), 33U) << n.name;
      EXPECT_EQ(n.irqs[1].name, "ice-" + n.name + "-TxRx-0");
      EXPECT_EQ(n.pci.numa_node % 4, 0) << n.name; // the first node of its socket
    }
  }
  EXPECT_EQ(rdma, 32U);
  EXPECT_EQ(ethernet, 8U);
  EXPECT_EQ(ib.size(), 32U); // mlx5_0 ... mlx5_31, each once
  EXPECT_EQ(irqs, 32U * 65 + 8 * 33);
  EXPECT_EQ(t.nvme.size(), 64U);
  // 32 x (root port, upstream port, 4 downstream ports, GPU, NIC, 2 NVMe)
  // + 8 x (root port, Ethernet port)
  EXPECT_EQ(t.pci.size(), 32U * 10 + 8 * 2);
  EXPECT_TRUE(t.iommu_groups);
}

// Every GPU gets feeder cores and its NIC on its own node: the NIC beside it
// below the same PCIe switch, with its RDMA device.
TEST(XlNode, PlanPairsEveryGpuWithCoresAndNicOnItsNode) {
  const Topology &t = xl();
  const auto planned = make_cpu_plan(t);
  ASSERT_TRUE(planned.ok()) << planned.error().message;
  const CpuPlan &p = *planned;
  ASSERT_EQ(p.gpus.size(), 32U);
  std::set<std::string> nics;
  CpuSet feeders;
  for (const auto &g : p.gpus) {
    SCOPED_TRACE(g.pci);
    const int node = t.gpus[g.gpu].pci.numa_node;
    EXPECT_EQ(g.gpu_node, node);
    EXPECT_EQ(g.cpu_node, node);
    ASSERT_FALSE(g.feeder.empty());
    EXPECT_TRUE(t.node(node)->cpus.contains(g.feeder));
    EXPECT_FALSE(feeders.intersects(g.feeder)); // no core feeds two GPUs
    feeders |= g.feeder;
    EXPECT_EQ(g.nic_distance, PciDistance::same_switch);
    EXPECT_EQ(g.nic_ib_device, "mlx5_" + std::to_string(node));
    const Nic *nic = nullptr;
    for (const auto &n : t.nics) {
      nic = n.name == g.nic ? &n : nic;
    }
    ASSERT_NE(nic, nullptr) << g.nic;
    EXPECT_EQ(nic->pci.numa_node, node);
    nics.insert(g.nic);
  }
  EXPECT_EQ(nics.size(), 32U); // 32 distinct NICs
  EXPECT_EQ(feeders, p.feeder);
  ASSERT_EQ(p.ranks.size(), 32U);
  ASSERT_EQ(p.nics.size(), 40U);
  for (const auto &n : p.nics) {
    SCOPED_TRACE(n.name);
    ASSERT_GE(n.node, 0);
    EXPECT_FALSE(n.irq_cpus.empty());
    for (unsigned c = 0; c < 1024; ++c) {
      if (n.irq_cpus.test(c)) {
        EXPECT_EQ(node_of_cpu(c), n.node) << "IRQ CPU " << c << " off the NIC's node";
      }
    }
    EXPECT_FALSE(n.irq_cpus.intersects(p.feeder));
  }
}

TEST(XlNode, RecommendsTraining) {
  const auto r = recommend_profile(xl());
  EXPECT_EQ(r.profile, "training");
  EXPECT_EQ(r.gpus, 32U);
  EXPECT_EQ(r.rdma_nics.size(), 32U);
  EXPECT_EQ(r.node_memory_kb, 32ULL * 536870912);
}

// A healthy tree: every link at its full speed and width, nothing flagged.
TEST(XlNode, PcieAuditFlagsNothing) {
  AuditOptions o;
  o.run_nvidia_smi = false;
  o.nvml_library = "none";
  const Profile training = *ProfileLoader().load("training");
  std::map<std::string, unsigned> ok_links;
  for (const auto &f : audit(training, fixture(k_xl), o)) {
    if (f.category != "pcie") {
      continue;
    }
    EXPECT_EQ(f.severity, Severity::ok) << f.id << ": " << f.current;
    if (f.id.starts_with("pcie:link:")) {
      ++ok_links["links"];
    }
    if (f.id == "pcie:iommu") {
      EXPECT_EQ(f.current, "IOMMU in use: 72 GPU/NIC in identity domains, 0 translated");
    }
  }
  EXPECT_EQ(ok_links["links"], 32U + 40 + 64); // every GPU, NIC and NVMe
}
