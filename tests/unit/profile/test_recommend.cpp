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
