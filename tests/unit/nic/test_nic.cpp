// NIC module: profile tables, planning and the transaction, on a fake backend.
#include "mltune/nic.hpp"
#include "mltune/profile.hpp"

#include "fake_nic.hpp"

#include <gtest/gtest.h>

#include <cerrno>

namespace mltune {
namespace {

using test::two_nics;

std::vector<NicRule> rules_from(std::string_view toml) {
  auto p = ProfileLoader().load_text(toml, "t.toml");
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.ok() ? p->nic : std::vector<NicRule>{};
}

TEST(NicProfile, BuiltinsHaveNicTables) {
  for (const char *name : {"training", "inference"}) {
    auto p = ProfileLoader().load(name);
    ASSERT_TRUE(p.ok()) << p.error().message;
    ASSERT_FALSE(p->nic.empty()) << name;
    EXPECT_EQ(p->nic.front().glob, "*");
  }
}

TEST(NicProfile, RulesKeepFileOrder) {
  // toml++ sorts keys; "*" < "eth*" < "virtio*", so list them out of that order.
  const auto rules = rules_from("[nic.\"virtio*\"]\nrings = { rx = 1 }\n[nic.\"*\"]\nrings = { rx = 2 }\n"
                                "[nic.\"eth*\"]\nrings = { rx = 3 }\n");
  ASSERT_EQ(rules.size(), 3U);
  EXPECT_EQ(rules[0].glob, "virtio*");
  EXPECT_EQ(rules[1].glob, "*");
  EXPECT_EQ(rules[2].glob, "eth*");
}

TEST(NicProfile, RejectsBadInput) {
  const std::pair<const char *, const char *> bad[] = {
      {"[nic.\"*\"]\nrings = { rx = -1 }\n", "must not be negative"},
      {"[nic.\"*\"]\nrings = { rx = 99999999 }\n", "out of range"},
      {"[nic.\"*\"]\nrings = { rx = \"lots\" }\n", "expected a non-negative integer"},
      {"[nic.\"*\"]\nring = { rx = 1 }\n", "unknown key 'ring'"},
      {"[nic.\"*\"]\nrings = { rxx = 1 }\n", "unknown NIC setting 'rings.rxx'"},
      {"[nic.\"*\"]\nfeatures = { \"Bad Name\" = true }\n", "invalid feature name"},
      {"[nic.\"*\"]\ncoalesce = { adaptive-rx = 3 }\n", "expected true/false"},
      {"[nic.\"*\"]\nirq = { irqbalance = \"maybe\" }\n", "expected \"ban\""},
      {"[nic]\n\"*\" = 3\n", "must be a table"},
  };
  for (const auto &[text, want] : bad) {
    auto p = ProfileLoader().load_text(text, "bad.toml");
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.error().kind, Errc::input);
    EXPECT_NE(p.error().message.find(want), std::string::npos) << p.error().message;
    EXPECT_NE(p.error().message.find("bad.toml:"), std::string::npos) << p.error().message;
  }
}

TEST(NicPlan, ResolvesMaxLocalAndSkipsUnsupported) {
  auto b = two_nics();
  const auto rules = rules_from("[nic.\"*\"]\nrings = { rx = \"max\", tx = \"max\" }\n"
                                "channels = { combined = \"local\" }\npause = { rx = false }\n"
                                "coalesce = { tx-usecs = 8 }\n");
  auto devs = nic_probe_all(b, "");
  ASSERT_TRUE(devs.ok());
  auto plan = nic_plan(rules, *devs, b, {});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  std::map<std::string, std::string> got;
  for (const auto &c : plan->changes) {
    got[c.ifname + "/" + c.key] = c.to;
  }
  EXPECT_EQ(got["eth0/rings.rx"], "4096");
  EXPECT_EQ(got["eth0/rings.tx"], "4096");
  EXPECT_EQ(got["eth1/channels.combined"], "4"); // node 1 has 4 CPUs, max 4
  EXPECT_FALSE(got.contains("eth1/rings.rx"));   // already at max
  // channels on e1000e, pause on virtio, tx-usecs on both: skipped, listed.
  std::set<std::string> skipped;
  for (const auto &s : plan->skipped) {
    skipped.insert(s.ifname + "/" + s.key);
  }
  EXPECT_TRUE(skipped.contains("eth0/channels.combined"));
  EXPECT_TRUE(skipped.contains("eth1/pause.rx"));
  EXPECT_TRUE(skipped.contains("eth0/coalesce.tx-usecs"));
  // channels first within a device.
  EXPECT_EQ(plan->changes.back().ifname, "eth1");
}

TEST(NicPlan, InputErrors) {
  auto b = two_nics();
  auto devs = nic_probe_all(b, "");
  ASSERT_TRUE(devs.ok());
  auto over = nic_plan(rules_from("[nic.\"eth1\"]\nrings = { rx = 4096 }\n"), *devs, b, {});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().kind, Errc::input);
  EXPECT_NE(over.error().message.find("exceeds the device maximum 256"), std::string::npos) << over.error().message;
  auto feat = nic_plan(rules_from("[nic.\"*\"]\nfeatures = { warp-drive = true }\n"), *devs, b, {});
  ASSERT_FALSE(feat.ok());
  EXPECT_NE(feat.error().message.find("unknown feature 'warp-drive'"), std::string::npos) << feat.error().message;
  auto unknown = nic_probe_all(b, "eth9");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().kind, Errc::input);
  EXPECT_NE(unknown.error().message.find("unknown interface 'eth9'"), std::string::npos);
}

TEST(NicPlan, FeatureAliasesAndFixed) {
  auto b = two_nics();
  auto devs = nic_probe_all(b, "eth0");
  ASSERT_TRUE(devs.ok());
  auto plan = nic_plan(rules_from("[nic.\"e1000e\"]\nfeatures = { tso = false, lro = true }\n"), *devs, b, {});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_EQ(plan->changes.size(), 2U);
  EXPECT_EQ(plan->changes[0].key, "features.tx-tcp-segmentation");
  EXPECT_EQ(plan->changes[1].key, "features.tx-tcp6-segmentation");
  ASSERT_EQ(plan->skipped.size(), 1U);
  EXPECT_EQ(plan->skipped[0].key, "features.lro");
}

TEST(NicPlan, IrqsOnHousekeepingCpusOfTheNode) {
  auto b = two_nics();
  b.node["1"] = {5, 7}; // 4 and 6 are feeders
  auto devs = nic_probe_all(b, "");
  ASSERT_TRUE(devs.ok());
  auto plan = nic_plan(rules_from("[nic.\"*\"]\nirq = { affinity = \"housekeeping\" }\n"
                                  "rps = { cpus = \"housekeeping\", flow-entries = 32768 }\n"),
                       *devs, b, {});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  std::map<std::string, std::string> got;
  for (const auto &c : plan->changes) {
    got[c.ifname + "/" + c.key] = c.to;
  }
  EXPECT_EQ(got["eth1/irq.30"], "5");
  EXPECT_EQ(got["eth1/irq.31"], "7");
  EXPECT_EQ(got["eth1/irq.32"], "5");
  EXPECT_EQ(got["eth0/irq.24"], "0"); // no node: any CPU
  EXPECT_EQ(got["eth1/rps.rx-0.cpus"], "a0");
  EXPECT_EQ(got["eth1/rps.rx-1.flow-cnt"], "16384");
  EXPECT_EQ(got["/sysctl.net.core.rps_sock_flow_entries"], "32768");
}

TEST(NicApply, FailureRestoresEveryDevice) {
  auto b = two_nics();
  const auto before0 = b.devs["eth0"].current;
  const auto before1 = b.devs["eth1"].current;
  b.fail_dev = "eth1";
  b.fail_group = "coalesce";
  const auto rules = rules_from("[nic.\"*\"]\nrings = { rx = \"max\" }\nchannels = { combined = 3 }\n"
                                "coalesce = { rx-usecs = 0 }\n");
  b.devs["eth1"].current["coalesce.rx-usecs"] = "5";
  const auto before1b = b.devs["eth1"].current;
  auto rep = nic_apply(rules, b, {}, false);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.error().kind, Errc::failed);
  EXPECT_NE(rep.error().message.find("unsupported parameter"), std::string::npos);
  EXPECT_NE(rep.error().message.find("restored"), std::string::npos);
  EXPECT_EQ(b.devs["eth0"].current, before0);
  EXPECT_EQ(b.devs["eth1"].current, before1b);
  (void)before1;
}

TEST(NicApply, SkipUnsupportedAppliesTheRest) {
  auto b = two_nics();
  b.fail_dev = "eth1";
  b.fail_group = "coalesce";
  b.fail_errno = EOPNOTSUPP;
  b.devs["eth1"].current["coalesce.rx-usecs"] = "5";
  const auto rules = rules_from("[nic.\"*\"]\nrings = { rx = \"max\" }\ncoalesce = { rx-usecs = 0 }\n");
  NicOptions o;
  o.skip_unsupported = true;
  auto rep = nic_apply(rules, b, o, false);
  ASSERT_TRUE(rep.ok()) << rep.error().message;
  EXPECT_EQ(b.devs["eth0"].current["rings.rx"], "4096");
  EXPECT_EQ(b.devs["eth0"].current["coalesce.rx-usecs"], "0");
  EXPECT_EQ(b.devs["eth1"].current["coalesce.rx-usecs"], "5");
  bool listed = false;
  for (const auto &s : rep->skipped) {
    listed = listed || (s.ifname == "eth1" && s.key == "coalesce.rx-usecs");
  }
  EXPECT_TRUE(listed);
}

TEST(NicApply, DryRunChangesNothingAndSecondApplyIsEmpty) {
  auto b = two_nics();
  const auto rules = rules_from("[nic.\"*\"]\nrings = { rx = \"max\", tx = \"max\" }\n");
  auto dry = nic_apply(rules, b, {}, true);
  ASSERT_TRUE(dry.ok());
  EXPECT_EQ(b.sets, 0);
  EXPECT_FALSE(dry->plan.changes.empty());
  ASSERT_TRUE(nic_apply(rules, b, {}, false).ok());
  auto again = nic_apply(rules, b, {}, true);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->plan.changes.empty());
}

} // namespace
} // namespace mltune
