// Unit tests of each phase of nic_plan (nic/plan_phases.hpp) on a small fake
// backend: settings, features, values, queue IRQs, RPS, one device, the RPS
// flow table and irqbalance.
#include "nic/plan_phases.hpp"

#include <gtest/gtest.h>

using namespace mltune;
using namespace mltune::detail;

namespace {

// Node CPUs and globals only; planning never sets anything.
class PlanBackend : public NicBackend {
public:
  std::map<int, std::vector<unsigned>> node{{0, {0, 1}}, {1, {4, 5, 6}}};
  std::string flow_entries = "0";
  int pid = 0;
  int node_reads = 0;

  Result<std::vector<std::string>> interfaces() override { return std::vector<std::string>{}; }
  Result<NicDevice> probe(const std::string &ifname) override { return failure(ifname + ": no such device"); }
  Status set(const std::string &, const std::string &, const NicValues &) override {
    return failure("planning must not set anything");
  }
  Result<std::string> read_global(const std::string &) override { return flow_entries; }
  Result<std::vector<unsigned>> node_cpus(int n) override {
    ++node_reads;
    if (n < 0) {
      return std::vector<unsigned>{0, 1, 2, 3, 4, 5, 6, 7};
    }
    const auto it = node.find(n);
    return it == node.end() ? std::vector<unsigned>{} : it->second;
  }
  int irqbalance_pid() override { return pid; }
  Result<std::string> irqbalance(const std::string &, const std::vector<unsigned> &,
                                 const std::vector<int> &) override {
    return std::string("ok");
  }
};

NicDevice dev1() {
  NicDevice d;
  d.name = "eth1";
  d.driver = "virtio_net";
  d.numa_node = 1;
  d.current = {{"rings.rx", "256"},        {"channels.combined", "2"}, {"features.rx-gro", "on"},
               {"features.rx-lro", "off"}, {"irq.30", "0-7"},          {"irq.31", "0-7"},
               {"rps.rx-0.cpus", "0"},     {"rps.rx-0.flow-cnt", "0"}, {"rps.rx-1.cpus", "0"},
               {"rps.rx-1.flow-cnt", "0"}};
  d.max = {{"rings.rx", 1024}, {"channels.combined", 8}};
  d.fixed = {"features.rx-lro"};
  d.unsupported_groups = {"pause"};
  d.irqs = {30, 31};
  d.rx_queues = {"rx-0", "rx-1"};
  return d;
}

NicSetting setting(std::string key, std::string value, bool explicit_request = false) {
  return {std::move(key), std::move(value), "t.toml:1", explicit_request};
}

NicWanted wanted(std::initializer_list<NicSetting> s) {
  NicWanted w;
  for (const auto &x : s) {
    w[x.key] = x;
  }
  return w;
}

} // namespace

TEST(NicPlanPhases, HousekeepingIsReadOnceAndMustNotBeEmpty) {
  PlanBackend b;
  NicPlan plan;
  const NicDevice d = dev1();
  DeviceChanges dc(d, b, plan);
  EXPECT_EQ(*dc.housekeeping(), (std::vector<unsigned>{4, 5, 6}));
  EXPECT_EQ(*dc.housekeeping(), (std::vector<unsigned>{4, 5, 6}));
  EXPECT_EQ(b.node_reads, 1);
  NicDevice lone = dev1();
  lone.numa_node = 3;
  DeviceChanges none(lone, b, plan);
  const auto hk = none.housekeeping();
  ASSERT_FALSE(hk.ok());
  EXPECT_EQ(hk.error().message, "eth1: no housekeeping CPUs on NUMA node 3");
}

TEST(NicPlanPhases, ChangeOnlyWhenDifferent) {
  PlanBackend b;
  NicPlan plan;
  const NicDevice d = dev1();
  DeviceChanges dc(d, b, plan);
  dc.change("rings.rx", "256", setting("rings.rx", "256"));
  EXPECT_TRUE(dc.changes.empty());
  dc.change("rings.rx", "512", setting("rings.rx", "512"));
  ASSERT_EQ(dc.changes.size(), 1U);
  EXPECT_EQ(dc.changes[0].from, "256");
  EXPECT_EQ(dc.changes[0].origin, "t.toml:1");
  dc.skip("pause.rx", "why");
  ASSERT_EQ(plan.skipped.size(), 1U);
  EXPECT_EQ(plan.skipped[0].ifname, "eth1");
}

TEST(NicPlanPhases, WantedLaterRulesWin) {
  NicRule all{"*", {setting("rings.rx", "1")}, "t.toml"};
  NicRule virt{"virtio*", {setting("rings.rx", "2")}, "t.toml"};
  NicRule other{"mlx5*", {setting("rings.rx", "3")}, "t.toml"};
  const std::vector<NicRule> rules{all, virt, other};
  const auto w = nic_wanted_for(rules, dev1());
  ASSERT_EQ(w.size(), 1U);
  EXPECT_EQ(w.at("rings.rx").value, "2");
}

TEST(NicPlanPhases, FeatureFixedOrUnknown) {
  PlanBackend b;
  NicPlan plan;
  const NicDevice d = dev1();
  DeviceChanges dc(d, b, plan);
  ASSERT_TRUE(plan_feature(dc, "features.gro", setting("features.gro", "false"), "at").ok());
  ASSERT_EQ(dc.changes.size(), 1U);
  EXPECT_EQ(dc.changes[0].key, "features.rx-gro");
  EXPECT_EQ(dc.changes[0].to, "off");
  ASSERT_TRUE(plan_feature(dc, "features.lro", setting("features.lro", "true"), "at").ok());
  ASSERT_EQ(plan.skipped.size(), 1U);
  EXPECT_EQ(plan.skipped[0].why, "fixed by driver virtio_net");
  const auto fixed = plan_feature(dc, "features.lro", setting("features.lro", "true", true), "at");
  ASSERT_FALSE(fixed.ok());
  EXPECT_EQ(fixed.error().message, "at: feature 'lro' is fixed on eth1 (driver virtio_net)");
  const auto unknown = plan_feature(dc, "features.nope", setting("features.nope", "true"), "at");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message, "at: unknown feature 'nope' (see 'mltunectl nic show eth1')");
}

TEST(NicPlanPhases, ValueMaxLocalAndLimits) {
  PlanBackend b;
  NicPlan plan;
  const NicDevice d = dev1();
  DeviceChanges dc(d, b, plan);
  ASSERT_TRUE(plan_value(dc, "rings.rx", setting("rings.rx", "max"), "at").ok());
  ASSERT_TRUE(plan_value(dc, "channels.combined", setting("channels.combined", "local"), "at").ok());
  ASSERT_EQ(dc.changes.size(), 2U);
  EXPECT_EQ(dc.changes[0].to, "1024");
  EXPECT_EQ(dc.changes[1].to, "3") << "three housekeeping CPUs on node 1";
  const auto big = plan_value(dc, "rings.rx", setting("rings.rx", "2048"), "at");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().message, "at: 2048 exceeds the device maximum 1024");
  const auto zero = plan_value(dc, "rings.rx", setting("rings.rx", "0"), "at");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().message, "at: 0 is not a valid size");
  ASSERT_TRUE(plan_value(dc, "rings.tx", setting("rings.tx", "512"), "at").ok());
  ASSERT_EQ(plan.skipped.size(), 1U);
  EXPECT_EQ(plan.skipped[0].why, "not supported by driver virtio_net");
  EXPECT_FALSE(plan_value(dc, "rings.bogus", setting("rings.bogus", "1"), "at").ok());
}

TEST(NicPlanPhases, SettingsSkipUnsupportedGroupsAndLeaveIrqRps) {
  PlanBackend b;
  NicPlan plan;
  const NicDevice d = dev1();
  DeviceChanges dc(d, b, plan);
  const auto w = wanted({setting("pause.rx", "on"), setting("irq.affinity", "housekeeping"),
                         setting("rps.cpus", "housekeeping"), setting("rings.rx", "512")});
  ASSERT_TRUE(plan_settings(dc, w).ok());
  ASSERT_EQ(dc.changes.size(), 1U);
  EXPECT_EQ(dc.changes[0].key, "rings.rx");
  ASSERT_EQ(plan.skipped.size(), 1U);
  EXPECT_EQ(plan.skipped[0].why, "driver virtio_net has no pause settings");
  const auto st = plan_settings(dc, wanted({setting("pause.rx", "on", true)}));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "eth1: pause.rx (t.toml:1): the virtio_net driver does not support pause settings");
}

TEST(NicPlanPhases, QueueIrqsRoundRobinOverHousekeeping) {
  PlanBackend b;
  NicPlan plan;
  const NicDevice d = dev1();
  DeviceChanges dc(d, b, plan);
  NicPlanTotals totals;
  ASSERT_TRUE(plan_queue_irqs(dc, wanted({setting("irq.affinity", "housekeeping")}), totals).ok());
  ASSERT_EQ(dc.changes.size(), 2U);
  EXPECT_EQ(dc.changes[0].key, "irq.30");
  EXPECT_EQ(dc.changes[0].to, "4");
  EXPECT_EQ(dc.changes[1].to, "5");
  EXPECT_EQ(totals.irqbalance_mode, "ban");
  EXPECT_EQ(totals.irqbalance_irqs, (std::set<int>{30, 31}));
  EXPECT_EQ(totals.housekeeping_all, (std::set<unsigned>{4, 5, 6}));
  NicPlanTotals untouched;
  DeviceChanges leave(d, b, plan);
  ASSERT_TRUE(plan_queue_irqs(leave, wanted({setting("irq.affinity", "leave")}), untouched).ok());
  EXPECT_TRUE(leave.changes.empty());
  EXPECT_TRUE(untouched.irqbalance_mode.empty());
}

// A down NIC: its IRQs (freed, or idle vectors whose affinity may not
// stick) are skipped and said so, not written.
TEST(NicPlanPhases, QueueIrqsOfADownNicAreSkipped) {
  PlanBackend b;
  NicPlan plan;
  NicDevice d = dev1();
  d.up = false;
  DeviceChanges dc(d, b, plan);
  NicPlanTotals totals;
  ASSERT_TRUE(plan_queue_irqs(dc, wanted({setting("irq.affinity", "housekeeping")}), totals).ok());
  EXPECT_TRUE(dc.changes.empty());
  ASSERT_EQ(plan.skipped.size(), 1U);
  EXPECT_EQ(plan.skipped[0].key, "irq.affinity");
  EXPECT_NE(plan.skipped[0].why.find("the interface is down"), std::string::npos);
  EXPECT_TRUE(totals.irqbalance_irqs.empty());
}

TEST(NicPlanPhases, RpsMaskAndFlowCount) {
  PlanBackend b;
  NicPlan plan;
  const NicDevice d = dev1();
  DeviceChanges dc(d, b, plan);
  NicPlanTotals totals;
  ASSERT_TRUE(
      plan_rps(dc, wanted({setting("rps.cpus", "housekeeping"), setting("rps.flow-entries", "5000")}), totals).ok());
  EXPECT_TRUE(totals.want_flow);
  EXPECT_EQ(totals.flow_entries, 8192U);
  ASSERT_EQ(dc.changes.size(), 4U);
  EXPECT_EQ(dc.changes[0].key, "rps.rx-0.cpus");
  EXPECT_EQ(dc.changes[0].to, "70");
  EXPECT_EQ(dc.changes[1].key, "rps.rx-0.flow-cnt");
  EXPECT_EQ(dc.changes[1].to, "4096");
}

TEST(NicPlanPhases, RpsMaskBeyond32CpusInKernelGroups) {
  PlanBackend b;
  b.node[1] = {0, 33, 64};
  NicPlan plan;
  const NicDevice d = dev1();
  DeviceChanges dc(d, b, plan);
  NicPlanTotals totals;
  ASSERT_TRUE(plan_rps(dc, wanted({setting("rps.cpus", "housekeeping")}), totals).ok());
  ASSERT_EQ(dc.changes.size(), 2U);
  // 32-bit groups separated by ',', as rps_cpus prints and accepts them.
  EXPECT_EQ(dc.changes[0].to, "1,00000002,00000001");
}

TEST(NicPlanPhases, DeviceChangesInApplyOrder) {
  PlanBackend b;
  NicPlan plan;
  NicPlanTotals totals;
  NicRule r{"*",
            {setting("irq.affinity", "housekeeping"), setting("rings.rx", "512"), setting("channels.combined", "4")},
            "t.toml"};
  ASSERT_TRUE(plan_device(std::span(&r, 1), dev1(), b, plan, totals).ok());
  ASSERT_EQ(plan.changes.size(), 4U);
  EXPECT_EQ(plan.changes.back().key, "irq.31") << "IRQs after the settings that recreate queues";
}

TEST(NicPlanPhases, FlowEntriesOnlyWhenWantedAndDifferent) {
  PlanBackend b;
  NicPlan plan;
  NicPlanTotals totals;
  ASSERT_TRUE(plan_flow_entries(b, totals, plan).ok());
  EXPECT_TRUE(plan.changes.empty());
  totals.want_flow = true;
  totals.flow_entries = 32768;
  totals.flow_origin = "t.toml:9";
  ASSERT_TRUE(plan_flow_entries(b, totals, plan).ok());
  ASSERT_EQ(plan.changes.size(), 1U);
  EXPECT_EQ(plan.changes[0].key, "sysctl.net.core.rps_sock_flow_entries");
  EXPECT_EQ(plan.changes[0].from, "0");
  EXPECT_EQ(plan.changes[0].to, "32768");
  b.flow_entries = "32768";
  NicPlan same;
  ASSERT_TRUE(plan_flow_entries(b, totals, same).ok());
  EXPECT_TRUE(same.changes.empty());
}

TEST(NicPlanPhases, Irqbalance) {
  PlanBackend b;
  NicPlanTotals totals;
  NicPlan nothing;
  plan_irqbalance(b, totals, nothing);
  EXPECT_TRUE(nothing.notes.empty());
  totals.irqbalance_mode = "ban";
  totals.irqbalance_irqs = {30, 31};
  totals.housekeeping_all = {4, 5, 6};
  NicPlan stopped;
  plan_irqbalance(b, totals, stopped);
  EXPECT_EQ(stopped.notes, std::vector<std::string>{"irqbalance is not running"});
  EXPECT_TRUE(stopped.irqbalance.empty());
  b.pid = 42;
  NicPlan running;
  plan_irqbalance(b, totals, running);
  EXPECT_EQ(running.irqbalance, "ban");
  EXPECT_EQ(running.irqbalance_irqs, (std::vector<int>{30, 31}));
  EXPECT_EQ(running.irqbalance_banned, (std::vector<unsigned>{0, 1, 2, 3, 7}));
  EXPECT_EQ(running.notes,
            std::vector<std::string>{"irqbalance (pid 42) is running: the NIC IRQs will be banned from it"});
}

// 4 NICs x 65 queue IRQs on 4 housekeeping CPUs is said, not done silently.
TEST(NicPlanPhases, CrowdedIrqsAreNoted) {
  NicPlan plan;
  for (int i = 0; i < 260; ++i) {
    plan.changes.push_back(
        {"eth" + std::to_string(i / 65), "irq." + std::to_string(100 + i), "0-7", std::to_string(i % 4), "t.toml:1"});
  }
  detail::plan_irq_load(plan);
  ASSERT_EQ(plan.notes.size(), 1U);
  EXPECT_NE(plan.notes[0].find("up to 65 per CPU"), std::string::npos) << plan.notes[0];
  NicPlan light;
  light.changes.push_back({"eth0", "irq.24", "0-7", "2", "t.toml:1"});
  detail::plan_irq_load(light);
  EXPECT_TRUE(light.notes.empty());
}
