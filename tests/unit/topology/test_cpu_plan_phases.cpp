// Unit tests of each phase of make_cpu_plan (topology/cpu_plan_phases.hpp) on
// the generated fixtures: housekeeping, GPU placement, feeder cores, workers
// and NIC IRQs, ranks, rank workers and the launch environment.
#include "topology/cpu_plan_phases.hpp"

#include "topology_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>

using namespace mltune;
using namespace mltune::detail;
using mltune::test::fixture;

namespace {

Topology topo_of(std::string_view name) {
  auto t = discover_topology(fixture(name));
  EXPECT_TRUE(t.ok()) << name;
  return *t;
}

// A plan carried through every phase up to the feeder cores.
struct Fed {
  explicit Fed(std::string_view name, PlanOptions o = {}) : topo(topo_of(name)), book(topo), opts(o) {
    p.online = topo.online;
    plan_housekeeping(topo, book, p);
    node_gpus = place_gpus(topo, book, p);
    EXPECT_TRUE(assign_feeders(node_gpus, opts, book, p).ok());
  }
  Topology topo;
  CoreBook book;
  PlanOptions opts;
  CpuPlan p;
  NodeGpus node_gpus;
};

} // namespace

TEST(CpuPlanPhases, CoreBookHandsOutEachCoreOnce) {
  const Topology t = topo_of("hgx-2s-8gpu");
  CoreBook book(t);
  const int node = t.cores.front().node;
  const auto all = book.free_on(node);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.size(), book.on_node(node).size());
  book.take(all.front());
  EXPECT_TRUE(book.taken(all.front()));
  EXPECT_EQ(book.free_on(node).size(), all.size() - 1);
  EXPECT_TRUE(book.on_node(12345).empty());
}

TEST(CpuPlanPhases, EmptyPlanKeepsEveryCpuForHousekeeping) {
  const Topology t = topo_of("vm-2cpu");
  const CpuPlan p = empty_cpu_plan(t, CpuPlan{}, "because");
  EXPECT_EQ(p.housekeeping, t.online);
  EXPECT_TRUE(p.workers.empty());
  EXPECT_TRUE(p.empty());
  ASSERT_EQ(p.reasons.size(), 2U);
  EXPECT_EQ(p.reasons[0], "because");
  EXPECT_EQ(p.nics.size(), t.nics.size());
}

TEST(CpuPlanPhases, NicIrqsStayInThePoolAndOnTheNicsNode) {
  const Topology t = topo_of("hgx-2s-8gpu");
  ASSERT_FALSE(t.nics.empty());
  CpuPlan p;
  plan_nic_irqs(t, t.online, p);
  ASSERT_EQ(p.nics.size(), t.nics.size());
  for (size_t i = 0; i < p.nics.size(); ++i) {
    EXPECT_EQ(p.nics[i].name, t.nics[i].name);
    EXPECT_EQ(p.nics[i].irqs.size(), t.nics[i].irqs.size());
    EXPECT_FALSE(p.nics[i].irq_cpus.empty());
    if (const NumaNode *n = t.node(p.nics[i].node); n != nullptr && !n->cpus.empty()) {
      EXPECT_TRUE(n->cpus.contains(p.nics[i].irq_cpus));
    }
  }
  CpuPlan none;
  plan_nic_irqs(t, CpuSet{0}, none);
  for (const auto &n : none.nics) {
    EXPECT_EQ(n.irq_cpus, CpuSet{0});
  }
}

TEST(CpuPlanPhases, HousekeepingTakesCpu0AndOneCorePerSocket) {
  const Topology t = topo_of("hgx-2s-8gpu");
  CoreBook book(t);
  CpuPlan p;
  plan_housekeeping(t, book, p);
  EXPECT_TRUE(p.housekeeping.test(0));
  for (const auto &s : t.sockets) {
    EXPECT_TRUE(p.housekeeping.intersects(s.cpus)) << "socket " << s.id;
  }
  for (const auto &c : t.cores) {
    EXPECT_EQ(book.taken(&c), p.housekeeping.contains(c.threads)) << "whole cores only";
  }
  EXPECT_GE(p.reasons.size(), t.sockets.size());
  EXPECT_NE(p.reasons.front().find("housekeeping on socket"), std::string::npos);
}

TEST(CpuPlanPhases, GpusPlacedOnANodeWithCpus) {
  for (const auto name : {"hgx-2s-8gpu", "gpu-memory-node", "epyc-nps4-4gpu"}) {
    SCOPED_TRACE(name);
    const Topology t = topo_of(name);
    CoreBook book(t);
    CpuPlan p;
    const NodeGpus ng = place_gpus(t, book, p);
    ASSERT_EQ(p.gpus.size(), t.gpus.size());
    size_t placed = 0;
    for (const auto &[node, idx] : ng) {
      for (const size_t i : idx) {
        EXPECT_EQ(p.gpus[i].cpu_node, node);
        ASSERT_NE(t.node(node), nullptr);
        EXPECT_FALSE(t.node(node)->cpus.empty());
        ++placed;
      }
    }
    EXPECT_EQ(placed, t.gpus.size());
  }
}

TEST(CpuPlanPhases, FeederCountAutomaticAndRequested) {
  std::vector<std::string> why;
  EXPECT_EQ(*feeder_cores_per_gpu(0, 4, 12, {}, why), 2U);
  EXPECT_EQ(*feeder_cores_per_gpu(0, 4, 11, {}, why), 1U);
  EXPECT_EQ(*feeder_cores_per_gpu(0, 4, 4, {}, why), 1U);
  EXPECT_EQ(*feeder_cores_per_gpu(0, 4, 3, {}, why), 0U);
  EXPECT_EQ(why.size(), 4U);
  EXPECT_NE(why.back().find("too few to give each GPU a feeder core"), std::string::npos);
  PlanOptions o;
  o.feeder_cores_per_gpu = 3;
  EXPECT_EQ(*feeder_cores_per_gpu(1, 2, 6, o, why), 3U);
  EXPECT_NE(why.back().find("as requested"), std::string::npos);
  const auto err = feeder_cores_per_gpu(1, 2, 5, o, why);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.error().kind, Errc::input);
  EXPECT_EQ(err.error().message, "node 1 has 5 free physical cores after housekeeping; 2 GPUs x 3 feeder cores need 6");
}

TEST(CpuPlanPhases, FeedersAreWholeFreeCoresOnTheGpusNode) {
  Fed f("hgx-2s-8gpu");
  EXPECT_FALSE(f.p.feeder.empty());
  EXPECT_FALSE(f.p.feeder.intersects(f.p.housekeeping));
  CpuSet all;
  for (const auto &g : f.p.gpus) {
    EXPECT_FALSE(g.feeder.empty());
    EXPECT_TRUE(f.topo.node(g.cpu_node)->cpus.contains(g.feeder));
    EXPECT_FALSE(all.intersects(g.feeder)) << "GPU " << g.gpu << " shares a feeder core";
    all |= g.feeder;
  }
  EXPECT_EQ(all, f.p.feeder);
}

TEST(CpuPlanPhases, FeedersRefuseARequestThatDoesNotFit) {
  const Topology t = topo_of("workstation-1gpu");
  CoreBook book(t);
  CpuPlan p;
  plan_housekeeping(t, book, p);
  const NodeGpus ng = place_gpus(t, book, p);
  PlanOptions o;
  o.feeder_cores_per_gpu = 1000;
  const auto st = assign_feeders(ng, o, book, p);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind, Errc::input);
  EXPECT_TRUE(p.feeder.empty());
}

TEST(CpuPlanPhases, WorkersAreTheRest) {
  Fed f("hgx-2s-8gpu");
  plan_workers(f.topo, f.p);
  EXPECT_EQ(f.p.workers, f.topo.online - f.p.housekeeping - f.p.feeder);
  EXPECT_EQ(f.p.nics.size(), f.topo.nics.size());
  for (const auto &n : f.p.nics) {
    EXPECT_TRUE(f.p.housekeeping.contains(n.irq_cpus));
  }
}

TEST(CpuPlanPhases, RanksGroupConsecutiveGpus) {
  PlanOptions o;
  o.gpus_per_rank = 2;
  Fed f("hgx-2s-8gpu", o);
  const NodeRanks nr = plan_ranks(o, f.p);
  ASSERT_EQ(f.p.ranks.size(), f.p.gpus.size() / 2);
  size_t counted = 0;
  for (const auto &[node, ranks] : nr) {
    counted += ranks.size();
    for (const unsigned r : ranks) {
      EXPECT_EQ(f.p.ranks[r].nodes.front(), node);
    }
  }
  EXPECT_EQ(counted, f.p.ranks.size());
  for (const auto &rp : f.p.ranks) {
    ASSERT_EQ(rp.gpus.size(), 2U);
    EXPECT_EQ(rp.gpus[0] + 1, rp.gpus[1]);
    EXPECT_EQ(rp.cpus, f.p.gpus[rp.gpus[0]].feeder | f.p.gpus[rp.gpus[1]].feeder);
  }
}

TEST(CpuPlanPhases, RankWorkersShareTheFreeCores) {
  Fed f("hgx-2s-8gpu");
  plan_workers(f.topo, f.p);
  const NodeRanks nr = plan_ranks(f.opts, f.p);
  plan_rank_workers(f.topo, nr, f.book, f.p);
  CpuSet seen;
  for (const auto &rp : f.p.ranks) {
    EXPECT_GE(rp.dataloader_workers, 1U);
    EXPECT_FALSE(rp.worker_cpus.empty());
    EXPECT_FALSE(rp.worker_cpus.intersects(f.p.feeder));
    EXPECT_FALSE(seen.intersects(rp.worker_cpus));
    seen |= rp.worker_cpus;
  }
  EXPECT_TRUE(f.p.workers.contains(seen));
}

TEST(CpuPlanPhases, RankEnvAndLaunchLine) {
  Fed f("hgx-2s-8gpu");
  plan_workers(f.topo, f.p);
  plan_rank_workers(f.topo, plan_ranks(f.opts, f.p), f.book, f.p);
  const size_t before = f.p.reasons.size();
  plan_rank_env(f.topo, f.p);
  EXPECT_EQ(f.p.reasons.size(), before + 1);
  ASSERT_FALSE(f.p.ranks.empty());
  const RankPlan &rp = f.p.ranks.front();
  ASSERT_FALSE(rp.env.empty());
  EXPECT_EQ(rp.env.front().first, "OMP_NUM_THREADS");
  EXPECT_EQ(rp.env.front().second, std::to_string(rp.omp_threads));
  EXPECT_EQ(rp.launch.rfind("numactl --cpunodebind=", 0), 0U);
  EXPECT_NE(rp.launch.find("taskset -c " + rp.cpus.str() + " env"), std::string::npos);
  EXPECT_NE(rp.launch.find("MLTUNE_DATALOADER_CPUS=" + rp.worker_cpus.str()), std::string::npos);
  EXPECT_EQ(rp.launch.substr(rp.launch.size() - 10), " <command>");
}
