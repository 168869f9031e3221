#include "mltune/cpu_plan.hpp"

#include "cli.hpp"
#include "topology_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

using namespace mltune;
using mltune::test::fixture;

namespace {

CpuPlan plan_of(std::string_view name, PlanOptions o = {}) {
  auto t = discover_topology(fixture(name));
  EXPECT_TRUE(t.ok()) << name;
  auto p = make_cpu_plan(*t, o);
  EXPECT_TRUE(p.ok()) << name << ": " << (p.ok() ? "" : p.error().message);
  return *p;
}

bool any_reason(const CpuPlan &p, std::string_view needle) {
  return std::ranges::any_of(p.reasons, [&](const std::string &r) { return r.find(needle) != std::string::npos; });
}

} // namespace

// The acceptance invariants, on every fixture.
TEST(CpuPlan, InvariantsOnEveryFixture) {
  for (const auto name : mltune::test::k_fixtures) {
    SCOPED_TRACE(name);
    const Topology t = discover_topology(fixture(name)).value();
    const CpuPlan p = make_cpu_plan(t).value();
    EXPECT_FALSE(p.reasons.empty());
    EXPECT_TRUE(p.housekeeping.test(0)) << "CPU 0 must be a housekeeping CPU";
    for (const auto &s : t.sockets) {
      EXPECT_TRUE(p.housekeeping.intersects(s.cpus)) << "socket " << s.id << " has no housekeeping core";
    }
    EXPECT_FALSE(p.feeder.intersects(p.housekeeping));
    EXPECT_FALSE(p.feeder.intersects(p.workers));
    EXPECT_EQ(p.feeder | p.housekeeping | p.workers, t.online);
    for (const auto &c : t.cores) { // never split an SMT pair between roles
      for (const CpuSet *role : {&p.feeder, &p.housekeeping, &p.workers}) {
        EXPECT_TRUE(!role->intersects(c.threads) || role->contains(c.threads)) << c.threads.str();
      }
    }
    for (const auto &g : p.gpus) {
      const NumaNode *gn = t.node(g.gpu_node);
      if (gn != nullptr && !gn->cpus.empty()) {
        EXPECT_EQ(g.cpu_node, g.gpu_node) << "GPU " << g.gpu;
      }
      EXPECT_TRUE(t.node(g.cpu_node)->cpus.contains(g.feeder)) << "GPU " << g.gpu << " feeder off its node";
    }
    for (const auto &n : p.nics) {
      EXPECT_FALSE(n.irq_cpus.empty()) << n.name;
      EXPECT_FALSE(n.irq_cpus.intersects(p.feeder)) << n.name;
      EXPECT_TRUE(p.housekeeping.contains(n.irq_cpus)) << n.name;
    }
  }
}

TEST(CpuPlan, EightGpuServer) {
  const CpuPlan p = plan_of("hgx-2s-8gpu");
  ASSERT_EQ(p.gpus.size(), 8U);
  EXPECT_EQ(p.housekeeping.str(), "0-1,48-49,96-97,144-145");
  EXPECT_EQ(p.gpus[0].feeder.str(), "2-3,98-99");
  EXPECT_EQ(p.gpus[4].feeder.str(), "50-51,146-147");
  EXPECT_EQ(p.feeder.count(), 32U); // 8 GPUs x 2 cores x 2 threads
  ASSERT_EQ(p.ranks.size(), 8U);
  EXPECT_EQ(p.ranks[0].dataloader_workers, 9U); // 38 worker cores on node 0 / 4 ranks
  EXPECT_EQ(p.ranks[5].launch.rfind("numactl --cpunodebind=1 --membind=1 taskset -c 52-53,148-149 env "
                                    "OMP_NUM_THREADS=2 NCCL_SET_THREAD_NAME=1 CUDA_DEVICE_ORDER=PCI_BUS_ID "
                                    "CUDA_VISIBLE_DEVICES=5 ",
                                    0),
            0U)
      << p.ranks[5].launch;
  const NicIrqPlan &nic = p.nics.front();
  EXPECT_EQ(nic.irqs.size(), 65U);
}

TEST(CpuPlan, GpusPerRank) {
  const CpuPlan p = plan_of("hgx-2s-8gpu", {.gpus_per_rank = 4});
  ASSERT_EQ(p.ranks.size(), 2U);
  EXPECT_EQ(p.ranks[1].gpus, (std::vector<unsigned>{4, 5, 6, 7}));
  EXPECT_EQ(p.ranks[1].cpus.str(), "50-57,146-153");
  EXPECT_EQ(p.ranks[1].omp_threads, 8U);
  EXPECT_EQ(p.ranks[0].dataloader_workers, 38U);
  auto t = discover_topology(fixture("hgx-2s-8gpu")).value();
  auto bad = make_cpu_plan(t, {.gpus_per_rank = 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, Errc::input);
  EXPECT_NE(bad.error().message.find("8 GPUs cannot be split into ranks of 3"), std::string::npos);
  const CpuPlan two = plan_of("hgx-2s-8gpu", {.gpus_per_rank = 8});
  EXPECT_FALSE(two.warnings.empty()); // one rank across both sockets: explained
}

TEST(CpuPlan, FeederCoresPerGpu) {
  const CpuPlan p = plan_of("hgx-2s-8gpu", {.feeder_cores_per_gpu = 4});
  EXPECT_EQ(p.gpus[1].feeder.str(), "6-9,102-105");
  auto t = discover_topology(fixture("hgx-2s-8gpu")).value();
  auto bad = make_cpu_plan(t, {.feeder_cores_per_gpu = 12});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("node 0 has 46 free physical cores after housekeeping; 4 GPUs x 12 feeder "
                                     "cores need 48"),
            std::string::npos)
      << bad.error().message;
}

TEST(CpuPlan, EpycNps4NicNodesGetLocalHousekeeping) {
  const CpuPlan p = plan_of("epyc-nps4-4gpu");
  // One socket of 64 cores: 3 housekeeping cores (1 per 24) from node 0, plus
  // one on nodes 1 and 3 for the NICs there.
  EXPECT_EQ(p.housekeeping.str(), "0-2,16,48,64-66,80,112");
  for (unsigned g = 0; g < 4; ++g) {
    EXPECT_EQ(p.gpus[g].cpu_node, static_cast<int>(g));
  }
  EXPECT_EQ(p.nics[0].irq_cpus.str(), "16,80");
  EXPECT_TRUE(any_reason(p, "so enp33s0f0np0's IRQs stay on its own NUMA node"));
}

TEST(CpuPlan, GpuOnNodeWithoutCpus) {
  const CpuPlan p = plan_of("gpu-memory-node");
  ASSERT_EQ(p.gpus.size(), 1U);
  EXPECT_EQ(p.gpus[0].gpu_node, 1);
  EXPECT_EQ(p.gpus[0].cpu_node, 0);
  EXPECT_TRUE(any_reason(p, "which has no CPUs: its feeder cores come from the nearest node with CPUs, node 0"));
}

TEST(CpuPlan, WorkstationWithUnreportedNode) {
  const CpuPlan p = plan_of("workstation-1gpu");
  ASSERT_EQ(p.gpus.size(), 1U);
  EXPECT_EQ(p.gpus[0].cpu_node, 0);
  EXPECT_EQ(p.housekeeping.str(), "0-1");
  EXPECT_EQ(p.gpus[0].feeder.str(), "2-5"); // two P-cores with their siblings
  EXPECT_EQ(p.ranks[0].dataloader_workers, 21U);
}

TEST(CpuPlan, NoGpuAndTinyMachinesGiveAnExplainedEmptyPlan) {
  const CpuPlan p = plan_of("vm-2cpu");
  EXPECT_TRUE(p.empty());
  EXPECT_TRUE(p.gpus.empty());
  EXPECT_TRUE(p.ranks.empty());
  EXPECT_EQ(p.housekeeping.str(), "0-1");
  EXPECT_TRUE(any_reason(p, "no GPU found"));
  EXPECT_TRUE(any_reason(p, "nothing is isolated"));

  // The same 2-CPU VM with a GPU passed through: too small.
  mltune::test::FixtureCopy f("vm-2cpu");
  const std::string dev = "/sys/devices/pci0000:00/0000:00:05.0";
  f.set(dev + "/class", "0x030200\n");
  f.set(dev + "/vendor", "0x10de\n");
  f.set(dev + "/device", "0x2330\n");
  std::filesystem::create_directories(f.root().path("/sys/bus/pci/devices"));
  std::filesystem::create_directory_symlink("../../../devices/pci0000:00/0000:00:05.0",
                                            f.root().path("/sys/bus/pci/devices/0000:00:05.0"));
  const CpuPlan small = make_cpu_plan(discover_topology(f.root()).value()).value();
  EXPECT_TRUE(small.empty());
  EXPECT_TRUE(any_reason(small, "too small to isolate anything"));
}

TEST(CpuPlan, GuestPlan) {
  const CpuPlan p = plan_of("guest-q35");
  EXPECT_EQ(p.housekeeping.str(), "0-1,4-5");
  EXPECT_EQ(p.feeder.str(), "6-7");
  EXPECT_EQ(p.nics[1].irq_cpus.str(), "4-5");
  EXPECT_EQ(p.nics[0].irq_cpus.str(), "0-1,4-5"); // e1000e: no node reported
}

TEST(CpuPlan, ResolveCpuset) {
  const CpuPlan p = plan_of("hgx-2s-8gpu");
  EXPECT_EQ(resolve_cpuset("feeder", p).value(), p.feeder);
  EXPECT_EQ(resolve_cpuset("housekeeping", p).value(), p.housekeeping);
  EXPECT_EQ(resolve_cpuset("workers", p).value(), p.workers);
  EXPECT_EQ(resolve_cpuset("feeder:3", p).value().str(), "8-9,104-105");
  EXPECT_EQ(resolve_cpuset("nic:enp25s0np0", p).value().str(), "0-1,96-97");
  EXPECT_EQ(resolve_cpuset("4-5", p).value().str(), "4-5");
  for (const char *bad : {"feeder:8", "feeder:", "feeder:x", "feeders", "nic:eth9", "4-300", "1-", ""}) {
    auto r = resolve_cpuset(bad, p);
    if (std::string_view(bad).empty()) {
      EXPECT_TRUE(r.ok()); // the empty cpulist
      continue;
    }
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().kind, Errc::input) << bad;
  }
  EXPECT_NE(resolve_cpuset("4-300", p).error().message.find("192-300 are not online"), std::string::npos);
}

TEST(PlanCli, HumanAndJson) {
  std::ostringstream out;
  std::ostringstream err;
  const std::string root = mltune::test::fixture_dir("guest-q35").string();
  ASSERT_EQ(cli::run({"--sysroot", root, "plan", "--json"}, out, err), 0) << err.str();
  auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["feeder"], "6-7");
  EXPECT_EQ(j["ranks"][0]["env"]["NCCL_SET_THREAD_NAME"], "1");
  EXPECT_EQ(j["empty"], false);
  out.str("");
  ASSERT_EQ(cli::run({"--sysroot", root, "plan"}, out, err), 0);
  EXPECT_NE(out.str().find("why:\n"), std::string::npos);
  out.str("");
  const std::string vm = mltune::test::fixture_dir("vm-2cpu").string();
  ASSERT_EQ(cli::run({"--sysroot", vm, "plan"}, out, err), 0);
  EXPECT_NE(out.str().find("empty plan: nothing isolated"), std::string::npos);
  EXPECT_EQ(cli::run({"--sysroot", root, "plan", "--feeder-cores-per-gpu", "5"}, out, err), 2);
  EXPECT_EQ(cli::run({"--sysroot", root, "plan", "--gpus-per-rank", "0"}, out, err), 2);
}
