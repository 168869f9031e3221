// recommend_profile() on the generated fixtures (tests/fixtures): each rule
// of mltune/recommend.hpp on the machine it is for.
#include "mltune/recommend.hpp"

#include "topology_fixture.hpp"

#include <gtest/gtest.h>

using namespace mltune;

namespace {

Recommendation on(std::string_view fixture) {
  auto t = discover_topology(test::fixture(fixture));
  EXPECT_TRUE(t) << t.error().message;
  return t ? recommend_profile(*t) : Recommendation{};
}

} // namespace

TEST(Recommend, RdmaNicsMeanTraining) {
  const auto r = on("hgx-2s-8gpu");
  EXPECT_EQ(r.profile, "training");
  EXPECT_EQ(r.gpus, 8U);
  EXPECT_EQ(r.rdma_nics.size(), 8U);
  ASSERT_FALSE(r.reasons.empty());
  EXPECT_NE(r.reasons[0].find("RDMA NIC"), std::string::npos) << r.reasons[0];
}

TEST(Recommend, FourGpusWithoutRdmaMeanTraining) {
  const auto r = on("epyc-nps4-4gpu");
  EXPECT_EQ(r.profile, "training");
  EXPECT_TRUE(r.rdma_nics.empty());
}

TEST(Recommend, OneGpuMeansInference) {
  EXPECT_EQ(on("workstation-1gpu").profile, "inference");
}

TEST(Recommend, NoGpuNoProfile) {
  const auto r = on("vm-2cpu");
  EXPECT_EQ(r.profile, "");
  ASSERT_EQ(r.reasons.size(), 1U);
  EXPECT_NE(r.reasons[0].find("no GPU"), std::string::npos);
}

TEST(Recommend, LittleMemoryPerGpuIsNoted) {
  const auto r = on("guest-q35");
  ASSERT_EQ(r.reasons.size(), 2U);
  EXPECT_NE(r.reasons[1].find("little for pinned staging buffers"), std::string::npos) << r.reasons[1];
}

// A cloud GPU VM's hot-plugged memory is in MemTotal but in no NUMA node's
// figure: the node's memory is MemTotal, the nodes' figures shown apart.
TEST(Recommend, MemoryIsMemTotalWithNodesApart) {
  auto t = discover_topology(test::fixture("workstation-1gpu"));
  ASSERT_TRUE(t) << t.error().message;
  for (auto &n : t->nodes) {
    n.mem_total_kb = 0;
  }
  t->nodes.front().mem_total_kb = 4ULL << 20;
  t->mem_total_kb = 125ULL << 20;
  const auto r = recommend_profile(*t);
  EXPECT_EQ(r.memory_kb, 125ULL << 20);
  EXPECT_EQ(r.node_memory_kb, 4ULL << 20);
  ASSERT_EQ(r.reasons.size(), 2U);
  EXPECT_EQ(r.reasons[1].rfind("125 GiB of memory (NUMA nodes: " + std::to_string(t->nodes.front().id) + ": 4 GiB", 0),
            0U)
      << r.reasons[1];
  EXPECT_NE(r.reasons[1].find(", 125 GiB per GPU"), std::string::npos) << r.reasons[1];
  // Without /proc/meminfo the nodes' total stands, without the aside.
  t->mem_total_kb = 0;
  const auto n = recommend_profile(*t);
  EXPECT_EQ(n.memory_kb, 4ULL << 20);
  EXPECT_EQ(n.reasons[1].rfind("4 GiB of memory, ", 0), 0U) << n.reasons[1];
}
